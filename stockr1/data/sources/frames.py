"""The one frame format every source returns, its normaliser, and the trading calendar of a set of frames."""

from __future__ import annotations

import pandas as pd

from stockr1.types import CHANNELS

ACTION_COLUMNS = ("dividends", "splits")
_ALIASES = {"adj close": "adj_close", "adj_close": "adj_close", "stock splits": "splits", "stock_splits": "splits"}


def normalize_frame(df: pd.DataFrame, name: str) -> pd.DataFrame:
    """Lower-case columns, a sorted DatetimeIndex named "date", float OHLCV (+ actions if present).

    ``name`` (ticker or file) is used in error messages. Does not repair anything: quality.py does.
    """
    df = df.copy()
    df.columns = [_ALIASES.get(str(c).strip().lower(), str(c).strip().lower()) for c in df.columns]
    if "date" in df.columns:
        df = df.set_index("date")
    elif "datetime" in df.columns:
        df = df.set_index("datetime")
    missing = [c for c in CHANNELS if c not in df.columns]
    if missing:
        raise ValueError(f"{name}: missing columns {missing}; have {list(df.columns)} (need Date, {', '.join(CHANNELS)})")
    try:
        idx = pd.DatetimeIndex(pd.to_datetime(df.index))
    except (ValueError, TypeError) as e:
        raise ValueError(f"{name}: cannot parse the date column: {e}") from e
    if idx.tz is not None:
        idx = idx.tz_localize(None)
    df.index = idx.normalize()
    df.index.name = "date"
    cols = list(CHANNELS) + [c for c in ACTION_COLUMNS if c in df.columns]
    out = df[cols].apply(pd.to_numeric, errors="coerce").astype("float64")
    return out.sort_index(kind="stable")


def trading_calendar(frames: dict[str, pd.DataFrame]) -> pd.DatetimeIndex:
    """The union of all tickers' dates, sorted."""
    idx = pd.DatetimeIndex([])
    for f in frames.values():
        idx = idx.union(pd.DatetimeIndex(f.index))
    return idx.sort_values()
