"""A pretrained LLM may know the prices of the test period: its knowledge cutoff against the test dates.

Every policy config declares ``knowledge_cutoff: YYYY-MM`` (the last month the model's training text may
cover). An evaluation of a *pretrained* policy refuses decision dates on or before the end of that month
unless the user passes ``--allow-before-cutoff``; either way the report's first line says what held. A
random-init policy (the tiny CPU policy, a smoke run) has memorised nothing, and a pretrained policy
without a declared cutoff is refused: an unknown cutoff cannot be checked.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

_MONTH = re.compile(r"^\d{4}-(0[1-9]|1[0-2])$")


def check_month(value: str | None, where: str = "policy.knowledge_cutoff") -> None:
    if value is not None and not (isinstance(value, str) and _MONTH.match(value)):
        raise ValueError(f"{where} must be YYYY-MM (e.g. 2025-07), got {value!r}")


def cutoff_end(month: str) -> np.datetime64:
    """The last day of ``month`` (YYYY-MM)."""
    return (np.datetime64(month, "M") + 1).astype("datetime64[D]") - 1


def cutoff_line(pretrained: bool, model: str, cutoff: str | None, dates: Sequence, allow: bool) -> str:
    """The report's first line, or ValueError when the evaluation must be refused.

    dates: the decision dates evaluated (anything ``np.datetime64`` reads)."""
    if not pretrained:
        return f"Knowledge cutoff: not applicable ({model} is randomly initialised: it has memorised no prices)."
    check_month(cutoff)
    d = np.array([np.datetime64(x, "D") for x in dates])
    if cutoff is None:
        if not allow:
            raise ValueError(f"{model} is pretrained but its policy config declares no knowledge_cutoff (YYYY-MM): "
                             "set policy.knowledge_cutoff, or pass --allow-before-cutoff to evaluate anyway")
        return (f"**Knowledge cutoff unknown** for {model}; evaluated with --allow-before-cutoff: the model may have "
                "memorised the prices of these dates.")
    before = int((d <= cutoff_end(cutoff)).sum())
    if before and not allow:
        raise ValueError(f"{before} of {len(d)} decision dates are on or before {model}'s knowledge cutoff "
                         f"{cutoff} (first {d.min()}): it may have memorised their prices; evaluate on later dates or "
                         "pass --allow-before-cutoff")
    if before:
        return (f"**{before} of {len(d)} decision dates are on or before the knowledge cutoff {cutoff}** of {model} "
                "(--allow-before-cutoff): the model may have memorised these prices.")
    return f"Knowledge cutoff {cutoff} of {model}: all {len(d)} decision dates are after it."
