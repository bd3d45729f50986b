"""`stockr1 bench forecast`: the TS encoder vs baselines on the same held-out windows (Table 2).

    stockr1 bench forecast --data sample --checkpoint CKPT --out results/forecast
    stockr1 bench forecast --data my_ohlcv.csv --out out/   # baselines only (no --checkpoint)
    stockr1 bench forecast --data sample --checkpoint CKPT_TRAINED_ON_SP500 --cross-series NASDAQ --out OUT

Writes under ``--out``: ``metrics.json`` (model -> metric -> value), ``table.md`` (Table 2 layout
plus CRPS / coverage / pinball columns, then the close distribution: CRPS, pinball at 0.05 / 0.95,
coverage of the central 50/80/90/95% intervals), ``README.md`` (generated from these numbers, with
the command, commit and date), ``differences.md`` and ``differences.json`` (reference model minus
each other forecaster, paired block-bootstrap 95% CI, win/tie/loss), ``run.json`` (windows,
timings, chosen hyper-parameters), ``fan_charts.png``, ``calibration.png`` and ``pit.png`` (PIT
histogram per forecaster). ``--cross-series T`` scores the windows of tickers T (a series the
checkpoint was not trained on) in ``cross_series/`` with the same files, and the time split on the
other tickers; baselines of each split are fitted on that split's tickers only. Files are
written to a temporary sibling and moved into place at the end (``stockr1.outdir``): a failed run
leaves the previous ``--out`` as it was; one that holds results is refused unless ``--overwrite``.

Baselines fit on the train split and choose hyper-parameters on val; everything is scored on the
test split only. Under ``--cross-series`` the baselines of the cross-series split are fitted on the
target series' own train split: they are per-series statistical models, so the question is whether
a model that never saw the series beats models fitted to it. The reference of the differences is the model when a checkpoint is given, else
the random walk.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path

import numpy as np

from benchmarks.forecast.report import MODEL_NAME, Split, tables_md, write_outputs
from stockr1.data.quality import DataQualityError
from stockr1.data.run_data import source_windows
from stockr1.metrics.forecast import HIGHER_IS_BETTER, REDUCERS, per_window, reduce
from stockr1.metrics.stats import block_resamples, paired_bootstrap
from stockr1.outdir import command_line, output_dir, refuse_existing
from stockr1.progress import Progress
from stockr1.types import Forecast, Windows, train_only

DEFAULT_BASELINES = ("random_walk", "drift", "auto_arima", "garch11", "gjr_garch_t", "ewma", "dlinear", "patchtst")
RESUME_HINT = " (with --cache-dir, a rerun reuses the baseline forecasts saved there)"
DIFF_METRICS = (
    "crps", "return_rmse", "rv_mae", "rv_mae_dist", "cal_err_close90", "cal_err_max", "pinball",
    "pinball_close05", "pinball_close95", "price_mape", "da_3", "da_5", "da_10",
)
def load_data(spec: str, lookback: int, horizon: int) -> Windows:
    """``sample`` | ``stocks`` | ``universe`` | an OHLCV CSV/parquet file | a directory of such files | a built dataset dir."""
    if spec in ("sample", "stocks", "universe"):
        return source_windows(spec, None, lookback, horizon)
    p = Path(spec)
    if not p.exists():
        raise FileNotFoundError(f"--data {spec!r}: not sample / stocks / universe and no such file or directory")
    source = "dataset" if p.is_dir() and (p / "manifest.json").exists() else "csv"  # dataset: `stockr1 data build`
    try:  # csv: the checks and repairs of `stockr1 data build`; a NaN or negative price is an error, not metrics
        return source_windows(source, str(p), lookback, horizon)
    except DataQualityError as e:
        raise ValueError(f"--data {spec}: {e.one_line()}") from e


def subsample(w: Windows, max_windows: int | None) -> Windows:
    """At most ``max_windows`` windows, evenly spaced in the given (time) order."""
    if max_windows is None or len(w) <= max_windows:
        return w
    return w.select(np.unique(np.linspace(0, len(w) - 1, max_windows).round().astype(int)))


def model_forecast(checkpoint: str, test: Windows, n_samples: int) -> Forecast:
    """The TS encoder's forecast: ``checkpoint`` is its saved directory (``ts fit``'s ``pretrained/``), a
    saved ensemble (``bench forecast_search --save``: members + validation-fitted calibration) or, for
    older runs, a Lightning ``.ckpt`` (``Forecaster.load`` reads both)."""
    from forecast_action.forecaster import Forecaster  # lazy: torch only when a model is scored

    return Forecaster.load(checkpoint).forecast_windows(test, n_samples=n_samples)


def _cache_path(cache_dir: str | None, name: str, key: str) -> Path | None:
    if not cache_dir:
        return None
    return Path(cache_dir) / f"{name}-{hashlib.sha1(key.encode()).hexdigest()[:12]}.npz"


def _load_cached(path: Path | None) -> tuple[Forecast, dict] | None:
    if path is None or not path.exists():
        return None
    z = np.load(path, allow_pickle=False)
    f = Forecast(**{k: z[k] for k in ("close", "close_samples", "high", "low", "volume", "uncertainty")})
    return f, json.loads(str(z["info"]))


def run_forecasters(
    windows: Windows, test: Windows, names: list[str], checkpoint: str | None, n_samples: int, seed: int,
    cache_dir: str | None = None, cache_key: str = "",
) -> tuple[dict[str, Forecast], dict[str, dict]]:
    """Model (if ``checkpoint``) and baseline forecasts of ``test``. Baseline forecasts are cached in
    ``cache_dir`` keyed by (data, test windows, n_samples, seed), so adding a model is cheap."""
    from benchmarks.baselines import BASELINES

    train, val = train_only(windows), windows.split_of("val")
    forecasts, info = {}, {}
    if checkpoint:
        t = time.perf_counter()
        forecasts[MODEL_NAME] = model_forecast(checkpoint, test, n_samples)
        info[MODEL_NAME] = {"checkpoint": str(checkpoint), "predict_s": time.perf_counter() - t}
    bar = Progress(len(names), "[bench forecast]", unit="baseline")  # rate and ETA (AutoARIMA dominates)
    for name in names:
        if name not in BASELINES:
            raise ValueError(f"unknown baseline {name!r}; choose from {sorted(BASELINES)}")
        path = _cache_path(cache_dir, name, cache_key)
        cached = _load_cached(path)
        if cached is not None:
            forecasts[name], info[name] = cached
            print(f"[bench forecast] {name}: reused {path}", flush=True)
            bar.advance()
            continue
        b = BASELINES[name]()
        t0 = time.perf_counter()
        b.fit(train, val)
        t1 = time.perf_counter()
        forecasts[name] = b.predict(test, n_samples=n_samples, seed=seed)
        info[name] = {"fit_s": t1 - t0, "predict_s": time.perf_counter() - t1}
        for attr in ("vol_window", "epochs_trained"):
            if hasattr(b, attr):
                info[name][attr] = getattr(b, attr)
        print(f"[bench forecast] {name}: fit {t1 - t0:.1f}s predict {info[name]['predict_s']:.1f}s", flush=True)
        bar.advance()
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            f = forecasts[name]
            np.savez(path, close=f.close, close_samples=f.close_samples, high=f.high, low=f.low, volume=f.volume,
                     uncertainty=f.uncertainty, info=json.dumps(info[name]))
    return forecasts, info


def differences(
    parts: dict[str, dict[str, np.ndarray]], reference: str, test: Windows, n_boot: int, seed: int
) -> list[dict]:
    """Paired block-bootstrap CI of ``metric(reference) - metric(other)`` for every other forecaster. A
    metric no window observes (the high / low pinball on close-only series) has no difference: left out,
    shown as '–' in the verdict matrix."""
    resamples = block_resamples(test.date, horizon=test.future.shape[1], n_boot=n_boot, seed=seed)
    rows = []
    for other in parts:
        if other == reference:
            continue
        for m in DIFF_METRICS:
            if m not in parts[reference]:
                continue
            a, b = parts[reference][m], parts[other][m]
            value_a, value_b = REDUCERS[m](a), REDUCERS[m](b)
            if np.isnan(value_a) or np.isnan(value_b):
                continue
            r = paired_bootstrap(
                a, b, stat=REDUCERS[m], higher_is_better=HIGHER_IS_BETTER.get(m, False), resamples=resamples
            )
            rows.append({
                "reference": reference, "baseline": other, "metric": m,
                "reference_value": value_a, "baseline_value": value_b,
                "diff": r.diff, "ci_lo": r.lo, "ci_hi": r.hi, "verdict": r.verdict, "block": r.block,
            })
    return rows


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="stockr1 bench forecast", description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="sample", help="sample | stocks | universe | OHLCV csv/parquet file | dir of them | built dataset dir")
    p.add_argument("--checkpoint", default=None, help="saved TS encoder dir (ts fit's pretrained/) or .ckpt (omit: baselines only)")
    p.add_argument("--out", required=True, help="output directory (refused if it holds results, unless --overwrite)")
    p.add_argument("--overwrite", action="store_true", help="replace an --out that holds results")
    p.add_argument("--max-windows", type=int, default=None, help="score at most N evenly spaced test windows")
    p.add_argument("--baselines", default=",".join(DEFAULT_BASELINES), help="comma list; '' for none")
    p.add_argument("--n-samples", type=int, default=100)
    p.add_argument("--n-boot", type=int, default=1000)
    p.add_argument("--lookback", type=int, default=90)
    p.add_argument("--horizon", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch threads (the machine is shared)")
    p.add_argument("--no-plots", action="store_true")
    p.add_argument("--cache-dir", default=None, help="reuse baseline forecasts saved here by an earlier run")
    p.add_argument("--cross-series", default=None, metavar="TICKERS",
                   help="comma list of tickers the checkpoint was NOT trained on: score them as a cross-series "
                        "split (in cross_series/) beside the time split of the other tickers")
    return p.parse_args(argv)


def split_tickers(windows: Windows, target: list[str]) -> tuple[Windows, Windows]:
    """(the other tickers' windows, the target tickers' windows) for ``--cross-series``."""
    tgt = windows.of_tickers(target, "--cross-series")
    rest = sorted(set(map(str, windows.ticker)) - set(target))
    if not rest:
        raise ValueError(f"--cross-series {','.join(target)}: no other ticker left for the time split")
    return windows.of_tickers(rest), tgt


def evaluate(name: str, windows: Windows, names: list[str], args: argparse.Namespace) -> tuple[Split, dict]:
    """Fit the baselines on ``windows``' train split, score every forecaster on its test split."""
    test = subsample(windows.split_of("test"), args.max_windows)
    if len(test) < 2:
        raise ValueError(f"--data {args.data!r}: the {name} test split has {len(test)} windows; need at least 2")
    key = json.dumps([args.data, args.lookback, args.horizon, args.n_samples, args.seed, len(test),
                      str(test.date[0]), str(test.date[-1]), float(test.future[:, :, 3].sum()),
                      sorted(map(str, np.unique(windows.ticker)))])
    forecasts, info = run_forecasters(windows, test, names, args.checkpoint, args.n_samples, args.seed,
                                      args.cache_dir, key)
    parts = {k: per_window(f, test) for k, f in forecasts.items()}
    metrics = {k: reduce(p) for k, p in parts.items()}
    reference = MODEL_NAME if args.checkpoint else names[0]
    rows = differences(parts, reference, test, args.n_boot, args.seed) if len(parts) > 1 else []
    run = {
        "n_test_windows": len(test), "n_train_windows": int((windows.split == "train").sum()),
        "n_val_windows": int((windows.split == "val").sum()), "tickers": sorted(map(str, np.unique(test.ticker))),
        "fit_tickers": sorted(map(str, np.unique(windows.ticker))),
        "test_dates": [str(test.date.min())[:10], str(test.date.max())[:10]],
    }
    return Split(name, test, forecasts, metrics, rows, run), info


def main(argv: list[str] | None = None) -> int:
    argv = [] if argv is None else list(argv)
    args = parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    refuse_existing(args.out, args.overwrite, RESUME_HINT)  # before any work
    names = [b for b in args.baselines.split(",") if b]
    if not names and not args.checkpoint:
        raise ValueError("nothing to score: give --checkpoint and/or at least one baseline")
    windows = load_data(args.data, args.lookback, args.horizon)
    target = [t for t in (args.cross_series or "").split(",") if t]
    sets = dict(zip(("time", "cross_series"), split_tickers(windows, target), strict=True)) if target \
        else {"time": windows}
    t0 = time.perf_counter()
    splits, infos = [], {}
    for name, w in sets.items():
        split, infos[name] = evaluate(name, w, names, args)
        splits.append(split)
    run = {
        "data": args.data, **splits[0].run, "n_samples": args.n_samples, "n_boot": args.n_boot,
        "reference": MODEL_NAME if args.checkpoint else names[0], "seed": args.seed, "forecasters": infos["time"],
        **({"cross_series": {**splits[1].run, "forecasters": infos["cross_series"]}} if target else {}),
        "no_plots": args.no_plots, "wall_s": time.perf_counter() - t0,
    }
    with output_dir(args.out, args.overwrite) as tmp:
        write_outputs(tmp, splits, run, command_line("stockr1 bench forecast", argv))
    for s in splits:
        print(f"[{s.name}] {', '.join(s.run['tickers'])}\n{tables_md(s.metrics)}")
    print(f"wrote {args.out}")
    return 0
