"""Point-in-time invariance checks: replace everything after t with garbage, rebuild, and require the
inputs for every decision day <= t to be bit-identical. Labels (y, future) are kept aside: they are
allowed to change.

Perturbation boundaries follow the rules in windows.py / context.py:
- windows (x, hist): OHLCV rows and corporate actions dated > t;
- context: OHLCV rows dated >= t-1 (news is cut at the close of t-1, and price-derived headlines
  of day t-1 are stamped after that close), macro values not public before t (see ``public_from``),
  statements published >= t, news stamped >= the close of t-1. The context's price block (the price
  frame and the last close, ``PointInTimeStore.price_block``) is the one part that reads the close of
  t itself: it is compared apart, under the windows' rule (``check_price_block_invariance``: rows > t).
A correct build passes; ``leak_days=1`` on build_windows or PointInTimeStore makes it fail.

Macro values are perturbed by when they became public, not by their observation date: a monthly
value dated the 1st is not known on the 1st, so perturbing by date would let a lookup by period, or
a monthly series "released" on its own stamp, pass unseen.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pandas as pd

from stockr1.data.context import MARKET_CLOSE, PointInTimeStore
from stockr1.data.providers.base import MacroSeries, publication_dates
from stockr1.data.windows import build_windows
from stockr1.types import Windows


def perturb_frames(frames: dict[str, pd.DataFrame], t, inclusive: bool = False, seed: int = 0) -> dict[str, pd.DataFrame]:
    """Copies whose rows after t (or from t when ``inclusive``) hold random but valid OHLCV, with a
    3-for-1 split and a dividend injected where the frame has action columns."""
    t = pd.Timestamp(t)
    rng = np.random.default_rng(seed)
    out = {}
    for tk, f in frames.items():
        f = f.copy()
        m = (f.index >= t) if inclusive else (f.index > t)
        n = int(m.sum())
        if n:
            scale = rng.uniform(0.5, 2.0, n)
            f.loc[m, "close"] = f.loc[m, "close"].to_numpy() * scale
            f.loc[m, "open"] = f.loc[m, "open"].to_numpy() * scale[::-1]
            f.loc[m, "high"] = np.maximum(f.loc[m, ["open", "close"]].max(axis=1), f.loc[m, "high"].to_numpy() * scale) * 1.01
            f.loc[m, "low"] = np.minimum(f.loc[m, ["open", "close"]].min(axis=1), f.loc[m, "low"].to_numpy() * scale) * 0.99
            f.loc[m, "volume"] = rng.integers(1, 10**9, n).astype(float)
            first = f.index[m][0]
            if "splits" in f:
                f.loc[m, "splits"] = 0.0
                f.loc[first, "splits"] = 3.0
            if "dividends" in f:
                f.loc[m, "dividends"] = 0.0
                f.loc[f.index[m][-1], "dividends"] = 0.01 * f.loc[f.index[m][-2], "close"] if n > 1 else 0.0
        out[tk] = f
    return out


def _garble(df: pd.DataFrame, mask: np.ndarray, seed: int, keep: tuple[str, ...]) -> pd.DataFrame:
    df = df.copy()
    rng = np.random.default_rng(seed)
    for c in df.columns:
        if c in keep or not mask.any():
            continue
        if pd.api.types.is_numeric_dtype(df[c]):
            df.loc[mask, c] = df.loc[mask, c].to_numpy() * rng.uniform(0.3, 3.0, int(mask.sum()))
        elif df[c].dtype == object:
            df.loc[mask, c] = [f"PERTURBED {c} {i}" for i in range(int(mask.sum()))]
    return df


def observation_end(index: pd.DatetimeIndex) -> pd.DatetimeIndex:
    """The last day each value covers, read from the data and not from the series' release rule (which
    may be the bug): stamps about a month apart (FRED's 1st, arch's mid-month) cover their calendar
    month; anything denser covers its own day."""
    idx = pd.DatetimeIndex(index)
    if len(idx) > 1 and np.median(np.diff(idx.asi8)) >= pd.Timedelta(days=28).value:
        return idx + pd.offsets.MonthEnd(0)
    return idx


def public_from(s: MacroSeries) -> pd.DatetimeIndex:
    """The day each value became public: its release, and never before the end of the period it
    covers (a monthly average needs the month's last close). A store may show it only after that day."""
    rel = pd.DatetimeIndex(s.release_dates())
    end = observation_end(s.values.index)
    return pd.DatetimeIndex(np.maximum(rel.values, end.values))


def perturb_macro(macro: dict[str, MacroSeries], t, seed: int = 0) -> dict[str, MacroSeries]:
    """Values public on or after t (``public_from`` >= t) scaled at random: none may reach a context at t."""
    t = pd.Timestamp(t)
    rng = np.random.default_rng(seed)
    out = {}
    for k, s in macro.items():
        v = s.values.copy()
        m = np.asarray(public_from(s) >= t)
        v[m] = v[m].to_numpy() * rng.uniform(0.3, 3.0, int(m.sum()))
        out[k] = replace(s, values=v)
    return out


def perturb_fundamentals(table: pd.DataFrame | None, t, filing_lag_days: int = 45, seed: int = 0) -> pd.DataFrame | None:
    if table is None or not len(table):
        return table
    mask = (publication_dates(table, filing_lag_days) >= pd.Timestamp(t)).to_numpy()
    return _garble(table, mask, seed, keep=("ticker", "period_end", "filed"))


def perturb_news(table: pd.DataFrame | None, cutoff, seed: int = 0) -> pd.DataFrame | None:
    """Items stamped at or after ``cutoff`` get garbage text (tickers kept so they still match)."""
    if table is None or not len(table):
        return table
    mask = (pd.DatetimeIndex(table["time"]) >= pd.Timestamp(cutoff))
    df = _garble(table, np.asarray(mask), seed, keep=("ticker", "time"))
    df.loc[mask, "title"] = df.loc[mask, "ticker"].astype(str) + " " + df.loc[mask, "title"]
    return df


def compare_inputs(a: Windows, b: Windows, t) -> list[str]:
    """Differences in (ticker, date, x, hist, context) between two builds, over decision days <= t."""
    t64 = pd.Timestamp(t).to_datetime64()
    a, b = a.select(a.date <= t64), b.select(b.date <= t64)
    if len(a) != len(b) or not (a.ticker == b.ticker).all() or not (a.date == b.date).all():
        return [f"different windows up to {t}: {len(a)} vs {len(b)}"]
    out = []
    for name in ("x", "hist", "context"):
        va, vb = getattr(a, name), getattr(b, name)
        if len(va) != len(vb):
            out.append(f"{name}: length {len(va)} vs {len(vb)}")
            continue
        diff = np.flatnonzero([not np.array_equal(p, q) for p, q in zip(va, vb, strict=True)])
        out += [f"{name} differs for {a.ticker[i]} {pd.Timestamp(a.date[i]).date()}" for i in diff[:5]]
    return out


def train_end(frames: dict[str, pd.DataFrame], windows: Windows) -> pd.Timestamp:
    """The last day any train window reads: the last label day (t + S rows on its ticker) of the latest
    train decision day. Everything after it may be replaced without moving a train-only fit."""
    s, train = windows.future.shape[1], windows.split_of("train")
    ends = []
    for tk in sorted(set(train.ticker.tolist())):
        idx = pd.DatetimeIndex(frames[tk].index)
        last = idx.get_loc(pd.Timestamp(train.date[train.ticker == tk].max()))
        ends.append(idx[min(last + s, len(idx) - 1)])
    return max(ends)


def perturb_after_train(windows: Windows, seed: int = 0, splits: tuple[str, ...] = ("val", "test"),
                        labels_only: bool = False) -> Windows:
    """A copy in which every value of the rows of ``splits`` is replaced by random valid data: inputs
    (``x``, ``hist``, ``context``) and labels (``y``, ``future``), or labels only (``labels_only``: for
    model selection, which may read validation but never test). Train rows are untouched, so any
    artefact fitted on train only must come out bit-identical."""
    rng = np.random.default_rng(seed)
    m = np.isin(windows.split, splits)
    n = int(m.sum())
    # order="K": the copies keep the arrays' memory layout, which float32 reductions depend on
    out = {k: getattr(windows, k).copy(order="K") for k in ("x", "y", "hist", "future")}
    out["context"] = np.array(windows.context, dtype=object)  # a LazyContext renders every row here
    names = ("y", "future") if labels_only else ("x", "y", "hist", "future")
    for name in names:
        a = out[name]
        if name in ("x", "y"):  # log returns: rescaled and shifted
            a[m] = a[m] * rng.uniform(0.3, 3.0, a[m].shape) + rng.normal(0.0, 0.01, a[m].shape)
        else:  # positive OHLCV: rescaled, still positive
            a[m] = a[m] * rng.uniform(0.5, 2.0, a[m].shape)
    if not labels_only and len(out["context"]) == len(windows):
        out["context"][m] = [f"PERTURBED context {i}" for i in range(n)]
    return replace(windows, **out)


def check_windows_invariance(frames: dict[str, pd.DataFrame], t, seed: int = 0, **build_kw) -> list[str]:
    """Rebuild with every row after t replaced; returns the mismatches (empty = point-in-time)."""
    base = build_windows(frames, **build_kw)
    return compare_inputs(base, build_windows(perturb_frames(frames, t, seed=seed), **build_kw), t)


def perturb_context_inputs(frames: dict[str, pd.DataFrame], t, tables: dict | None = None,
                           filing_lag_days: int = 45, seed: int = 0,
                           prices_to_t: bool = False) -> tuple[dict[str, pd.DataFrame], dict]:
    """(frames, tables) with everything a context at any day <= t may not see replaced: OHLCV from
    t-1 on, macro public from t on, statements published from t on, news from the close of t-1 on.
    ``prices_to_t``: for consumers that show OHLCV up to t (prompts, data tools), only rows after t."""
    t = pd.Timestamp(t)
    tables = dict(tables or {})
    t_prev = min(f.index[f.index < t][-1] for f in frames.values())
    pert = dict(tables)
    if "macro" in tables:
        pert["macro"] = perturb_macro(tables["macro"], t, seed)
    if "fundamentals" in tables:
        pert["fundamentals"] = perturb_fundamentals(tables["fundamentals"], t, filing_lag_days, seed)
    if "news" in tables:
        pert["news"] = perturb_news(tables["news"], t_prev.normalize() + MARKET_CLOSE, seed)
    prices = perturb_frames(frames, t, seed=seed) if prices_to_t else perturb_frames(frames, t_prev, inclusive=True, seed=seed)
    return prices, pert


def render_view(store: PointInTimeStore, ticker: str, t: pd.Timestamp) -> str:
    """The default thing compared: the rendered App. A.4 context block without its price block (which
    may read the close of t, so it is held to the windows' rule in ``check_price_block_invariance``)."""
    block = set(store.price_block(ticker, t))
    return "\n".join(ln for ln in store.render_context(ticker, t).splitlines() if ln not in block)


def check_price_block_invariance(make_store: Callable[..., PointInTimeStore], frames: dict[str, pd.DataFrame], t,
                                 n_days: int = 20, seed: int = 0) -> list[str]:
    """The price block of every day d <= t (the last ``n_days`` per ticker) before and after every OHLCV
    row after t is replaced (a split and a dividend injected where the frame has action columns)."""
    t = pd.Timestamp(t)
    base, other = make_store(frames), make_store(perturb_frames(frames, t, seed=seed))
    return [f"price block differs for {tk} {d.date()}" for tk, f in sorted(frames.items())
            for d in f.index[f.index <= t][-n_days:] if base.price_block(tk, d) != other.price_block(tk, d)]


def check_context_invariance(make_store: Callable[..., PointInTimeStore], frames: dict[str, pd.DataFrame], t,
                             tables: dict | None = None, n_days: int = 20, seed: int = 0,
                             view: Callable[[PointInTimeStore, str, pd.Timestamp], object] = render_view) -> list[str]:
    """``make_store(frames, **tables)`` builds a store; tables may hold macro/fundamentals/news.
    Computes ``view(store, ticker, d)`` (default: the rendered context; pass any consumer of the store,
    e.g. the QA adapter) for the last ``n_days`` trading days d <= t of every ticker, before and after
    perturbing everything the context rules forbid, and returns the mismatches."""
    t = pd.Timestamp(t)
    base = make_store(frames, **dict(tables or {}))
    pert_frames, pert_tables = perturb_context_inputs(frames, t, tables, base.filing_lag_days, seed)
    other = make_store(pert_frames, **pert_tables)
    out = []
    for tk, f in sorted(frames.items()):
        for d in f.index[f.index <= t][-n_days:]:
            if view(base, tk, d) != view(other, tk, d):
                out.append(f"context differs for {tk} {d.date()}")
    return out
