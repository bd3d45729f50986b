"""The one frame format every source returns, its normaliser, and the trading calendar of a set of frames."""

from __future__ import annotations

import numpy as np
import pandas as pd

from stockr1.types import CHANNELS

ACTION_COLUMNS = ("dividends", "splits")
OPTIONAL_CHANNELS = ("open", "high", "low", "volume")  # may be absent (close-only series); close may not
_ALIASES = {"adj close": "adj_close", "adj_close": "adj_close", "stock splits": "splits", "stock_splits": "splits"}


def normalize_frame(df: pd.DataFrame, name: str) -> pd.DataFrame:
    """Lower-case columns, a sorted DatetimeIndex named "date", float OHLCV (+ actions if present).

    Close is required; open, high, low and volume may be missing, and a missing one becomes a
    column of NaN (an *absent channel*: ``present_channels``, masked by ``Windows.channels``).
    ``name`` (ticker or file) is used in error messages. Does not repair anything: quality.py does.
    """
    df = df.copy()
    df.columns = [_ALIASES.get(str(c).strip().lower(), str(c).strip().lower()) for c in df.columns]
    if "date" in df.columns:
        df = df.set_index("date")
    elif "datetime" in df.columns:
        df = df.set_index("datetime")
    if "close" not in df.columns:
        raise ValueError(f"{name}: no close column; have {list(df.columns)} (need Date and Close; "
                         f"{', '.join(c for c in CHANNELS if c != 'close')} are optional)")
    for c in OPTIONAL_CHANNELS:  # an absent channel is all NaN: masked downstream, never filled in
        if c not in df.columns:
            df[c] = np.nan
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


def present_channels(frame: pd.DataFrame) -> np.ndarray:
    """[5] bool in CHANNELS order: which channels the frame has at all (an absent one is all NaN)."""
    return np.array([bool(frame[c].notna().any()) for c in CHANNELS], dtype=bool)
