"""One honest price frame per source: every price a prompt, question, action, trace or decoded
trajectory shows for decision day t is in a frame that carries no information from after t.

Two frames:

- ``as_of_t``: prices as they traded on t; earlier days are adjusted only for the splits and dividends
  on or before t (``stockr1.data.adjust``). Sources that can give as-traded prices use it: the arch
  indices (an index is never adjusted), yfinance with its ``splits``/``dividends`` columns, a raw CSV,
  the synthetic series. The close a prompt shows is the close a trader saw on t.
- ``rebased``: the close of t is 100 and every other price is relative to it. For sources whose
  prices are *back-adjusted* (skfolio's S&P 500 stocks, a CSV of adjusted closes): such a level
  already holds every later split and dividend (AAPL's 1990 close is 0.264 because of splits that
  followed), so the level itself is look-ahead. The ratio of two back-adjusted prices d <= t only
  involves the actions in (d, t], so rebasing to the close of t removes exactly the future part:
  ``P'_d = 100 * P_d / P_t``. Log returns (the encoder's inputs) are the same in both frames.

A frame's basis is declared by its source on the daily frame itself, ``frame.attrs["price_basis"]``
(``as_traded`` or ``back_adjusted``; absent = ``as_traded``), set with ``mark_back_adjusted``. pandas
keeps ``attrs`` through copies, slices and the quality repairs; ``stockr1.data.dataset_io`` writes it
to ``frames.parquet`` and reads it back, and the tests check every path a frame takes (source, build,
dataset, store) ends in the right frame.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from stockr1.types import AS_OF_T, CLOSE, PRICE_FRAMES, REBASED, VOLUME

AS_TRADED, BACK_ADJUSTED = "as_traded", "back_adjusted"
BASIS_ATTR = "price_basis"
BASE = 100.0  # the close of t in the rebased frame


def mark_back_adjusted(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` (in place, and returned) declared back-adjusted: its windows are rebased."""
    frame.attrs[BASIS_ATTR] = BACK_ADJUSTED
    return frame


def price_basis(frame: pd.DataFrame) -> str:
    """``as_traded`` (default) or ``back_adjusted``; anything else is an error naming the value."""
    basis = frame.attrs.get(BASIS_ATTR, AS_TRADED)
    if basis not in (AS_TRADED, BACK_ADJUSTED):
        raise ValueError(f"frame attrs[{BASIS_ATTR!r}] must be {AS_TRADED!r} or {BACK_ADJUSTED!r}, got {basis!r}")
    return basis


def frame_kind(frame: pd.DataFrame) -> str:
    """The price frame windows of ``frame`` are shown in: ``rebased`` for back-adjusted prices, else ``as_of_t``.

    A back-adjusted frame with split/dividend columns is refused: its actions are already in its prices,
    and applying them again would adjust twice."""
    if price_basis(frame) == AS_TRADED:
        return AS_OF_T
    acts = [c for c in ("splits", "dividends") if c in frame and frame[c].fillna(0.0).ne(0.0).any()]
    if acts:
        raise ValueError(f"a back-adjusted frame cannot also carry corporate actions ({acts}): they are in its prices")
    return REBASED


def frame_kinds(frames: Mapping[str, pd.DataFrame]) -> dict[str, str]:
    """{ticker: frame kind} in ticker order (what a dataset manifest records)."""
    return {tk: frame_kind(frames[tk]) for tk in sorted(frames)}


def rebase(prices: np.ndarray, t_pos: int = -1) -> np.ndarray:
    """OHLCV rows ``prices [..., T, 5]`` with the price channels divided by the close of row ``t_pos``
    and multiplied by ``BASE``; volume is kept (it is not a price). A copy; NaN channels stay NaN."""
    out = np.array(prices, dtype=np.float64, copy=True)
    close_t = out[..., t_pos : (t_pos + 1) or None, CLOSE : CLOSE + 1]
    out[..., :VOLUME] *= BASE / close_t
    return out


def describe(kind: str, date: str) -> str:
    """The frame in words, as the prompt states it: e.g. ``as traded on 2016-01-08`` or
    ``rebased, 100 = the close of 2016-01-08``."""
    if kind == AS_OF_T:
        return f"as traded on {date}"
    if kind == REBASED:
        return f"rebased, {BASE:g} = the close of {date}"
    raise ValueError(f"unknown price frame {kind!r}; expected one of {PRICE_FRAMES}")


def price_lines(close: np.ndarray, kind: str, date: str) -> list[str]:
    """The prompt's price block for closes ``close [n]`` (day t last, in ``kind``'s frame): the frame,
    the last close, its change over 5 and 20 sessions and the daily volatility of the last 10 (each
    only when there are enough days). What a rationale cites, so the policy can copy it from the
    prompt rather than guess it from the encoded history."""
    c = np.asarray(close, dtype=np.float64)
    c = c[np.isfinite(c)]
    if not len(c):
        raise ValueError(f"no finite close up to {date} to state the price frame with")
    parts = [f"Last close: {c[-1]:.2f}"]
    for n in (5, 20):
        if len(c) > n:
            parts.append(f"{n}-session change: {100.0 * (c[-1] / c[-1 - n] - 1.0):+.2f}%")
    if len(c) > 10:
        parts.append(f"10-session daily volatility: {100.0 * float(np.std(np.diff(np.log(c[-11:])))):.2f}%")
    return [f"Prices: {describe(kind, date)}", "; ".join(parts)]
