"""End to end: `stockr1 bench forecast` on a tiny user CSV writes every file with stable names."""

import json

import numpy as np
import pandas as pd
import pytest

from benchmarks.forecast.command import DIFF_METRICS, main
from benchmarks.forecast.report import table_md
from stockr1.metrics.forecast import METRICS


def _write_csv(path, n=420, seed=0):
    rng = np.random.default_rng(seed)
    close = 100 * np.exp(np.cumsum(rng.normal(0.0003, 0.01, n)))
    open_ = close * np.exp(rng.normal(0, 0.002, n))
    df = pd.DataFrame({
        "Date": pd.bdate_range("2015-01-02", periods=n),
        "Open": open_,
        "High": np.maximum(open_, close) * (1 + np.abs(rng.normal(0, 0.004, n))),
        "Low": np.minimum(open_, close) * (1 - np.abs(rng.normal(0, 0.004, n))),
        "Close": close,
        "Volume": np.exp(rng.normal(15, 0.3, n)).round(),
    })
    df.to_csv(path, index=False)


def test_bench_forecast_on_tiny_csv(tmp_path):
    csv = tmp_path / "MYCO.csv"
    _write_csv(csv)
    out = tmp_path / "out"
    rc = main([
        "--data", str(csv), "--out", str(out),
        "--baselines", "random_walk,drift,garch11,gjr_garch_t,ewma,dlinear,auto_arima",
        "--max-windows", "12", "--n-samples", "32", "--n-boot", "50",
    ])
    assert rc == 0
    for f in ("metrics.json", "table.md", "differences.md", "differences.json", "run.json",
              "fan_charts.png", "calibration.png", "pit.png", "README.md"):
        assert (out / f).stat().st_size > 0, f
    metrics = json.loads((out / "metrics.json").read_text())
    assert list(metrics) == ["random_walk", "drift", "garch11", "gjr_garch_t", "ewma", "dlinear", "auto_arima"]
    for vals in metrics.values():
        assert tuple(vals) == METRICS
        assert all(np.isfinite(v) for v in vals.values())
        assert vals["cov_close50"] <= vals["cov_close80"] <= vals["cov_close90"] <= vals["cov_close95"]
        assert vals["pinball_close05"] > 0 and vals["pinball_close95"] > 0
    run = json.loads((out / "run.json").read_text())
    assert run["n_test_windows"] == 12 and run["reference"] == "random_walk" and run["tickers"] == ["MYCO"]
    rows = json.loads((out / "differences.json").read_text())
    assert {r["baseline"] for r in rows} == {"drift", "garch11", "gjr_garch_t", "ewma", "dlinear", "auto_arima"}
    assert {r["metric"] for r in rows} == set(DIFF_METRICS)
    for r in rows:
        assert r["ci_lo"] <= r["ci_hi"] and r["verdict"] in {"holds", "tie", "worse"}
        if r["ci_lo"] <= 0 <= r["ci_hi"]:
            assert r["verdict"] == "tie"
    table = (out / "table.md").read_text()
    assert "| Price (MAPE) | Price (rMSE) | Volume (MAPE)" in table and "CRPS" in table
    assert "| Model | CRPS (×10⁻²) | Pinball C.05 (×10⁻³) | Pinball C.95 (×10⁻³) | Cov 50% (%) | Cov 80% (%) " in table
    for name in metrics:  # one row in the Table 2 layout, one in the close-distribution table
        assert table.count(f"| {name} |") == 2
    readme = (out / "README.md").read_text()
    assert table in readme and "[pit.png](pit.png)" in readme and "Cross-series" not in readme


def test_table_bolds_best_and_nominal_closest():
    m = {"a": {"crps": 0.01, "cov_close90": 0.80}, "b": {"crps": 0.02, "cov_close90": 0.91}}
    t = table_md(m)
    row_a = next(r for r in t.splitlines() if r.startswith("| a |"))
    row_b = next(r for r in t.splitlines() if r.startswith("| b |"))
    assert "**1.000**" in row_a and "**91.0**" in row_b and "**80.0**" not in row_a
    close_only = table_md({"a": {"crps": 0.01, "vol_mape": float("nan")}})  # no window has volume
    assert "nan" not in close_only and "| a | – | – | – |" in close_only


def test_bad_data_and_unknown_baseline_are_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        main(["--data", str(tmp_path / "missing.csv"), "--out", str(tmp_path / "o")])
    csv = tmp_path / "X.csv"
    _write_csv(csv)
    with pytest.raises(ValueError, match="unknown baseline"):
        main(["--data", str(csv), "--out", str(tmp_path / "o"), "--baselines", "nope", "--no-plots"])


def test_cached_baselines_are_reused_identically(tmp_path, capsys):
    csv = tmp_path / "C.csv"
    _write_csv(csv, seed=3)
    args = ["--data", str(csv), "--baselines", "random_walk,drift", "--n-samples", "16", "--n-boot", "20",
            "--no-plots", "--cache-dir", str(tmp_path / "cache")]
    main(args + ["--out", str(tmp_path / "a")])
    assert len(list((tmp_path / "cache").glob("*.npz"))) == 2
    capsys.readouterr()
    main(args + ["--out", str(tmp_path / "b")])
    assert capsys.readouterr().out.count("reused") == 2
    a, b = ((tmp_path / d / "metrics.json").read_text() for d in ("a", "b"))
    assert a == b
    # a different test subset must not hit the cache
    main(args + ["--out", str(tmp_path / "c"), "--max-windows", "5"])
    assert len(list((tmp_path / "cache").glob("*.npz"))) == 4


def _random_checkpoint(tmp_path):
    import lightning as L
    import torch

    from ts_encoder.module import TSForecastModule

    module = TSForecastModule(encoder=dict(lookback=90, horizon=10, patch_len=5, n_vars=5, d_model=16,
                                           n_layers=1, n_heads=2, ffn_dim=32, dropout=0.0, d_llm=16, cond_dim=0))
    ckpt = tmp_path / "rand.ckpt"
    torch.save({"state_dict": module.state_dict(), "hyper_parameters": dict(module.hparams),
                "pytorch-lightning_version": L.__version__}, ckpt)
    return ckpt


def test_bench_forecast_scores_a_checkpoint_against_baselines(tmp_path):
    """The model path: a (random-init) TSForecastModule checkpoint is loaded with no extra
    arguments and becomes the reference of the differences."""
    ckpt = _random_checkpoint(tmp_path)
    csv = tmp_path / "M.csv"
    _write_csv(csv, seed=5)
    out = tmp_path / "out"
    main(["--data", str(csv), "--out", str(out), "--checkpoint", str(ckpt), "--baselines", "random_walk",
          "--max-windows", "10", "--n-samples", "16", "--n-boot", "20", "--no-plots"])
    metrics = json.loads((out / "metrics.json").read_text())
    assert list(metrics) == ["stockr1_ts", "random_walk"]
    assert tuple(metrics["stockr1_ts"]) == METRICS
    rows = json.loads((out / "differences.json").read_text())
    assert {r["reference"] for r in rows} == {"stockr1_ts"} and {r["baseline"] for r in rows} == {"random_walk"}


def test_bench_forecast_reads_a_built_dataset_dir(tmp_path):
    from stockr1.data import BuildConfig, build_dataset

    csv = tmp_path / "D.csv"
    _write_csv(csv, seed=7)
    build_dataset(BuildConfig(source="csv", path=str(csv), context=False), tmp_path / "ds")
    out = tmp_path / "out"
    main(["--data", str(tmp_path / "ds"), "--out", str(out), "--baselines", "random_walk,drift",
          "--n-samples", "16", "--n-boot", "20", "--no-plots"])
    run = json.loads((out / "run.json").read_text())
    assert run["tickers"] == ["D"] and run["n_test_windows"] >= 2


def test_cross_series_scores_only_the_other_tickers_windows(tmp_path):
    """--cross-series B: the time split holds A's windows, cross_series/ B's only, and B's baselines are
    fitted on B's train split alone - the same numbers as a run on B's data by itself."""
    src = tmp_path / "two"
    src.mkdir()
    _write_csv(src / "A.csv", seed=11)
    _write_csv(src / "B.csv", seed=12)
    ckpt = _random_checkpoint(tmp_path)
    common = ["--baselines", "random_walk,ewma,gjr_garch_t", "--n-samples", "16", "--n-boot", "20", "--no-plots"]
    out = tmp_path / "cross"
    main(["--data", str(src), "--out", str(out), "--checkpoint", str(ckpt), "--cross-series", "B", *common])
    run = json.loads((out / "run.json").read_text())
    assert run["tickers"] == run["fit_tickers"] == ["A"]
    assert run["cross_series"]["tickers"] == run["cross_series"]["fit_tickers"] == ["B"]
    cross = json.loads((out / "cross_series" / "metrics.json").read_text())
    rows = json.loads((out / "cross_series" / "differences.json").read_text())
    assert list(cross) == ["stockr1_ts", "random_walk", "ewma", "gjr_garch_t"]
    assert {(r["reference"], r["baseline"]) for r in rows if r["metric"] == "crps"} == {
        ("stockr1_ts", b) for b in ("random_walk", "ewma", "gjr_garch_t")}
    alone = tmp_path / "alone"
    main(["--data", str(src / "B.csv"), "--out", str(alone), *common])
    b_only = json.loads((alone / "metrics.json").read_text())
    assert run["cross_series"]["n_test_windows"] == json.loads((alone / "run.json").read_text())["n_test_windows"]
    for name in ("random_walk", "ewma", "gjr_garch_t"):
        assert cross[name] == b_only[name]
    assert json.loads((out / "metrics.json").read_text())["ewma"] != cross["ewma"]
    readme = (out / "README.md").read_text()
    assert "## Time split" in readme and "## Cross-series split: scored on B" in readme
    with pytest.raises(ValueError, match=r"--cross-series: no windows for \['Z'\]"):
        main(["--data", str(src), "--out", str(tmp_path / "z"), "--cross-series", "Z", *common])


def _target_split(model: dict, crps_rows: list[tuple[str, float, float, float, float, str]]):
    from benchmarks.forecast.report import MODEL_NAME, Split

    rows = [{"reference": MODEL_NAME, "baseline": b, "metric": "crps", "reference_value": ref, "baseline_value": base,
             "diff": ref - base, "ci_lo": lo, "ci_hi": hi, "verdict": v} for b, ref, base, lo, hi, v in crps_rows]
    return Split("time", None, {}, {MODEL_NAME: model, **{r[0]: {} for r in crps_rows}}, rows, {})


def test_readme_states_each_target_and_its_shortfall():
    from benchmarks.forecast.report import targets_md

    cov = {"cov_close50": 0.535, "cov_close80": 0.80, "cov_close90": 0.875, "cov_close95": 0.924}
    miss = "\n".join(targets_md(_target_split({"crps": 0.0102, "cal_err_max": 0.035, **cov}, [
        ("garch11", 0.0102, 0.0100, -0.00001, 0.00005, "tie"), ("ewma", 0.0102, 0.0103, -0.0002, 0.0001, "tie")])))
    # CRPS above garch11 on the mean, but both intervals contain 0: ties, not a miss read off the mean
    assert ("**not shown**: tie with garch11, ewma (the interval includes 0); worst garch11 1.0000 vs 1.0200, "
            "diff +0.0200 [-0.0010, +0.0050], tie | undecided (ties) |") in miss
    assert "87.5% (**0.5 points outside**) | no (point estimate)" in miss  # 88% is the band's lower edge
    assert "worst 3.5 points (50% 53.5, 80% 80.0, 90% 87.5, 95% 92.4); **0.5 points over** | no" in miss
    worse = "\n".join(targets_md(_target_split({"crps": 0.0102, "cal_err_max": 0.03, **cov}, [
        ("garch11", 0.0102, 0.0100, 0.0001, 0.0003, "stored words are ignored"),
        ("ewma", 0.0102, 0.0103, -0.0002, 0.0001, "tie")])))
    assert "**not met**: above garch11 beyond the interval, tie with ewma; worst garch11" in worse
    assert "| no |" in worse
    cov |= {"cov_close90": 0.90}
    tie = "\n".join(targets_md(_target_split({"crps": 0.0099, "cal_err_max": 0.03, **cov}, [
        ("garch11", 0.0099, 0.0100, -0.0002, -0.00001, "holds"), ("ewma", 0.0099, 0.0101, -0.0003, 0.0001, "tie")])))
    assert "**not shown**: tie with ewma" in tie and "| undecided (ties) |" in tie
    met = "\n".join(targets_md(_target_split({"crps": 0.0099, "cal_err_max": 0.03, **cov}, [
        ("garch11", 0.0099, 0.0100, -0.0002, -0.00001, "tie"), ("ewma", 0.0099, 0.0101, -0.0003, -0.0001, "tie")])))
    assert "below all 2 baselines beyond the 95% interval; closest: garch11 1.0000" in met
    assert "| 90.0% | yes (point estimate) |" in met and "| no" not in met


def test_a_metric_no_window_observes_gets_no_difference_and_the_others_do():
    """Close-only series (the stocks held out of the cross-section split): the high / low pinball is NaN
    on every window, so it has no paired difference; CRPS still does, computed by hand here."""
    from types import SimpleNamespace

    from benchmarks.forecast.command import differences

    n = 40
    test = SimpleNamespace(date=np.arange("2020-01-01", n, dtype="datetime64[D]"), future=np.zeros((n, 10, 5)))
    crps_ref, crps_other = np.full(n, 1.0), np.full(n, 3.0)
    parts = {"model": {"crps": crps_ref, "pinball": np.full(n, np.nan)},
             "rw": {"crps": crps_other, "pinball": np.full(n, np.nan)}}
    rows = differences(parts, "model", test, n_boot=50, seed=0)
    assert [r["metric"] for r in rows] == ["crps"]
    assert rows[0]["diff"] == pytest.approx(-2.0) and rows[0]["verdict"] == "holds"
