"""Point-in-time windows: frames -> ``stockr1.types.Windows``.

A window's decision day t is the last day of its history. For ticker rows indexed 0..T-1 and
decision row i (L <= i <= T-1-S):

    x      [5, L]  log returns of rows i-L+1..i (uses the close of row i-L)
    y      [5, S]  log returns of rows i+1..i+S                              (label)
    hist   [L, 5]  OHLCV rows i-L+1..i, adjusted as of t (see adjust.py); for a back-adjusted
                   source rebased so that the close of t is 100 (price_frame.py; ``Windows.frame``)
    future [S, 5]  OHLCV rows i+1..i+S in the same frame                     (label)
    channels [5]   which channels the ticker has (an absent one is NaN in all four arrays)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from stockr1.data.adjust import action_log_factors, window_prices
from stockr1.data.lazy_context import LazyContext
from stockr1.data.price_frame import frame_kind, rebase
from stockr1.data.returns import log_returns
from stockr1.data.sources.frames import present_channels, trading_calendar
from stockr1.data.splits import SAMPLE_SPLIT, SplitSpec, assign_splits
from stockr1.types import CHANNELS, REBASED, SPLITS, Windows

if TYPE_CHECKING:
    from stockr1.data.context import PointInTimeStore
    from stockr1.data.membership import Membership


def build_windows(
    frames: dict[str, pd.DataFrame],
    lookback: int = 90,
    horizon: int = 10,
    split: SplitSpec = SAMPLE_SPLIT,
    stride: int = 1,
    context: PointInTimeStore | None = None,
    start: str | None = None,
    end: str | None = None,
    leak_days: int = 0,
    label_lookahead: int = 0,
    membership: Membership | None = None,
    progress: bool = False,
) -> Windows:
    """All windows of all tickers (ticker-major, then by date), split chronologically.

    ``label_lookahead``: how many trading days after t the caller's own labels read, when they reach
    past ``y``/``future`` (Trading-R1's: ``rl.methods.trading_r1.labels.label_lookahead``). The
    embargo defaults to the longest look-ahead in use, ``max(horizon, label_lookahead)``, so no
    label of one split reads a day of the next; at 0 (every Stock-R1 pipeline) it is the horizon.

    ``start``/``end`` restrict the decision days (inclusive); ``membership`` keeps only decision days
    on which the ticker was an index member (stockr1.data.membership; the split calendar stays the
    union of all frames, so membership never moves a split boundary). ``context`` fills ``Windows.context``
    with ``context.render_context(ticker, t)``: every row now with a tqdm bar if ``progress``, else each row
    when first read (``stockr1.data.lazy_context.LazyContext``). ``leak_days`` is a debug hook and must stay 0: it
    moves the inputs (x, hist) ``leak_days`` rows into the future while keeping t, so tests can show
    that the point-in-time invariance check catches a one-day look-ahead.
    """
    if lookback < 1 or horizon < 1 or stride < 1 or leak_days < 0 or label_lookahead < 0:
        raise ValueError(f"invalid lookback={lookback} horizon={horizon} stride={stride} leak_days={leak_days} "
                         f"label_lookahead={label_lookahead}")
    calendar = trading_calendar(frames)
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("ticker", "date", "x", "y", "hist", "future", "frame",
                                                          "channels")}
    for ticker in sorted(frames):
        frame = frames[ticker]
        raw = frame[list(CHANNELS)].to_numpy(dtype=np.float64)
        log_f, log_fv = action_log_factors(frame)
        t_rows = np.arange(lookback, len(frame) - horizon - leak_days, stride)
        dates = pd.DatetimeIndex(frame.index)
        if start is not None:
            t_rows = t_rows[dates[t_rows] >= pd.Timestamp(start)]
        if end is not None:
            t_rows = t_rows[dates[t_rows] <= pd.Timestamp(end)]
        if membership is not None:
            t_rows = t_rows[membership.is_member(ticker, dates[t_rows])]
        if len(t_rows) == 0:
            continue
        offsets = np.arange(-lookback, horizon + 1)[None]  # rows t-L .. t+S, t at column L
        inputs = window_prices(raw, log_f, log_fv, (t_rows + leak_days)[:, None] + offsets, lookback)
        labels = inputs if leak_days == 0 else window_prices(raw, log_f, log_fv, t_rows[:, None] + offsets, lookback)
        parts["ticker"].append(np.full(len(t_rows), ticker, dtype=object))
        parts["date"].append(dates[t_rows].to_numpy(dtype="datetime64[ns]"))
        parts["x"].append(log_returns(inputs[:, : lookback + 1]).transpose(0, 2, 1))
        parts["y"].append(log_returns(labels[:, lookback:]).transpose(0, 2, 1))
        kind = frame_kind(frame)
        if kind == REBASED:  # back-adjusted levels hold later actions: show prices relative to the close of t
            inputs, labels = rebase(inputs, lookback), rebase(labels, lookback)
        parts["hist"].append(inputs[:, 1 : lookback + 1])
        parts["future"].append(labels[:, lookback + 1 :])
        parts["frame"].append(np.full(len(t_rows), kind, dtype=object))
        parts["channels"].append(np.repeat(present_channels(frame)[None], len(t_rows), axis=0))  # absent = all NaN
    if not parts["ticker"]:
        raise ValueError(
            f"no windows: every ticker has fewer than lookback+horizon+1 = {lookback + horizon + 1} rows "
            f"in the requested range{' and membership' if membership is not None else ''} (tickers: {sorted(frames)})"
        )
    cat = {k: np.concatenate(v) for k, v in parts.items()}
    split_names = assign_splits(cat["date"], calendar, split, max(horizon, label_lookahead))
    keep = split_names != ""
    ctx: np.ndarray | LazyContext = np.full(int(keep.sum()), "", dtype=object)
    if context is not None and progress:  # stockr1 data build writes every context: render them now, with a bar
        from tqdm.auto import tqdm

        pairs = tqdm(zip(cat["ticker"][keep], cat["date"][keep], strict=True), desc="context", total=len(ctx),
                     unit="window", mininterval=2.0)
        ctx = np.array([context.render_context(tk, pd.Timestamp(d)) for tk, d in pairs], dtype=object)
    elif context is not None:  # rendered when first read: a run reads the few thousand its questions use
        ctx = LazyContext(context.render_context, cat["ticker"][keep], cat["date"][keep])
    return Windows(
        ticker=cat["ticker"][keep],
        date=cat["date"][keep],
        x=cat["x"][keep].astype(np.float32),
        y=cat["y"][keep].astype(np.float32),
        hist=cat["hist"][keep],
        future=cat["future"][keep],
        split=split_names[keep],
        context=ctx,
        frame=cat["frame"][keep],
        channels=cat["channels"][keep],
    )


def split_counts(windows: Windows) -> dict[str, int]:
    """Windows per split, in SPLITS order."""
    return {s: int((windows.split == s).sum()) for s in SPLITS}
