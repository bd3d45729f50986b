"""Trading-R1 rewards (App. 10 three-stage investment reward, App. 11 decision placement and the
market-grounded outcome reward). Pure functions of the completion text; TRL-style wrappers at the end.

Parsing choices (the paper names the elements, not the regexes):
- XML sections: ``<tag>...</tag>`` pairs (same tag name), ``think`` excluded, ``conclusion`` mandatory:
  a thesis without a conclusion section scores 0 structure (App. 10 "require a mandatory conclusion").
- Bullets: lines starting with ``-``, ``+``, ``* `` (star then space, so ``*italic*`` is not a bullet)
  or ``1.`` / ``1)``.
- Quote: italic ``*text*`` (not ``**bold**``); source: inline code ```text```; the opinion is the text
  before the first quote or source marker.
- Headers ``#``..``######`` at line start; bold ``**x**``; a table needs a ``|---|`` separator row.
- Decision: ``DECISION: [[[X]]]`` searched in the last three non-empty lines (App. 10); X normalised
  (case, ``_``/``-`` -> space). The missing-decision penalty -1.5 is scaled by ``lambda_dec`` like
  the matrix entries, since it is meant to match their severity.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from rl.methods.trading_r1.labels import ACTIONS

_SECTION = re.compile(r"<([A-Za-z_][\w-]*)>(.*?)</\1>", re.S)
_BULLET = re.compile(r"^\s*(?:[-+]|\*(?=\s)|\d+[.)])\s+(.*\S)\s*$", re.M)
_HEADER = re.compile(r"^\s*#{1,6}\s+\S", re.M)
_BOLD = re.compile(r"\*\*[^*\n]+\*\*")
_TABLE_SEP = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)+\|?\s*$", re.M)
_ITALIC = re.compile(r"(?<!\*)\*(?!\*)([^*\n]+?)(?<!\*)\*(?!\*)")
_CODE = re.compile(r"`([^`\n]+)`")
_DECISION = re.compile(r"DECISION:\s*\[\[\[(.*?)\]\]\]", re.I)

# App. 10 asymmetric matrix; rows = prediction, columns = truth, both in ACTIONS order (SS..SB).
DECISION_MATRIX: tuple[tuple[float, ...], ...] = (
    (1.00, 0.75, -1.25, -2.00, -2.25),
    (0.75, 1.00, -0.75, -1.50, -2.00),
    (-1.50, -1.00, 1.00, -1.00, -1.50),
    (-1.75, -1.25, -0.75, 1.00, 0.75),
    (-2.00, -1.50, -1.25, 0.75, 1.00),
)
NO_DECISION = -1.5


def words(text: str) -> int:
    return len(text.split())


def sections(text: str) -> list[tuple[str, str]]:
    """(tag, content) of every top-level XML section except ``think``."""
    return [(t.lower(), c) for t, c in _SECTION.findall(text) if t.lower() != "think"]


def bullets(content: str) -> list[str]:
    return _BULLET.findall(content)


# ---------------------------------------------------------------- Stage I: structure
def count_reward(s: int) -> float:
    if 5 <= s <= 7:
        return 1.0
    if s < 5:
        return max(0.3, s / 5 * 0.7)
    return max(0.3, 1.0 - 0.15 * (s - 7))


def section_structure(content: str, min_words: int = 50) -> float:
    if words(content) < min_words:
        return 0.2
    return (0.3 * bool(_HEADER.search(content)) + 0.4 * bool(bullets(content))
            + 0.2 * bool(_BOLD.search(content)) + 0.1 * bool(_TABLE_SEP.search(content)))


def structure_reward(text: str) -> float:
    secs = sections(text)
    if not any(t == "conclusion" for t, _ in secs):
        return 0.0
    s = len(secs) - 1
    return 0.6 * count_reward(s) + 0.4 * sum(section_structure(c) for _, c in secs) / len(secs)


# ---------------------------------------------------------------- Stage II: evidence
def opinion_reward(op_words: int, cited: bool, w_min: int = 15, w_max: int = 90) -> float:
    if not cited:
        return min(0.3, op_words / w_min * 0.3)
    if op_words < w_min:
        return op_words / w_min
    if op_words > w_max:
        return max(0.5, 1.0 - 0.02 * (op_words - w_max))
    return 1.0


def bullet_reward(bullet: str) -> float:
    q, src = _ITALIC.search(bullet), _CODE.search(bullet)
    cut = min([m.start() for m in (q, src) if m is not None], default=len(bullet))
    op = words(bullet[:cut])
    return 0.4 * opinion_reward(op, q is not None and src is not None) + 0.35 * (q is not None) + 0.25 * (src is not None)


def bullet_count_reward(n: int) -> float:
    if 4 <= n <= 7:
        return 1.0
    if n < 4:
        return n / 4
    return max(0.3, 1.0 - 0.1 * (n - 7))


def _harmonic(values: list[float]) -> float:
    return len(values) / sum(1.0 / max(v, 0.01) for v in values) if values else 0.0


def section_evidence(content: str) -> float:
    bs = bullets(content)
    return 0.3 * bullet_count_reward(len(bs)) + 0.7 * _harmonic([bullet_reward(b) for b in bs])


def evidence_reward(text: str) -> float:
    return _harmonic([section_evidence(c) for t, c in sections(text) if t != "conclusion"])


# ---------------------------------------------------------------- Stage III: decision
def parse_decision(text: str) -> int | None:
    """Class index of the terminal ``DECISION: [[[X]]]`` (last three non-empty lines), else None."""
    tail = "\n".join([ln for ln in text.strip().splitlines() if ln.strip()][-3:])
    found = _DECISION.findall(tail)
    if not found:
        return None
    name = re.sub(r"[\s_-]+", " ", found[-1]).strip().upper()
    return ACTIONS.index(name) if name in ACTIONS else None


def decision_reward(text: str, label: int, lambda_dec: float = 1.0) -> float:
    pred = parse_decision(text)
    if pred is None:
        return NO_DECISION * lambda_dec
    return DECISION_MATRIX[pred][label] * lambda_dec


def decision_placement_reward(text: str) -> float:
    """App. 11.1: 0.5 if a DECISION tag exists + 0.5 if its last occurrence follows the last XML close."""
    matches = list(_DECISION.finditer(text))
    if not matches:
        return 0.0
    closes = [m.end() for m in re.finditer(r"</[A-Za-z_][\w-]*>", text)]
    return 0.5 + 0.5 * (not closes or matches[-1].start() >= closes[-1])


# ---------------------------------------------------------------- App. 11.2 outcome reward
@dataclass(frozen=True)
class OutcomeConfig:
    """The paper gives the form but no values; these defaults are for 10-day excess log returns of
    liquid US equities (daily vol ~1-2%): a +-1% neutral band, saturation at 5%, intensity steps at
    2% and 4%, a cost of 0.05 reward units per trade, symmetric penalty scale gamma = 1."""

    b: float = 1.0
    gamma: float = 1.0
    delta: float = 0.01
    u: float = 0.05
    kappa: float = 0.05
    tau1: float = 0.02
    tau2: float = 0.04


SIGNAL: tuple[int, ...] = (-2, -1, 0, 1, 2)  # s(a) in ACTIONS order


def outcome_reward(pred: int | None, excess: float, cfg: OutcomeConfig = OutcomeConfig()) -> float:
    """R_out(a; e) for excess log return e = r - r_m; no decision counts as the worst case -gamma*b.

    s(a) != 0 with e == 0 exactly is neither right nor wrong; it pays the cost only.
    """
    lo, hi = -cfg.gamma * cfg.b, cfg.b
    if pred is None:
        return lo
    s, a = SIGNAL[pred], abs(excess)
    m = min(1.0, a / cfg.u)
    if s == 0:
        r = cfg.b * (1 - a / cfg.delta) if a <= cfg.delta else -cfg.b * cfg.gamma * (a - cfg.delta) / (cfg.u - cfg.delta)
    elif s * excess > 0:
        intensity = (a > cfg.tau1) + (a > cfg.tau2)
        r = cfg.b * (1 - abs(abs(s) - intensity) / 2) * m - cfg.kappa
    elif s * excess < 0:
        r = -cfg.b * cfg.gamma * m - cfg.kappa
    else:
        r = -cfg.kappa
    return min(hi, max(lo, r))


# ---------------------------------------------------------------- TRL-style wrappers
def _text(c) -> str:
    """A completion as plain text (TRL passes str, or a list of chat messages)."""
    if isinstance(c, str):
        return c
    return "".join(m.get("content", "") for m in c)


def structure_rewards(prompts, completions, **_) -> list[float | None]:
    return [structure_reward(_text(c)) for c in completions]


def evidence_rewards(prompts, completions, **_) -> list[float | None]:
    return [evidence_reward(_text(c)) for c in completions]


def decision_rewards(prompts, completions, label, lambda_dec: float = 1.0, **_) -> list[float | None]:
    """``label``: class index per sample (-1 / None = undefined -> None, skipped by the trainer)."""
    return [None if y is None or y < 0 else decision_reward(_text(c), int(y), lambda_dec)
            for c, y in zip(completions, label, strict=True)]


def placement_rewards(prompts, completions, **_) -> list[float | None]:
    return [decision_placement_reward(_text(c)) for c in completions]


def outcome_rewards(prompts, completions, excess_return, **_) -> list[float | None]:
    return [None if e is None or math.isnan(e) else outcome_reward(parse_decision(_text(c)), float(e))
            for c, e in zip(completions, excess_return, strict=True)]


def investment_reward(text: str, label: int, weights: tuple[float, float, float] = (1.0, 1.0, 1.0)) -> float:
    """App. 10 aggregation: l_struct R_structure + l_evid R_evidence + l_dec R_decision."""
    ls, le, ld = weights
    return ls * structure_reward(text) + le * evidence_reward(text) + ld * decision_reward(text, label)
