"""The one verdict rule of every generated claim: a claim holds only where its interval excludes 0.

Every README, report and summary the benchmarks write states a comparison ("u-GRPO above SFT", "the
model's CRPS below the baseline's", "unparsed decisions at most 5%") as a difference with an interval,
and reads its verdict from the interval with ``verdict``, never from the difference alone:

- ``"holds"``: the interval lies entirely on the claimed side of 0;
- ``"tie"``: the interval contains 0 (the data cannot tell the two apart);
- ``"worse"``: the interval lies entirely on the other side (the opposite of the claim holds).

A target (a threshold such as "at least 80%") is the same rule on ``value - target``
(``target_verdict``). ``phrase`` gives the words every report uses, so a tie reads as a tie everywhere.
"""

from __future__ import annotations

import math

HOLDS, TIE, WORSE = "holds", "tie", "worse"
VERDICTS = (HOLDS, TIE, WORSE)

REASONS = {
    HOLDS: "the interval excludes 0",
    TIE: "the interval includes 0",
    WORSE: "the interval excludes 0 on the other side",
}
PHRASES = {v: f"{v} ({r})" for v, r in REASONS.items()}


def verdict(diff: float, lo: float, hi: float, higher_is_better: bool = True) -> str:
    """``"holds" | "tie" | "worse"`` for the claim "``diff`` is on the good side of 0".

    diff: the point estimate of the difference (claimed side: > 0 when ``higher_is_better``, else < 0)
    lo, hi: its interval. The verdict reads only the interval; ``diff`` is checked to be a number so a
    missing estimate is an error rather than a silent tie."""
    for name, v in (("diff", diff), ("lo", lo), ("hi", hi)):
        if v is None or not isinstance(v, (int, float)) or math.isnan(float(v)):
            raise ValueError(f"verdict needs numbers; {name} is {v!r} (diff={diff!r}, interval=[{lo!r}, {hi!r}])")
    if lo > hi:
        raise ValueError(f"verdict: interval [{lo}, {hi}] has lo > hi")
    if lo <= 0.0 <= hi:
        return TIE
    good = lo > 0.0 if higher_is_better else hi < 0.0
    return HOLDS if good else WORSE


def target_verdict(value: float, lo: float, hi: float, target: float, at_least: bool = True) -> str:
    """The verdict of "``value`` is at least (``at_least``) / at most ``target``" from its interval
    [lo, hi]: ``verdict(value - target, lo - target, hi - target)``."""
    return verdict(value - target, lo - target, hi - target, higher_is_better=at_least)


def phrase(v: str) -> str:
    """The words for a verdict (``PHRASES``)."""
    if v not in PHRASES:
        raise ValueError(f"unknown verdict {v!r}; one of {VERDICTS}")
    return PHRASES[v]


def claim_line(claim: str, diff: float, lo: float, hi: float, higher_is_better: bool = True, digits: int = 1,
               unit: str = "") -> str:
    """One generated line: ``claim: diff [lo, hi]unit: **verdict**`` with the verdict's phrase."""
    v = verdict(diff, lo, hi, higher_is_better)
    return (f"{claim}: {diff:+.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}]{unit}: **{v}** "
            f"({REASONS[v]})")
