"""The embargo follows the longest look-ahead of the labels in use, and the Stock-R1 windows (whose
longest look-ahead is their horizon S) are exactly what they were before the embargo was computed:
same rows, order and split labels. The expected values below were produced by the code at 43458dc
(embargo = horizon), before any change."""

from __future__ import annotations

import hashlib

import pandas as pd
import pytest

from stockr1.data import sample_windows, split_counts, synthetic_windows
from stockr1.types import Windows


def row_key_hash(w: Windows) -> str:
    """sha256 over (ticker, decision day, split) of every row in order: exact strings, so the value
    does not depend on floating point, and any added, dropped, moved or relabelled row changes it."""
    h = hashlib.sha256()
    for tk, d, s in zip(w.ticker, pd.DatetimeIndex(w.date).strftime("%Y-%m-%d"), w.split, strict=True):
        h.update(f"{tk},{d},{s}\n".encode())
    return h.hexdigest()


SAMPLE_90_10 = "17bd09a3c20d41030848e92790930870e8bea96714a94385704174f6e690686f"


@pytest.mark.parametrize("args, expected", [
    ((90, 10), SAMPLE_90_10),
    ((60, 5), "6c3a6a6fb4b3a7867eab8a7435f155c767b05544ac92a213b852ebdf565124ef"),
    ((30, 10), "0e4102b841c6be6da7dccdff702e07618eb20074df210045166a2ee68615e2ef"),
])
def test_stock_r1_sample_windows_unchanged(args, expected):
    assert row_key_hash(sample_windows(*args)) == expected


def test_stock_r1_default_sample_split_counts_and_dates_unchanged():
    w = sample_windows(90, 10)
    assert split_counts(w) == {"train": 6844, "val": 1488, "test": 1490}
    spans = {s: tuple(str(pd.Timestamp(d).date()) for d in (w.date[w.split == s].min(), w.date[w.split == s].max()))
             for s in ("train", "val", "test")}
    assert spans == {"train": ("1999-05-13", "2012-12-17"), "val": ("2013-01-03", "2015-12-15"),
                     "test": ("2015-12-31", "2018-12-14")}


def test_stock_r1_context_windows_have_the_same_rows():
    """The rendered text may change (macro release lags), the rows may not."""
    assert row_key_hash(sample_windows(90, 10, context=True)) == SAMPLE_90_10


@pytest.mark.parametrize("kw, n, expected", [
    ({}, 840, "7998242a3b0a910e73615ac319f5cbb7d2b7e0b033c53e43307224755ab1354a"),
    ({"context": True}, 840, "7998242a3b0a910e73615ac319f5cbb7d2b7e0b033c53e43307224755ab1354a"),
    ({"n_tickers": 2, "n_days": 300, "seed": 3}, 360, "8df7ab4e0863e790d900ca933273af4129d8af215388d7d743b254d5aa301a62"),
])
def test_synthetic_windows_unchanged(kw, n, expected):
    w = synthetic_windows(**kw)
    assert len(w) == n and row_key_hash(w) == expected


def test_embargo_is_the_longest_lookahead_in_use():
    """A pipeline whose labels read 15 days ahead gets a 15-day embargo from build_windows, computed
    from what it passes; an explicit embargo shorter than that is refused."""
    from stockr1.data import build_windows, load_source, trading_calendar
    from stockr1.data.splits import SplitSpec

    frames = load_source("synthetic", n_tickers=1, n_days=300, seed=0)
    cal = trading_calendar(frames)
    for la, gap in ((0, 5), (3, 5), (15, 15)):
        w = build_windows(frames, lookback=20, horizon=5, split=SplitSpec(0.2, 0.2), label_lookahead=la)
        pos = cal.get_indexer(pd.DatetimeIndex(w.date))
        for a, b in (("train", "val"), ("val", "test")):
            assert pos[w.split == b].min() - pos[w.split == a].max() == gap + 1
    with pytest.raises(ValueError, match="embargo 10 < label look-ahead 15"):
        build_windows(frames, lookback=20, horizon=5, split=SplitSpec(0.2, 0.2, embargo=10), label_lookahead=15)
