"""`stockr1 bench backtest`: the unified z-score backtest of Stock-R1 App. C.5 (Table 6).

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
beta is against the buy-and-hold returns of ``--benchmark`` (default: each ticker's own price).
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from stockr1.metrics.trading import TRADING_METRICS, trading_metrics
from stockr1.types import CLOSE, Forecast, Windows, train_only


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


def prices_from_windows(windows: Windows, ticker: str, holding: int) -> pd.Series:
    """Daily closes of one ticker over its decision days plus ``holding`` days after the last one.

    Needs consecutive (stride-1) windows; checked by the overlap of consecutive histories. The
    dates after the last decision day are not in ``Windows`` and are labelled with business days.
    """
    w = windows.select(np.flatnonzero(windows.ticker == ticker))
    order = np.argsort(w.date)
    w = w.select(order)
    if len(w) == 0:
        raise ValueError(f"no windows for ticker {ticker!r}")
    closes = w.hist[:, -1, CLOSE]
    if len(w) > 1 and not np.allclose(w.hist[1:, -2, CLOSE], closes[:-1], rtol=1e-9):
        bad = int(np.flatnonzero(~np.isclose(w.hist[1:, -2, CLOSE], closes[:-1], rtol=1e-9))[0])
        raise ValueError(
            f"windows of {ticker!r} are not consecutive trading days (gap after {pd.Timestamp(w.date[bad]).date()}); "
            "pass daily prices instead"
        )
    extra = w.future[-1, :holding, CLOSE]
    last = pd.Timestamp(w.date[-1])
    dates = pd.DatetimeIndex(w.date).append(pd.bdate_range(last + pd.offsets.BDay(1), periods=len(extra)))
    return pd.Series(np.concatenate([closes, extra]), index=dates, name=ticker)


def run_models(
    forecasts: dict[str, Forecast], windows: Windows, cfg: BacktestConfig, benchmark_ticker: str | None = None
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, dict[str, float]]], dict[str, pd.Series]]:
    """Backtest every model and buy-and-hold on every ticker of ``windows``.

    Returns (mean metrics per model, per-ticker metrics per model, mean equity curve per model).
    """
    tickers = sorted(set(windows.ticker.tolist()))
    prices = {t: prices_from_windows(windows, t, cfg.holding) for t in tickers}
    bench = prices.get(benchmark_ticker) if benchmark_ticker else None
    per: dict[str, dict[str, dict[str, float]]] = {}
    curves: dict[str, pd.Series] = {}
    all_models = {"buy_and_hold": None, **forecasts}
    for name, fc in all_models.items():
        z = None if fc is None else zscore_signals(fc, windows, cfg)
        per[name], eq = {}, []
        for t in tickers:
            if z is None:
                res = buy_and_hold(prices[t], cfg, bench)
            else:
                idx = np.flatnonzero(windows.ticker == t)
                res = backtest(pd.Series(z[idx], pd.DatetimeIndex(windows.date[idx])).sort_index(), prices[t], cfg, bench)
            per[name][t] = res.metrics
            eq.append(res.equity.reset_index(drop=True))
        curves[name] = pd.concat(eq, axis=1).mean(axis=1)
    mean = {m: {k: _mean_finite([per[m][t][k] for t in tickers]) for k in TRADING_METRICS} for m in per}
    return mean, per, curves


def _mean_finite(values: list[float]) -> float:
    """Mean over tickers of the defined values (NaN when none is, e.g. Sharpe of a model that never trades)."""
    v = [x for x in values if math.isfinite(x)]
    return float(np.mean(v)) if v else float("nan")


def table_md(mean: dict[str, dict[str, float]]) -> str:
    """Stock-R1 Table 6 layout (SP, AR, MDD, Beta, TT, WR) plus cumulative return and hit rate."""
    head = "| Model | SP | AR (%) | MDD (%) | Beta | TT | WR (%) | CR (%) | HR (%) |\n|---|---|---|---|---|---|---|---|---|\n"
    rows = [
        f"| {m} | {v['sharpe']:.3f} | {100 * v['annual_return']:.2f} | {100 * v['max_drawdown']:.2f} | "
        f"{v['beta']:.3f} | {v['n_trades']:.2f} | {100 * v['win_rate']:.2f} | {100 * v['cumulative_return']:.2f} | "
        f"{100 * v['hit_rate']:.2f} |"
        for m, v in mean.items()
    ]
    return head + "\n".join(rows) + "\n"


def _oracle(windows: Windows) -> Forecast:
    """Perfect foresight: the realised future as the forecast (the ceiling of the protocol)."""
    close = windows.future[:, :, CLOSE]
    return Forecast(close=close, close_samples=close[:, None, :], high=windows.future[:, :, 1],
                    low=windows.future[:, :, 2], volume=windows.future[:, :, 4])


def _model_forecasts(
    train: Windows, val: Windows, test: Windows, checkpoint: str | None, n_samples: int, names: list[str] | None
) -> dict[str, Forecast]:
    """Baselines of benchmarks/baselines (fit on train, tuned on val) and the TS encoder if given."""
    from benchmarks.baselines import BASELINES

    out: dict[str, Forecast] = {}
    for name in names or list(BASELINES):
        if name not in BASELINES:
            raise ValueError(f"unknown baseline {name!r}; choose from {sorted(BASELINES)}")
        print(f"[backtest] fitting {name}", flush=True)
        out[name] = BASELINES[name]().fit(train, val).predict(test, n_samples=n_samples, seed=0)
    if checkpoint:
        from ts_encoder.module import TSForecastModule

        model = TSForecastModule.load_from_checkpoint(checkpoint).eval()
        out["Stock-R1 TS encoder"] = model.forecast(test, n_samples=n_samples)
    out["oracle (perfect foresight)"] = _oracle(test)
    return out


def _plot(curves: dict[str, pd.Series], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for name, c in curves.items():
        ax.plot(c.to_numpy(), label=name, lw=2.0 if name == "buy_and_hold" else 1.2)
    ax.set_xlabel("trading day of held-out period")
    ax.set_ylabel("equity (mean over tickers)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def json_clean(x: object) -> object:
    """NaN -> None (valid JSON), recursively through dicts, lists and tuples."""
    if isinstance(x, dict):
        return {k: json_clean(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [json_clean(v) for v in x]
    return None if isinstance(x, float) and math.isnan(x) else x


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="stockr1 bench backtest", description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="sample", help="'sample' or a dataset dir from `stockr1 data build`")
    ap.add_argument("--checkpoint", default=None, help="TS encoder Lightning checkpoint (optional)")
    ap.add_argument("--out", default="results/backtest")
    ap.add_argument("--split", default="test")
    ap.add_argument("--benchmark", default=None, help="ticker whose buy-and-hold defines beta")
    ap.add_argument("--n-samples", type=int, default=100)
    ap.add_argument("--baselines", nargs="*", default=None, help="subset of benchmarks.baselines.BASELINES")
    for f in BacktestConfig.__dataclass_fields__.values():
        ap.add_argument("--" + f.name.replace("_", "-"), type=type(f.default), default=f.default)
    a = ap.parse_args(argv)
    cfg = BacktestConfig(a.threshold, a.holding, a.allocation, a.cost_bps, a.vol_lookback)
    import stockr1.data as data

    windows = data.sample_windows() if a.data == "sample" else data.load_windows(a.data)
    train, val, test = train_only(windows), windows.split_of("val"), windows.split_of(a.split)
    forecasts = _model_forecasts(train, val, test, a.checkpoint, a.n_samples, a.baselines)
    mean, per, curves = run_models(forecasts, test, cfg, a.benchmark)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_text(json.dumps(json_clean(mean), indent=2))
    (out / "per_ticker.json").write_text(json.dumps(json_clean(per), indent=2))
    (out / "config.json").write_text(json.dumps({**asdict(cfg), "data": a.data, "split": a.split, "n_windows": len(test),
                                                  "period": [str(test.date.min())[:10], str(test.date.max())[:10]]},
                                                 indent=2))
    table = table_md(mean)
    (out / "table.md").write_text(table)
    _plot(curves, out / "equity.png")
    print(table)
    return 0
