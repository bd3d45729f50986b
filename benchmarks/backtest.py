"""`stockr1 bench backtest`: every baseline, the TS encoder and an oracle through the unified z-score
backtest of Stock-R1 App. C.5 (Table 6); the protocol and the simulator are ``stockr1.backtest``.

    stockr1 bench backtest --out results/backtest [--checkpoint CKPT] [--overwrite]

Knowledge cutoff (``stockr1.cutoff``): the baselines are fitted here on the train split and have
memorised nothing; a ``--checkpoint`` whose ``config.json`` declares ``knowledge_cutoff: YYYY-MM`` (a
model pretrained elsewhere) is refused on decision days on or before it unless ``--allow-before-cutoff``.
The README's first line says what held.

Writes ``metrics.json``, ``per_ticker.json``, ``config.json``, ``table.md``, ``equity.png`` and a
``README.md`` generated from them (command, commit, date), all moved into ``--out`` at the end
(``stockr1.outdir``: an ``--out`` holding results is refused unless ``--overwrite``).
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

from stockr1.backtest import (
    BacktestConfig,
    BacktestResult,
    backtest,
    bootstrap_intervals,
    buy_and_hold,
    prices_from_windows,
    zscore_signals,
)
from stockr1.cutoff import cutoff_line
from stockr1.metrics.trading import TRADING_METRICS
from stockr1.outdir import command_line, generated_line, output_dir, refuse_existing
from stockr1.progress import Progress
from stockr1.types import CLOSE, Forecast, Windows, train_only

BUY_AND_HOLD, TS_ENCODER, ORACLE = "buy_and_hold", "Stock-R1 TS encoder", "oracle (perfect foresight)"


def run_models(
    forecasts: dict[str, Forecast], windows: Windows, cfg: BacktestConfig, benchmark_ticker: str | None = None
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, dict[str, float]]], dict[str, pd.Series],
           dict[str, dict[str, BacktestResult]]]:
    """Backtest every model and buy-and-hold on every ticker of ``windows``.

    Returns (mean metrics per model, per-ticker metrics per model, mean equity curve per model, the
    simulator's results per model and ticker, which ``stockr1.backtest.bootstrap_intervals`` resamples).
    """
    tickers = sorted(set(windows.ticker.tolist()))
    prices = {t: prices_from_windows(windows, t, cfg.holding) for t in tickers}
    bench = prices.get(benchmark_ticker) if benchmark_ticker else None
    per: dict[str, dict[str, dict[str, float]]] = {}
    curves: dict[str, pd.Series] = {}
    results: dict[str, dict[str, BacktestResult]] = {}
    all_models = {BUY_AND_HOLD: None, **forecasts}
    for name, fc in all_models.items():
        z = None if fc is None else zscore_signals(fc, windows, cfg)
        per[name], results[name], eq = {}, {}, []
        for t in tickers:
            if z is None:
                res = buy_and_hold(prices[t], cfg, bench)
            else:
                idx = np.flatnonzero(windows.ticker == t)
                res = backtest(pd.Series(z[idx], pd.DatetimeIndex(windows.date[idx])).sort_index(), prices[t], cfg, bench)
            per[name][t], results[name][t] = res.metrics, res
            eq.append(res.equity.reset_index(drop=True))
        curves[name] = pd.concat(eq, axis=1).mean(axis=1)
    mean = {m: {k: _mean_finite([per[m][t][k] for t in tickers]) for k in TRADING_METRICS} for m in per}
    return mean, per, curves, results


def interval_pairs(names: list[str]) -> list[tuple[str, str]]:
    """The paired differences the README reports: the TS encoder (else each model) against buy-and-hold and
    each baseline; never the oracle's."""
    models = [n for n in names if n not in (BUY_AND_HOLD, ORACLE)]
    first = [n for n in models if n == TS_ENCODER] or models
    return [(a, b) for a in first for b in [BUY_AND_HOLD, *models] if b != a]


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
    names = list(names or BASELINES)
    bar = Progress(len(names), "[backtest]", unit="baseline")
    for name in names:
        if name not in BASELINES:
            raise ValueError(f"unknown baseline {name!r}; choose from {sorted(BASELINES)}")
        print(f"[backtest] fitting {name}", flush=True)
        out[name] = BASELINES[name]().fit(train, val).predict(test, n_samples=n_samples, seed=0)
        bar.advance()
    if checkpoint:
        from forecast_action.forecaster import Forecaster

        out[TS_ENCODER] = Forecaster.load(checkpoint).forecast_windows(test, n_samples=n_samples)
    out[ORACLE] = _oracle(test)
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


def checkpoint_cutoff_line(checkpoint: str | None, dates, allow: bool) -> str:
    """``cutoff_line`` for ``--checkpoint`` (pretrained when its config.json declares ``knowledge_cutoff``)."""
    cfg = Path(checkpoint or "", "config.json")
    declared = json.loads(cfg.read_text()).get("knowledge_cutoff") if checkpoint and cfg.is_file() else None
    if declared is None:
        return ("Knowledge cutoff: not applicable (every model is fitted in this repository on the train split: "
                "none has memorised test prices).")
    return cutoff_line(True, str(checkpoint), declared, dates, allow)


def readme(table: str, run: dict, command: str, intervals: str = "") -> str:
    """results/<out>/README.md from this run's table (never edited by hand); first line under the title: the cutoff check."""
    return "\n".join([
        "# Backtest: z-score signal of every forecaster (Stock-R1 App. C.5, Table 6 layout; `stockr1 bench backtest`)", "",
        *([run["cutoff"], ""] if run.get("cutoff") else []),
        generated_line(command), "",
        f"Data `{run['data']}`, {run['split']} split: {run['n_windows']} decision windows, {run['period'][0]} .. "
        f"{run['period'][1]}. Rules: threshold {run['threshold']}, holding {run['holding']} days, allocation "
        f"{run['allocation']}, {run['cost_bps']} bps per side, volatility look-back {run['vol_lookback']}. "
        "Metrics are means over the tickers (per ticker: [per_ticker.json](per_ticker.json)).", "",
        table,
        *(["## Intervals over dates and tickers", "",
           f"95% percentile intervals of {run.get('n_boot', 1000)} circular block-bootstrap resamples of the trading "
           f"days (block {run.get('block', '?')} days; all tickers of a drawn day together, so every metric stays "
           "a mean over the tickers; `stockr1.backtest.bootstrap_intervals`). The differences are paired on the "
           "same resamples; a difference holds only where its interval excludes 0, else it is a tie "
           "(`stockr1.metrics.verdict`).", "", intervals] if intervals else []),
        "Files: [metrics.json](metrics.json), [table.md](table.md), [config.json](config.json), "
        "[intervals.json](intervals.json), [equity.png](equity.png).", ""])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="stockr1 bench backtest", description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="sample", help="'sample' or a dataset dir from `stockr1 data build`")
    ap.add_argument("--checkpoint", default=None, help="saved TS encoder dir (ts fit's pretrained/) or .ckpt (optional)")
    ap.add_argument("--out", default="results/backtest", help="refused if it holds results, unless --overwrite")
    ap.add_argument("--overwrite", action="store_true", help="replace an --out that holds results")
    ap.add_argument("--split", default="test")
    ap.add_argument("--benchmark", default=None, help="ticker whose buy-and-hold defines beta")
    ap.add_argument("--n-samples", type=int, default=100)
    ap.add_argument("--allow-before-cutoff", action="store_true",
                    help="evaluate a pretrained --checkpoint on days on or before its knowledge cutoff (said in the README)")
    ap.add_argument("--baselines", nargs="*", default=None, help="subset of benchmarks.baselines.BASELINES")
    ap.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples of the intervals")
    for f in BacktestConfig.__dataclass_fields__.values():
        ap.add_argument("--" + f.name.replace("_", "-"), type=type(f.default), default=f.default)
    argv = [] if argv is None else list(argv)
    a = ap.parse_args(argv)
    refuse_existing(a.out, a.overwrite)  # before any work
    cfg = BacktestConfig(a.threshold, a.holding, a.allocation, a.cost_bps, a.vol_lookback)
    import stockr1.data as data
    from benchmarks.forecast.command import load_data

    # sample: the cached preset (the same windows); universe / stocks / a CSV / a built dataset: bench forecast's loader
    windows = data.sample_windows() if a.data == "sample" else load_data(a.data, 90, 10)
    train, val, test = train_only(windows), windows.split_of("val"), windows.split_of(a.split)
    cutoff = checkpoint_cutoff_line(a.checkpoint, test.date, a.allow_before_cutoff)  # before any fitting
    forecasts = _model_forecasts(train, val, test, a.checkpoint, a.n_samples, a.baselines)
    mean, per, curves, results = run_models(forecasts, test, cfg, a.benchmark)
    iv = bootstrap_intervals({k: v for k, v in results.items() if k != ORACLE}, interval_pairs(list(results)),
                             cfg.holding, n_boot=a.n_boot)
    run = {**asdict(cfg), "data": a.data, "split": a.split, "n_windows": len(test), "cutoff": cutoff,
           "tickers": sorted(set(test.ticker.tolist())), "block": iv["block"], "n_boot": iv["n_boot"],
           "period": [str(test.date.min())[:10], str(test.date.max())[:10]]}
    table = table_md(mean)
    from benchmarks.compare.plots import interval_table  # lazy: compare.plots imports this module
    with output_dir(a.out, a.overwrite) as out:
        (out / "metrics.json").write_text(json.dumps(json_clean(mean), indent=2))
        (out / "per_ticker.json").write_text(json.dumps(json_clean(per), indent=2))
        (out / "config.json").write_text(json.dumps(run, indent=2))
        (out / "table.md").write_text(table)
        (out / "intervals.json").write_text(json.dumps(json_clean(iv), indent=1))
        (out / "README.md").write_text(readme(table, run, command_line("stockr1 bench backtest", argv),
                                              interval_table(iv)))
        _plot(curves, out / "equity.png")
    print(table)
    print(f"wrote {a.out}")
    return 0
