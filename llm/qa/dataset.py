"""QA items on disk (JSONL, one item per line) and a small summary."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict
from pathlib import Path

from llm.qa.core import QAItem


def item_to_dict(item: QAItem) -> dict:
    d = asdict(item)
    d["choices"] = list(item.choices)
    d["params"] = dict(item.params)
    return d


def item_from_dict(d: dict) -> QAItem:
    return QAItem(**{**d, "choices": tuple(d.get("choices", ())), "params": dict(d.get("params", {}))})


def save_items(items: list[QAItem], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for it in items:
            f.write(json.dumps(item_to_dict(it)) + "\n")
    return path


def load_items(path: str | Path) -> list[QAItem]:
    path = Path(path)
    out = []
    with path.open() as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                out.append(item_from_dict(json.loads(line)))
            except (json.JSONDecodeError, TypeError) as e:
                raise ValueError(f"{path}:{n}: not a QAItem record ({e})") from e
    return out


def summarize(items: list[QAItem]) -> dict[str, dict[str, int]]:
    return {
        "by_split": dict(Counter(i.split for i in items)),
        "by_family": dict(Counter(i.family for i in items)),
        "by_answer_type": dict(Counter(i.answer_type for i in items)),
    }
