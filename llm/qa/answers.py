"""Answer extraction and grading: one place that every benchmark and reward uses.

``extract_answer`` pulls the text inside the last ``<answer>…</answer>``; ``normalize_answer`` maps it
to the item's canonical form (or ``None`` if it cannot be read); ``is_correct`` grades it.
"""

from __future__ import annotations

import re

from llm.qa.core import NO, YES, QAItem

_ANSWER_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_NUM_RE = re.compile(r"[-+−]?\d[\d,]*(?:\.\d+)?|[-+−]?\.\d+")


def extract_answer(text: str) -> str | None:
    """The content of the last complete ``<answer>…</answer>`` block, stripped; None if absent."""
    found = _ANSWER_RE.findall(text)
    return found[-1].strip() if found else None


def parse_number(text: str) -> float | None:
    m = _NUM_RE.search(text)
    if m is None:
        return None
    try:
        return float(m.group(0).replace(",", "").replace("−", "-"))
    except ValueError:
        return None


def normalize_answer(item: QAItem, raw: str | None) -> str | None:
    """Canonical answer text for ``item``'s answer type, or None if ``raw`` is unreadable.

    yes_no: the first word decides ("Yes, because…" → "Yes"). choice: the one choice mentioned
    (two or more different choices → ambiguous → None). numeric: the first number, formatted with 2 decimals.
    """
    if raw is None:
        return None
    s = raw.strip().strip("*").strip()
    low = s.lower()
    if item.answer_type == "yes_no":
        word = re.split(r"[^a-z]+", low, maxsplit=1)[0] if low else ""
        return YES if word == "yes" else (NO if word == "no" else None)
    if item.answer_type == "choice":
        hits = [c for c in item.choices if re.search(rf"(?<![\w-]){re.escape(c.lower())}(?![\w-])", low)]
        return hits[0] if len(hits) == 1 else None
    v = parse_number(s)
    return None if v is None else f"{v:.2f}"


def is_correct(item: QAItem, answer: str | None) -> bool:
    """Grade a canonical (or raw) answer. Numeric: |pred - truth| <= tolerance (+1e-9)."""
    pred = normalize_answer(item, answer)
    if pred is None:
        return False
    if item.answer_type == "numeric":
        return abs(float(pred) - float(item.answer)) <= item.tolerance + 1e-9
    return pred == item.answer


def grade_completion(item: QAItem, completion: str) -> tuple[bool, bool]:
    """(parsed, correct) for a full model completion."""
    pred = normalize_answer(item, extract_answer(completion))
    return pred is not None, pred is not None and is_correct(item, pred)
