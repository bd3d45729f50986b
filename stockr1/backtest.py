"""The unified z-score backtest of Stock-R1 App. C.5 (Table 6): one simulator for every model and method
(``stockr1 bench backtest`` / ``bench compare``, Trading-R1 evaluation, the Stock-R1 adapter).

Protocol (identical for every model, so differences come from forecast quality alone):
1. At decision day t the model's S-day close forecast gives a predicted return over the holding
   horizon h = min(holding, S): ``pred = C_hat[t+h] / C_t - 1``.
2. It is normalised by recent realised volatility scaled to the horizon:
   ``z = pred / (std(daily log returns over the last vol_lookback days) * sqrt(h))``.
3. If flat and ``z >= threshold`` go long, if ``z <= -threshold`` go short, with a fixed fraction
   ``allocation`` of current equity, entered at the close of t and held exactly ``holding`` days
   (exit at the close of t+holding; a new position can open at that same close). One position per
   ticker at a time; signals while a position is open are ignored.
4. Costs: ``cost_bps`` of traded notional on entry and on exit. Idle cash earns nothing.

Choices the paper leaves open (documented, tested): execution at the decision-day close (the
forecast uses that close, a market-on-close order); per-ticker accounts of equity 1 whose metrics
are averaged over tickers (Table 6 reports fractional "TT", i.e. means over tickers); buy-and-hold
is the same simulator with one long position held over the whole period (one round trip of costs);
beta is against the buy-and-hold returns of ``benchmark`` prices (``stockr1 bench backtest --benchmark``;
default: each ticker's own price).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from stockr1.data.calendar import calendar_for
from stockr1.metrics.trading import trading_metrics
from stockr1.types import CLOSE, Forecast, Windows


@dataclass(frozen=True)
class BacktestConfig:
    threshold: float = 0.5  # |z| needed to open a position
    holding: int = 10  # trading days a position is held
    allocation: float = 1.0  # fraction of equity committed per position
    cost_bps: float = 10.0  # per side, on traded notional
    vol_lookback: int = 20  # days of realised volatility in the z-score denominator


@dataclass(frozen=True)
class Trade:
    entry: pd.Timestamp
    exit: pd.Timestamp
    direction: int  # +1 long, -1 short
    underlying_return: float  # P_exit / P_entry - 1
    net_return: float  # change of account equity over the trade, costs included


@dataclass(frozen=True)
class BacktestResult:
    returns: pd.Series  # [T] daily strategy returns (day 0 carries only an entry cost)
    equity: pd.Series  # [T] account value, starting from 1 before day 0
    trades: list[Trade]
    metrics: dict[str, float]


def zscore_signals(forecast: Forecast, windows: Windows, cfg: BacktestConfig) -> np.ndarray:
    """[N] z-scores from a forecast of the N windows (step 1-2 of the protocol); NaN = no signal."""
    n, s = forecast.close.shape
    if n != len(windows):
        raise ValueError(f"forecast has {n} rows but windows has {len(windows)}")
    h = min(cfg.holding, s)
    last = windows.last_close
    pred = forecast.close[:, h - 1] / last - 1.0
    closes = windows.hist[:, -(cfg.vol_lookback + 1):, CLOSE]
    vol = np.std(np.diff(np.log(closes), axis=1), axis=1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = pred / (vol * math.sqrt(h))
    z[~np.isfinite(z)] = np.nan
    return z


def directions_from_z(z: pd.Series, threshold: float) -> pd.Series:
    """+1 / -1 / 0 per decision day from z-scores."""
    v = z.to_numpy(dtype=np.float64)
    d = np.where(v >= threshold, 1, np.where(v <= -threshold, -1, 0))
    d[np.isnan(v)] = 0
    return pd.Series(d.astype(int), index=z.index)


def simulate(
    directions: pd.Series, prices: pd.Series, cfg: BacktestConfig, benchmark: pd.Series | None = None
) -> BacktestResult:
    """Run the fixed-horizon rules on one ticker.

    directions: desired side (+1/-1/0) on decision days (any subset of ``prices.index``)
    prices:     [T] daily closes, the full trading calendar of the period
    benchmark:  [T] prices whose daily returns define beta (default: ``prices``)
    """
    if not prices.index.is_monotonic_increasing or prices.index.has_duplicates:
        raise ValueError("prices must have a sorted, unique index")
    if (prices <= 0).any() or prices.isna().any():
        raise ValueError("prices must be positive and not NaN")
    want = directions.reindex(prices.index).fillna(0).to_numpy(dtype=int)
    p = prices.to_numpy(dtype=np.float64)
    c = cfg.cost_bps * 1e-4
    t_len = len(p)
    equity = np.empty(t_len)
    cash, pos = 1.0, None  # pos: (entry index, direction, notional, exit index, equity before entry)
    trades: list[Trade] = []
    for i in range(t_len):
        if pos is not None and i == pos[3]:
            e, d, notional, _, before = pos
            cash += d * notional * (p[i] / p[e] - 1.0) - c * notional * p[i] / p[e]
            trades.append(Trade(prices.index[e], prices.index[i], d, p[i] / p[e] - 1.0, cash / before - 1.0))
            pos = None
        if pos is None and want[i] != 0 and i < t_len - 1:
            notional = cfg.allocation * cash
            before = cash
            cash -= c * notional
            pos = (i, int(want[i]), notional, min(i + cfg.holding, t_len - 1), before)
        equity[i] = cash if pos is None else cash + pos[1] * pos[2] * (p[i] / p[pos[0]] - 1.0)
    returns = np.diff(np.concatenate([[1.0], equity])) / np.concatenate([[1.0], equity[:-1]])
    bench = prices if benchmark is None else benchmark.reindex(prices.index)
    b = bench.to_numpy(dtype=np.float64)
    bench_returns = np.concatenate([[0.0], b[1:] / b[:-1] - 1.0])
    metrics = trading_metrics(
        returns,
        benchmark=bench_returns,
        trade_net_returns=np.array([t.net_return for t in trades]),
        trade_directions=np.array([t.direction for t in trades], dtype=float),
        trade_underlying=np.array([t.underlying_return for t in trades]),
    )
    return BacktestResult(pd.Series(returns, prices.index), pd.Series(equity, prices.index), trades, metrics)


def backtest(
    signals: pd.Series, prices: pd.Series, cfg: BacktestConfig = BacktestConfig(), benchmark: pd.Series | None = None
) -> BacktestResult:
    """z-score signals on decision days -> positions -> daily returns and metrics (one ticker)."""
    return simulate(directions_from_z(signals, cfg.threshold), prices, cfg, benchmark)


def buy_and_hold(prices: pd.Series, cfg: BacktestConfig = BacktestConfig(), benchmark: pd.Series | None = None) -> BacktestResult:
    """The same simulator, long from the first close to the last (one round trip of costs)."""
    d = pd.Series([1], index=prices.index[:1])
    return simulate(d, prices, replace(cfg, holding=len(prices) - 1), benchmark)


def prices_from_windows(windows: Windows, ticker: str, holding: int, exchange: str = "auto") -> pd.Series:
    """Daily closes of one ticker over its decision days plus ``holding`` days after the last one.

    Needs consecutive (stride-1) windows; checked by the overlap of consecutive histories. Each window
    may carry its own price frame (a rebased source: 100 = the close of its decision day, docs/data.md),
    so two windows overlap when one is the other times a constant; the series is then chained from the
    daily returns, in the first window's frame (returns, and so every backtest metric, do not depend on
    the frame). The dates after the last decision day are not in ``Windows``; they are labelled with the
    trading days of ``exchange`` (``stockr1.data.calendar``; ``auto``: inferred from the decision days
    themselves, else weekdays), ad hoc closures included: these closes happened, so they get the days they
    traded.
    """
    w = windows.select(np.flatnonzero(windows.ticker == ticker))
    order = np.argsort(w.date)
    w = w.select(order)
    if len(w) == 0:
        raise ValueError(f"no windows for ticker {ticker!r}")
    hist = w.hist[:, :, CLOSE]
    closes = hist[:, -1]
    if len(w) > 1:
        factor = hist[1:, -2] / closes[:-1]  # window t+1's frame over window t's (1 where levels are as of t)
        overlap = np.isclose(hist[1:, :-1], factor[:, None] * hist[:-1, 1:], rtol=1e-6).all(axis=1)
        if not overlap.all():
            bad = int(np.flatnonzero(~overlap)[0])
            raise ValueError(
                f"windows of {ticker!r} are not consecutive trading days (gap after {pd.Timestamp(w.date[bad]).date()}); "
                "pass daily prices instead"
            )
        if not np.all(factor == 1.0):  # rebased windows: chain the daily returns into one series
            closes = closes[0] * np.concatenate([[1.0], np.cumprod(closes[1:] / hist[1:, -2])])
    extra = w.future[-1, :holding, CLOSE] * (closes[-1] / hist[-1, -1])
    last = pd.Timestamp(w.date[-1])
    cal = calendar_for(pd.DatetimeIndex(w.date), exchange)
    dates = pd.DatetimeIndex(w.date).append(cal.days_after(last, len(extra), realised=True))
    return pd.Series(np.concatenate([closes, extra]), index=dates, name=ticker)


# ------------------------------------------------------------------------------ intervals
BOOTSTRAP_METRICS: tuple[str, ...] = ("cumulative_return", "sharpe", "hit_rate")


def _panel(per_ticker: dict[str, BacktestResult]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(ticker id [N], date [N], daily return [N], entry row [M], hit [M]) of all tickers' days stacked."""
    tid, dates, rets, entry, hit = [], [], [], [], []
    for k, tk in enumerate(sorted(per_ticker)):
        res, base = per_ticker[tk], sum(len(r) for r in rets)
        tid.append(np.full(len(res.returns), k))
        dates.append(res.returns.index.to_numpy())
        rets.append(res.returns.to_numpy(dtype=np.float64))
        pos = {d: i for i, d in enumerate(res.returns.index)}
        entry += [base + pos[t.entry] for t in res.trades]
        hit += [float(np.sign(t.direction) == np.sign(t.underlying_return)) for t in res.trades]
    return (np.concatenate(tid), np.concatenate(dates), np.concatenate(rets), np.array(entry, dtype=int),
            np.array(hit))


def _resampled_metrics(panel, idx: np.ndarray) -> np.ndarray:
    """[CR, Sharpe, HR] means over tickers on the resampled rows ``idx`` (with repeats); a trade counts
    as often as its entry day is drawn. ``idx = arange(N)`` gives the simulator's own metrics."""
    from stockr1.metrics.trading import sharpe_ratio

    tid, _, rets, entry, hit = panel
    counts = np.bincount(idx, minlength=len(rets)).astype(np.float64)
    out = []
    for k in np.unique(tid):
        r = rets[idx[tid[idx] == k]]
        mine = tid[entry] == k
        w = counts[entry[mine]]
        hr = float(np.sum(w * hit[mine]) / np.sum(w)) if np.sum(w) > 0 else np.nan
        out.append([np.prod(1.0 + r) - 1.0, sharpe_ratio(r), hr])
    with np.errstate(all="ignore"):
        a = np.array(out, dtype=np.float64)
        return np.array([np.nanmean(c) if np.isfinite(c).any() else np.nan for c in a.T])


def bootstrap_intervals(results: dict[str, dict[str, BacktestResult]], pairs: list[tuple[str, str]],
                        holding: int, block: int | None = None, n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> dict:
    """Circular block-bootstrap intervals of CR, Sharpe and hit rate per strategy, and of the paired
    differences ``a - b`` for each (a, b) in ``pairs``.

    results[name][ticker]: the simulator's result; every strategy must cover the same tickers on the
    same calendars. Resampled unit: the trading day (all tickers of a date together), in blocks of
    ``block`` consecutive days (default ``stockr1.metrics.stats.default_block(D, holding)``: at least the
    holding period, so a trade's daily returns mostly stay in one block); every strategy and every
    difference is computed on the SAME resamples, so a difference is paired day by day. Percentile
    intervals; NaN resamples (e.g. no trade drawn for a hit rate) are left out of the quantiles.
    """
    from stockr1.metrics.stats import block_resamples

    names = list(results)
    panels = {n: _panel(results[n]) for n in names}
    ref = panels[names[0]]
    for n in names[1:]:
        if not (np.array_equal(panels[n][0], ref[0]) and np.array_equal(panels[n][1], ref[1])):
            raise ValueError(f"bootstrap_intervals: {n!r} does not cover the tickers and days of {names[0]!r}")
    idx, block = block_resamples(ref[1], block, holding, n_boot, seed)
    full = {n: _resampled_metrics(p, np.arange(len(p[2]))) for n, p in panels.items()}
    boots = {n: np.array([_resampled_metrics(p, i) for i in idx]) for n, p in panels.items()}
    q = [(1 - level) / 2, 1 - (1 - level) / 2]

    def rows(value: np.ndarray, b: np.ndarray) -> dict[str, dict[str, float]]:
        out = {}
        for j, m in enumerate(BOOTSTRAP_METRICS):
            col = b[:, j][np.isfinite(b[:, j])]
            lo, hi = (float(x) for x in np.quantile(col, q)) if len(col) else (np.nan, np.nan)
            out[m] = {"value": float(value[j]), "lo": lo, "hi": hi}
        return out

    return {"block": int(block), "n_boot": len(idx), "level": level, "unit": "trading day",
            "metrics": {n: rows(full[n], boots[n]) for n in names},
            "differences": {f"{a} - {b}": rows(full[a] - full[b], boots[a] - boots[b]) for a, b in pairs}}
