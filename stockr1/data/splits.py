"""Chronological train / val / test assignment with an embargo.

Windows are assigned by their decision day t on the global trading calendar (the union of all
tickers' dates), position p(t):

    train: p(t) <  p_val  - embargo
    val:   p_val <= p(t) < p_test - embargo
    test:  p(t) >= p_test

Windows whose t falls inside an embargo gap are dropped and counted. The embargo is at least the
look-ahead of the labels in use: the longest number of trading days after t that any label or
target of a window reads (the horizon S for ``y``/``future``; more for a pipeline whose own labels
reach further, e.g. Trading-R1's 15-day labels). Then the labels of the last train window end
strictly before the first val decision day, and likewise for val -> test, so no label of an earlier
split overlaps a later split's period.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from stockr1.types import SPLITS


@dataclass(frozen=True)
class SplitSpec:
    """Either proportional (``val_frac``/``test_frac`` of the calendar) or by dates (``val_start``,
    ``test_start``; ISO strings, the first day of each split). ``embargo`` defaults to the look-ahead
    of the labels in use (see ``assign_splits``); a smaller one is refused."""

    val_frac: float = 0.15
    test_frac: float = 0.15
    val_start: str | None = None
    test_start: str | None = None
    embargo: int | None = None

    def boundaries(self, calendar: pd.DatetimeIndex) -> tuple[int, int]:
        """Positions (p_val, p_test) in ``calendar``."""
        n = len(calendar)
        if (self.val_start is None) != (self.test_start is None):
            raise ValueError("SplitSpec: give both val_start and test_start, or neither")
        if self.val_start is not None:
            p_val = int(calendar.searchsorted(pd.Timestamp(self.val_start)))
            p_test = int(calendar.searchsorted(pd.Timestamp(self.test_start)))
        else:
            if not (0 < self.val_frac < 1 and 0 < self.test_frac < 1 and self.val_frac + self.test_frac < 1):
                raise ValueError(f"SplitSpec fractions must be in (0,1) and sum < 1: {self}")
            p_test = int(round(n * (1.0 - self.test_frac)))
            p_val = int(round(n * (1.0 - self.test_frac - self.val_frac)))
        if not 0 <= p_val <= p_test <= n:
            raise ValueError(f"SplitSpec {self} gives invalid boundaries val={p_val} test={p_test} of {n} days")
        return p_val, p_test


# The paper's split for yfinance (App. C): pretrain before 2025-01-01, test 2025-01-01 -> 2025-10-01.
# The paper names no validation period; we hold out the last half-year of the pretraining span.
PAPER_SPLIT = SplitSpec(val_start="2024-07-01", test_start="2025-01-01")
SAMPLE_SPLIT = SplitSpec(val_frac=0.15, test_frac=0.15)
# The sample's own boundary days (SAMPLE_SPLIT on the sample calendar: positions 3522 and 4276 of its
# 5031 days), fixed as dates so every series of a universe shares ONE set of split dates with it:
# market-wide moves reach every series, so one series' test days must not be another's train days.
# tests/test_data_stocks.py recomputes them from the sample and requires equality.
SAMPLE_VAL_START, SAMPLE_TEST_START = "2013-01-03", "2015-12-31"
STOCK_SPLIT = SplitSpec(val_start=SAMPLE_VAL_START, test_start=SAMPLE_TEST_START)  # stocks and universe


def assign_splits(dates: np.ndarray, calendar: pd.DatetimeIndex, spec: SplitSpec, lookahead: int) -> np.ndarray:
    """Split name per decision date ("" = inside an embargo gap, to be dropped).

    dates: [N] datetime64; ``lookahead``: the longest look-ahead in trading days of any label or
    target in use (>= the horizon); returns [N] object array of SPLITS names or "".
    """
    embargo = lookahead if spec.embargo is None else spec.embargo
    if embargo < lookahead:
        raise ValueError(f"embargo {embargo} < label look-ahead {lookahead}: labels would overlap the next split")
    p_val, p_test = spec.boundaries(calendar)
    pos = calendar.searchsorted(pd.DatetimeIndex(dates))
    out = np.full(len(pos), "", dtype=object)
    out[pos < p_val - embargo] = SPLITS[0]
    out[(pos >= p_val) & (pos < p_test - embargo)] = SPLITS[1]
    out[pos >= p_test] = SPLITS[2]
    return out


def source_split(source: str) -> SplitSpec:
    """The split of a built-in source: the paper's dates for yfinance, the sample's boundary dates for
    the stock sources, the sample's 70/15/15 (its calendar) for the rest."""
    return {"yfinance": PAPER_SPLIT, "stocks": STOCK_SPLIT, "universe": STOCK_SPLIT}.get(source, SAMPLE_SPLIT)
