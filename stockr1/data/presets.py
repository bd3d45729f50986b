"""The ready-made datasets tests and benchmarks use: the offline sample, the offline stocks (alone or
with the sample's indices) and small synthetic sets."""

from __future__ import annotations

from functools import lru_cache

from stockr1.data.quality import check_frames
from stockr1.data.sources import load_source
from stockr1.data.splits import SAMPLE_SPLIT, STOCK_SPLIT
from stockr1.data.windows import build_windows
from stockr1.types import Windows


@lru_cache(maxsize=8)
def sample_windows(lookback: int = 90, horizon: int = 10, context: bool = False, label_lookahead: int = 0) -> Windows:
    """The embedded offline default: S&P 500 + NASDAQ daily OHLCV 1999-2018 (``arch``), split 70/15/15
    by date with an embargo of ``max(horizon, label_lookahead)`` days (``label_lookahead``: a
    pipeline's own labels that read further than the horizon, see ``build_windows``). Cached; treat
    the arrays as read-only. With ``context=True`` each window carries its rendered point-in-time
    context (arch macro + price-derived market-wrap headlines, see stockr1.data.context)."""
    frames, _ = check_frames(load_source("sample"))  # repairs 2 zero-volume NASDAQ days, see quality.py
    store = None
    if context:
        from stockr1.data.context import sample_store

        store = sample_store(frames)
    return build_windows(frames, lookback=lookback, horizon=horizon, split=SAMPLE_SPLIT, context=store,
                         label_lookahead=label_lookahead)


@lru_cache(maxsize=8)
def synthetic_windows(n_tickers: int = 3, n_days: int = 400, seed: int = 0, lookback: int = 90,
                      horizon: int = 10, context: bool = False) -> Windows:
    """Small seeded synthetic windows for tests (regime switching, jumps, volume). Cached."""
    frames, _ = check_frames(load_source("synthetic", n_tickers=n_tickers, n_days=n_days, seed=seed))
    store = None
    if context:
        from stockr1.data.context import synthetic_store

        store = synthetic_store(frames, seed=seed)
    return build_windows(frames, lookback=lookback, horizon=horizon, split=SAMPLE_SPLIT, context=store)


STOCK_SOURCES = ("stocks", "universe")


@lru_cache(maxsize=2)
def stock_frames(source: str = "stocks") -> dict:
    """The checked daily frames of ``stocks`` (20 close-only S&P 500 names, skfolio) or ``universe``
    (those plus the sample's two OHLCV indices). Cached; treat as read-only."""
    if source not in STOCK_SOURCES:
        raise ValueError(f"stock_frames: source must be one of {STOCK_SOURCES}, got {source!r}")
    frames, _ = check_frames(load_source(source))
    return frames


@lru_cache(maxsize=4)
def stock_windows(source: str = "stocks", lookback: int = 90, horizon: int = 10, context: bool = False,
                  label_lookahead: int = 0) -> Windows:
    """Windows of ``stocks`` or ``universe`` (``stock_frames``), split on the sample's own boundary
    dates (``STOCK_SPLIT``) so the stocks and the indices share one set of split dates; the indices'
    windows get the very split labels of ``sample_windows``. Close-only rows have
    ``channels = [F, F, F, T, F]``. Cached (the universe is ~160k windows, ~1 GB); treat as read-only."""
    frames = stock_frames(source)
    store = None
    if context:
        from stockr1.data.context import stocks_store

        store = stocks_store(frames)
    return build_windows(frames, lookback=lookback, horizon=horizon, split=STOCK_SPLIT, context=store,
                         label_lookahead=label_lookahead)
