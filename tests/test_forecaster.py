"""``forecast_action.forecaster.Forecaster`` and ``stockr1 forecast``: forecasts of a user's own OHLCV dated
on the trading days after the last row (the exchange's, inferred from the file, else weekdays, and named), from the training features, saved and reloaded in a fresh
process, with one-line CLI errors. The model is the tiny.yaml architecture, random init + fitted stats."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import lightning as L
import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from forecast_action.forecast_cli import main as forecast_main
from forecast_action.forecaster import Forecaster, inference_window
from stockr1.data import build_windows, load_source, synthetic_windows
from stockr1.data.quality import check_frames
from stockr1.data.sources.frames import normalize_frame
from stockr1.data.splits import SplitSpec
from ts_encoder.config import TSEncoderConfig
from ts_encoder.model import TSEncoder
from ts_encoder.uncertainty import UncertaintyNormalizer, raw_uncertainty

REPO = Path(__file__).resolve().parents[1]
TINY = yaml.safe_load((REPO / "configs/ts_encoder/tiny.yaml").read_text())["model"]["encoder"]
ENV = {**os.environ, "PYTHONPATH": str(REPO), "WANDB_MODE": "disabled", "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


def random_walk(n: int = 200, seed: int = 0, start: str = "2021-03-01",
                dates: pd.DatetimeIndex | None = None) -> pd.DataFrame:
    """A random-walk OHLCV frame the project never saw, with the columns a user's CSV has (on weekdays from
    ``start``, or on the last ``n`` of ``dates``)."""
    rng = np.random.default_rng(seed)
    close = 50.0 * np.exp(np.cumsum(rng.normal(0.0003, 0.012, n)))
    open_ = close * np.exp(rng.normal(0, 0.004, n))
    high = np.maximum(open_, close) * np.exp(np.abs(rng.normal(0, 0.006, n)))
    low = np.minimum(open_, close) * np.exp(-np.abs(rng.normal(0, 0.006, n)))
    days = pd.bdate_range(start, periods=n) if dates is None else dates[-n:]
    return pd.DataFrame({"Date": days, "Open": open_, "High": high, "Low": low,
                         "Close": close, "Volume": rng.integers(1_000_000, 3_000_000, n).astype(float)})


@pytest.fixture(scope="module")
def forecaster() -> Forecaster:
    """tiny.yaml's encoder, random init; input stats and uncertainty normaliser fitted on synthetic windows."""
    torch.manual_seed(0)
    cfg = TSEncoderConfig.from_any(TINY)
    enc = TSEncoder(cfg).eval()
    x = synthetic_windows(n_tickers=2, n_days=300, lookback=cfg.lookback, horizon=cfg.horizon).x.astype(np.float64)
    enc.set_input_stats(torch.tensor(x.mean(axis=(0, 2)), dtype=torch.float32),
                        torch.tensor(x.std(axis=(0, 2)) + 1e-8, dtype=torch.float32))
    with torch.no_grad():
        u = raw_uncertainty(enc(torch.as_tensor(x[:256], dtype=torch.float32)))
    return Forecaster(enc, UncertaintyNormalizer().fit(u))


@pytest.fixture(scope="module")
def saved(forecaster: Forecaster, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return forecaster.save_pretrained(tmp_path_factory.mktemp("model") / "tiny")


def test_forecast_starts_on_the_first_weekday_after_the_last_row_when_the_exchange_is_unknown(
        forecaster: Forecaster) -> None:
    df = random_walk(200)
    last = df["Date"].iloc[-1]
    assert last.day_name() == "Friday"  # the weekend must be skipped
    out = forecaster.predict(df, horizon=10)
    assert len(out) == 10 and list(out["horizon"]) == list(range(1, 11))
    assert out["date"].iloc[0] == last + pd.Timedelta(days=3)
    assert list(out["date"]) == list(pd.bdate_range(last + pd.Timedelta(days=1), periods=10))
    assert (out["ticker"] == "series").all() and out["uncertainty"].between(0, 1).all()
    assert list(out.columns) == ["ticker", "date", "horizon", "mean", "q0.05", "q0.1", "q0.5", "q0.9", "q0.95",
                                 "volume", "high_q0.95", "low_q0.05", "uncertainty", "uncertainty_raw", "calendar"]
    assert (out["calendar"] == "weekdays (exchange unknown: pass --exchange MIC)").all()
    # the 3-row-shorter frame forecasts from its own last row (no future rows are needed)
    assert forecaster.predict(df.iloc[:-3], horizon=2)["date"].iloc[0] == df["Date"].iloc[-3]


def nyse_walk(last: str = "2013-01-18") -> pd.DataFrame:
    """A random walk on the NYSE's sessions of the three years up to ``last`` (holidays missing)."""
    from stockr1.data.calendar import sessions

    end = pd.Timestamp(last)
    return random_walk(700, seed=5, dates=sessions("XNYS", end - pd.DateOffset(years=3), end))


def test_a_file_on_nyse_days_is_dated_on_nyse_days_and_the_values_do_not_depend_on_the_calendar(
        forecaster: Forecaster) -> None:
    df = nyse_walk("2013-01-18")  # a Friday; Monday 2013-01-21 (MLK day) the NYSE was closed
    out = forecaster.predict(df, horizon=3)
    assert list(out["date"]) == [pd.Timestamp(d) for d in ("2013-01-22", "2013-01-23", "2013-01-24")]
    assert (out["calendar"] == "XNYS").all()
    weekdays = forecaster.predict(df, horizon=3, exchange="weekdays")
    assert list(weekdays["date"].dt.day) == [21, 22, 23] and (weekdays["calendar"] == "weekdays (requested)").all()
    pd.testing.assert_frame_equal(out.drop(columns=["date", "calendar"]), weekdays.drop(columns=["date", "calendar"]))
    with pytest.raises(ValueError, match="unknown exchange 'NYSEX'"):
        forecaster.predict(df, exchange="NYSEX")


def test_quantiles_are_monotone_in_level_and_seeded(forecaster: Forecaster) -> None:
    df = random_walk(150, seed=1)
    levels = (0.9, 0.05, 0.5, 0.25, 0.75, 0.95, 0.1)  # any order in, increasing columns out
    out = forecaster.predict(df, horizon=10, quantile_levels=levels)
    q = out[["q0.05", "q0.1", "q0.25", "q0.5", "q0.75", "q0.9", "q0.95"]].to_numpy()
    assert np.all(np.diff(q, axis=1) > 0)
    assert np.all(out["high_q0.95"] > out["low_q0.05"])
    pd.testing.assert_frame_equal(out, forecaster.predict(df, horizon=10, quantile_levels=levels))
    other = forecaster.predict(df, horizon=10, quantile_levels=levels, seed=1)
    assert not np.array_equal(other["q0.05"], out["q0.05"])
    np.testing.assert_array_equal(other["mean"], out["mean"])  # the seed moves the samples only


def test_column_case_and_order_do_not_change_the_forecast(forecaster: Forecaster) -> None:
    df = random_walk(150, seed=2)
    ref = forecaster.predict(df)
    shuffled = df[["Volume", "Close", "Date", "Low", "Open", "High"]].copy()
    shuffled.columns = ["VOLUME", "close", "date", "LoW", "open", "HIGH"]
    shuffled["Adj Close"] = shuffled["close"] * 0.9  # extra columns are ignored, as in the CSV source
    pd.testing.assert_frame_equal(forecaster.predict(shuffled), ref)


def test_a_date_column_and_a_date_index_give_the_same_forecast(forecaster: Forecaster) -> None:
    df = random_walk(150, seed=3)
    pd.testing.assert_frame_equal(forecaster.predict(df.set_index("Date")), forecaster.predict(df))
    unnamed = df.set_index("Date")
    unnamed.index.name = None
    pd.testing.assert_frame_equal(forecaster.predict(unnamed), forecaster.predict(df))


def test_a_dict_of_two_tickers_gives_both(forecaster: Forecaster) -> None:
    a, b = random_walk(150, seed=4), random_walk(130, seed=5, start="2021-04-05")
    out = forecaster.predict({"BBB": b, "AAA": a}, horizon=4)
    assert list(out["ticker"]) == ["AAA"] * 4 + ["BBB"] * 4
    for name, frame in (("AAA", a), ("BBB", b)):
        part = out[out["ticker"] == name]
        assert part["date"].iloc[0] == frame["Date"].iloc[-1] + pd.offsets.BDay(1)
        solo = forecaster.predict(frame, horizon=4)
        np.testing.assert_allclose(part["mean"], solo["mean"], rtol=1e-6)  # batching changes float32 rounding only
    long = pd.concat([a.assign(Ticker="AAA"), b.assign(Ticker="BBB")])  # a ticker column splits one frame
    pd.testing.assert_frame_equal(forecaster.predict(long, horizon=4), out)


def test_a_frame_too_short_for_the_lookback_is_a_clear_error(forecaster: Forecaster) -> None:
    with pytest.raises(ValueError, match=r"SHORT: 60 rows .* needs at least 91"):
        forecaster.predict({"SHORT": random_walk(60)})


def test_bad_arguments_and_bad_data_are_clear_errors(forecaster: Forecaster) -> None:
    df = random_walk(150)
    with pytest.raises(ValueError, match=r"horizon must be an integer in 1\.\.10"):
        forecaster.predict(df, horizon=11)
    with pytest.raises(ValueError, match=r"quantile levels must be in \(0, 1\)"):
        forecaster.predict(df, quantile_levels=(0.5, 1.0))
    with pytest.raises(ValueError, match="no close column"):  # Open/High/Low/Volume are optional, Close is not
        forecaster.predict(df.drop(columns=["Close"]))
    bad = df.copy()
    bad.loc[100, "Low"] = -1.0
    with pytest.raises(ValueError, match=r"series 2021-07-19 nonpositive_price"):
        forecaster.predict(bad)
    dup = pd.concat([df, df.iloc[[120]].assign(Close=1.0)])  # same date, another value
    with pytest.raises(ValueError, match="duplicate_conflict"):
        forecaster.predict(dup)
    # unsorted rows are sorted, identical duplicates dropped (the training data's repairs)
    messy = pd.concat([df.sample(frac=1.0, random_state=0), df.iloc[[10]]])
    pd.testing.assert_frame_equal(forecaster.predict(messy), forecaster.predict(df))
    with pytest.raises(ValueError, match="needs the action-conditioned decoder"):
        forecaster.predict(df, action='{"direction": "up"}')


def test_the_inference_window_is_the_training_window_at_the_same_day() -> None:
    """Same features as training: build_windows' x / hist at decision day t == inference_window of
    the frame cut at t, also across a split and a dividend inside the window."""
    raw = random_walk(200, seed=6)
    raw["Dividends"], raw["Stock Splits"] = 0.0, 0.0
    raw.loc[140, "Dividends"] = 0.5
    raw.loc[150, ["Stock Splits", "Open", "High", "Low", "Close"]] = [2.0, *(raw.loc[150, ["Open", "High", "Low", "Close"]] / 2)]
    raw.loc[151:, ["Open", "High", "Low", "Close"]] /= 2
    frames, _ = check_frames({"ACME": normalize_frame(raw, "ACME")})
    frame = frames["ACME"]
    t = frame.index[170]
    w = build_windows(frames, lookback=90, horizon=10, split=SplitSpec(val_start="2100-01-01", test_start="2100-01-02"),
                      start=str(t.date()), end=str(t.date()))
    x, hist = inference_window(frame.loc[:t], 90)
    np.testing.assert_array_equal(x, w.x[0])
    np.testing.assert_array_equal(hist, w.hist[0])


def test_save_pretrained_then_from_pretrained_in_a_fresh_process_is_identical(
        forecaster: Forecaster, saved: Path, tmp_path: Path) -> None:
    csv = tmp_path / "acme.csv"
    random_walk(160, seed=7).to_csv(csv, index=False)
    ref = forecaster.predict(pd.read_csv(csv), horizon=10)
    assert sorted(p.name for p in saved.iterdir()) == ["config.json", "model.safetensors"]
    code = ("import pandas as pd; from forecast_action.forecaster import Forecaster; "
            f"f = Forecaster.from_pretrained({str(saved)!r}); "
            f"f.predict(pd.read_csv({str(csv)!r}), horizon=10).to_pickle({str(tmp_path / 'out.pkl')!r}); "
            "import sys; assert 'lightning' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, env=ENV, cwd=tmp_path, timeout=120)
    pd.testing.assert_frame_equal(pd.read_pickle(tmp_path / "out.pkl"), ref, check_exact=True)


def test_loading_weights_into_another_shape_names_the_mismatch(saved: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "model.safetensors").write_bytes((saved / "model.safetensors").read_bytes())
    meta = json.loads((saved / "config.json").read_text())
    meta["encoder"]["d_model"] = 64
    (other / "config.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=r"weights do not fit the config: .*patch_embed\.weight: \(32, 5\) in the "
                                         r"weights vs \(64, 5\) for the config"):
        Forecaster.from_pretrained(other)
    meta["encoder"]["d_model"], meta["encoder"]["n_layers"] = 32, 3
    (other / "config.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=r"missing blocks\.2\.ln1\.weight"):
        Forecaster.from_pretrained(other)
    with pytest.raises(FileNotFoundError, match="not a saved forecaster"):
        Forecaster.from_pretrained(tmp_path)


def test_a_lightning_checkpoint_forecasts_like_the_training_module(tmp_path: Path) -> None:
    """Two training steps -> .ckpt -> Forecaster.from_checkpoint: its forecast of the frame cut at t is
    the training module's forecast of the window at t."""
    from ts_encoder.datamodule import WindowDataModule
    from ts_encoder.module import TSForecastModule

    torch.manual_seed(0)
    windows = synthetic_windows(n_tickers=2, n_days=300, lookback=90, horizon=10)
    module = TSForecastModule(encoder=TINY, warmup_steps=1, fan_chart_windows=0, val_samples=4, normalizer_fit_windows=64)
    trainer = L.Trainer(accelerator="cpu", devices=1, max_steps=2, limit_val_batches=1, val_check_interval=2,
                        logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=0)
    trainer.fit(module, WindowDataModule.from_windows(windows, batch_size=32, eval_batch_size=64))
    trainer.save_checkpoint(tmp_path / "t.ckpt")
    fc = Forecaster.from_checkpoint(tmp_path / "t.ckpt")
    assert bool(fc.normalizer.fitted)
    frames, _ = check_frames(load_source("synthetic", n_tickers=2, n_days=300, seed=0))
    k = len(windows) // 3
    name = windows.ticker[k]
    frame = frames[name].loc[: pd.Timestamp(windows.date[k])]
    ref = module.forecast(windows.select(np.array([k])), n_samples=8)
    out = fc.predict({name: frame}, horizon=10)
    np.testing.assert_allclose(out["mean"], ref.close[0], rtol=1e-6)
    np.testing.assert_allclose(out["uncertainty"].iloc[0], ref.uncertainty[0], rtol=1e-6)
    with pytest.raises(ValueError, match="not a TS-encoder checkpoint"):
        torch.save({"state_dict": {}}, tmp_path / "x.ckpt")
        Forecaster.from_checkpoint(tmp_path / "x.ckpt")


def test_a_checkpoint_of_stockr1_ts_fit_forecasts_through_the_cli(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The README path: `stockr1 ts fit` with tiny.yaml's callbacks (2 steps on synthetic data), then
    `stockr1 forecast --checkpoint best.ckpt` (its callback states load with weights_only=True)."""
    from ts_encoder.cli import main as ts_main

    cfg = yaml.safe_load((REPO / "configs/ts_encoder/tiny.yaml").read_text())
    for cb in cfg["trainer"]["callbacks"]:
        if "dirpath" in cb.get("init_args", {}):
            cb["init_args"]["dirpath"] = str(tmp_path / "ckpt")
    cfg["model"].update(warmup_steps=1, fan_chart_windows=0, val_samples=4, normalizer_fit_windows=64)
    cfg["data"] = {"source": "synthetic", "n_tickers": 2, "n_days": 300, "lookback": 90, "horizon": 10,
                   "batch_size": 32, "eval_batch_size": 64}
    cfg["trainer"].update(max_epochs=1, limit_train_batches=2, limit_val_batches=1, num_sanity_val_steps=0,
                          enable_model_summary=False, default_root_dir=str(tmp_path),
                          logger=[{"class_path": "lightning.pytorch.loggers.CSVLogger",
                                   "init_args": {"save_dir": str(tmp_path), "name": "logs"}}])
    (tmp_path / "fit.yaml").write_text(yaml.safe_dump(cfg))
    assert ts_main(["fit", "--config", str(tmp_path / "fit.yaml")]) == 0
    data, out = tmp_path / "mine.csv", tmp_path / "forecast.csv"
    random_walk(120, seed=10).to_csv(data, index=False)
    assert forecast_main(["--checkpoint", str(tmp_path / "ckpt" / "best.ckpt"), "--data", str(data),
                          "--out", str(out)]) == 0
    got = pd.read_csv(out)
    assert len(got) == 10 and got["uncertainty"].between(0, 1).all()
    # the fit also wrote the best checkpoint's safetensors form (ExportPretrained): the same forecast
    frame = random_walk(120, seed=10)
    a = Forecaster.from_pretrained(tmp_path / "ckpt" / "pretrained").predict(frame, horizon=10)
    b = Forecaster.from_checkpoint(tmp_path / "ckpt" / "best.ckpt").predict(frame, horizon=10)
    pd.testing.assert_frame_equal(a, b)


def _decoder_file(path: Path, cfg: TSEncoderConfig, forecaster: Forecaster) -> Path:
    """A decoder warm-started from the encoder whose action head moves μ (so actions matter)."""
    from forecast_action.decoder import ActionConditionedDecoder

    dec = ActionConditionedDecoder(cfg)
    dec.load_encoder_state(forecaster.encoder.state_dict())
    torch.manual_seed(1)
    torch.nn.init.normal_(dec.action_head.net.weight, std=0.5)
    dec.normalizer.load_state_dict(forecaster.normalizer.state_dict())
    return dec.save_pretrained(path)


def test_an_action_conditions_the_decoder_forecast(forecaster: Forecaster, tmp_path: Path) -> None:
    from forecast_action.decoder import ActionConditionedDecoder
    from forecast_action.schema import ForecastAction

    pt = _decoder_file(tmp_path / "dec", forecaster.cfg, forecaster)
    fc = Forecaster(forecaster.encoder, forecaster.normalizer, ActionConditionedDecoder.load(pt))
    df = random_walk(150, seed=8)
    up = fc.predict(df, action='{"direction": "up", "volatility_level": "low"}')
    down = fc.predict(df, action=ForecastAction(direction="down", volatility_level="low"))
    assert not np.allclose(up["mean"], down["mean"])
    pd.testing.assert_frame_equal(fc.predict(df, action=ForecastAction(direction="up", volatility_level="low")), up)
    pd.testing.assert_frame_equal(fc.predict(df), forecaster.predict(df))  # no action: the encoder
    with pytest.raises(ValueError, match="invalid action: .*direction must be one of"):
        fc.predict(df, action='{"direction": "upward-ish"}')
    with pytest.raises(ValueError, match="invalid action: unknown field 'colour'"):
        fc.predict(df, action='{"direction": "up", "colour": "red"}')
    fc.save_pretrained(tmp_path / "with_dec")
    again = Forecaster.from_pretrained(tmp_path / "with_dec")
    pd.testing.assert_frame_equal(again.predict(df, action='{"direction": "up", "volatility_level": "low"}'), up)
    forecaster.save_pretrained(tmp_path / "plain")  # a decoder given beside a saved directory (the CLI's --decoder)
    beside = Forecaster.load(tmp_path / "plain", decoder=pt)
    pd.testing.assert_frame_equal(beside.predict(df, action='{"direction": "up", "volatility_level": "low"}'), up)
    with pytest.raises(ValueError, match="decoder does not fit the encoder: lookback: decoder 45 vs encoder 90"):
        Forecaster(forecaster.encoder, forecaster.normalizer,
                   ActionConditionedDecoder(TSEncoderConfig.from_any({**TINY, "lookback": 45})))


# ------------------------------------------------------------------ CLI
def test_cli_end_to_end_on_a_csv_the_project_never_saw(saved: Path, tmp_path: Path) -> None:
    data = tmp_path / "ACME.csv"
    random_walk(180, seed=9).to_csv(data, index=False)
    out = tmp_path / "forecast.csv"
    cmd = [sys.executable, "-m", "stockr1.cli", "forecast", "--checkpoint", str(saved), "--data", str(data),
           "--horizon", "10", "--quantiles", "0.05", "0.5", "0.95", "--out", str(out), "--plot"]
    res = subprocess.run(cmd, env=ENV, cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.strip().splitlines()
    assert lines[-1].startswith("wrote 10 rows") and str(out) in lines[-1]
    got = pd.read_csv(out, parse_dates=["date"])
    assert list(got.columns[:6]) == ["ticker", "date", "horizon", "mean", "q0.05", "q0.5"]
    assert (got["ticker"] == "ACME").all() and len(got) == 10
    assert got["date"].iloc[0] == pd.read_csv(data, parse_dates=["Date"])["Date"].iloc[-1] + pd.offsets.BDay(1)
    assert (got["calendar"] == "weekdays (exchange unknown: pass --exchange MIC)").all()
    assert "calendar weekdays (exchange unknown: pass --exchange MIC)" in lines[-1]
    assert (out.with_suffix(".png")).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp files left


def test_cli_dates_a_nyse_file_on_nyse_days_and_says_so(saved: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    data, out = tmp_path / "NYSEWALK.csv", tmp_path / "f.csv"
    nyse_walk("2013-03-22").to_csv(data, index=False)  # the Friday before Good Friday 2013-03-29
    assert forecast_main(["--checkpoint", str(saved), "--data", str(data), "--horizon", "6", "--out", str(out)]) == 0
    line = capsys.readouterr().out.strip()
    assert "2013-03-25..2013-04-02, calendar XNYS)" in line
    got = pd.read_csv(out, parse_dates=["date"])
    assert list(got["date"].dt.strftime("%m-%d")) == ["03-25", "03-26", "03-27", "03-28", "04-01", "04-02"]
    assert (got["calendar"] == "XNYS").all()
    assert forecast_main(["--checkpoint", str(saved), "--data", str(data), "--horizon", "6", "--out", str(out),
                          "--exchange", "weekdays", "--overwrite"]) == 0
    assert "2013-03-25..2013-04-01, calendar weekdays (requested))" in capsys.readouterr().out


def _cli_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        forecast_main(argv)
    err = capsys.readouterr().err
    assert exc.value.code not in (0, None)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_cli_errors_are_one_line_and_leave_no_out(saved: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good.csv"
    random_walk(150).to_csv(good, index=False)
    nocol = tmp_path / "noclose.csv"
    random_walk(150).drop(columns=["Close"]).to_csv(nocol, index=False)
    baddate = tmp_path / "baddate.csv"
    random_walk(150).astype({"Date": str}).replace({"2021-05-03": "2021-13-45"}).to_csv(baddate, index=False)
    badval = tmp_path / "badval.csv"
    random_walk(150).assign(Low=lambda d: d["Low"].where(d.index != 100, -1.0)).to_csv(badval, index=False)
    short = tmp_path / "short.csv"
    random_walk(50).to_csv(short, index=False)
    out = tmp_path / "f.csv"
    base = ["--checkpoint", str(saved), "--out", str(out)]
    assert "missing.csv does not exist" in _cli_error(capsys, [*base, "--data", str(tmp_path / "missing.csv")])
    err = _cli_error(capsys, [*base, "--data", str(nocol)])
    assert "noclose.csv" in err and "no close column" in err
    err = _cli_error(capsys, [*base, "--data", str(baddate)])
    assert "baddate.csv" in err and "2021-13-45" in err
    err = _cli_error(capsys, [*base, "--data", str(badval)])
    assert "badval.csv" in err and "badval 2021-07-19 nonpositive_price" in err and "'low': -1.0" in err
    assert "short: 50 rows" in _cli_error(capsys, [*base, "--data", str(short)])
    assert "needs the action-conditioned decoder" in _cli_error(capsys, [*base, "--data", str(good), "--action", "{}"])
    assert "horizon must be" in _cli_error(capsys, [*base, "--data", str(good), "--horizon", "30"])
    assert "unknown exchange 'XQQQ'" in _cli_error(capsys, [*base, "--data", str(good), "--exchange", "XQQQ"])
    assert "the following arguments are required" in _cli_error(capsys, ["--data", str(good)])
    assert not out.exists()
    out.write_text("keep me")
    assert "already holds results; pass --overwrite" in _cli_error(capsys, [*base, "--data", str(good)])
    assert out.read_text() == "keep me"
    assert forecast_main([*base, "--data", str(good), "--horizon", "3", "--overwrite"]) == 0
    assert capsys.readouterr().out.strip().endswith(str(out))
    assert len(pd.read_csv(out)) == 3
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


# ------------------------------------------------------------------ a saved EncoderEnsemble
def test_a_saved_ensemble_loads_as_a_forecaster_and_forecasts_its_mixture(forecaster: Forecaster,
                                                                          tmp_path: Path) -> None:
    """``Forecaster.load`` of a ``bench forecast_search --save`` directory: windows are forecast by the
    calibrated mixture (not member 0 alone), ``predict`` on a user frame by the same mixture's paths, and it
    saves back as an ensemble."""
    from ts_encoder.ensemble import EncoderEnsemble, is_ensemble

    torch.manual_seed(1)
    other = TSEncoder(forecaster.cfg).eval()
    other.load_state_dict(forecaster.encoder.state_dict())
    with torch.no_grad():
        other.head_sigma.bias.add_(1.0)  # a wider second member
    w = synthetic_windows(n_tickers=2, n_days=300, lookback=forecaster.lookback, horizon=forecaster.horizon)
    ens = EncoderEnsemble([forecaster.encoder, other], [forecaster.normalizer, copy.deepcopy(forecaster.normalizer)])
    ens.fit_calibration(w, "scale", fitted_on="toy")
    ens.save_pretrained(tmp_path / "ens")
    loaded = Forecaster.load(tmp_path / "ens")
    assert loaded.ensemble is not None and len(loaded.ensemble.members) == 2
    want = ens.forecast_windows(w, n_samples=20, seed=3)
    got = loaded.forecast_windows(w, n_samples=20, seed=3)
    np.testing.assert_array_equal(got.close_samples, want.close_samples)
    assert not np.allclose(forecaster.forecast_windows(w, n_samples=20, seed=3).close_samples, got.close_samples)
    frame = random_walk(150, seed=4)
    a = loaded.predict(frame, n_samples=200, seed=0)
    b = forecaster.predict(frame, n_samples=200, seed=0)
    assert not np.allclose(a["q0.95"], b["q0.95"])  # the mixture, not member 0 alone
    x, hist = inference_window(normalize_frame(frame, "series"), forecaster.lookback)
    fc, _ = ens.forecast_x(x[None], hist[-1:], 200, torch.Generator().manual_seed(0))
    np.testing.assert_allclose(a["q0.5"].to_numpy(), np.quantile(fc.close_samples[0], 0.5, axis=0), rtol=1e-12)
    loaded.save_pretrained(tmp_path / "again")
    assert is_ensemble(tmp_path / "again")
    np.testing.assert_array_equal(Forecaster.load(tmp_path / "again").forecast_windows(w, 20, 3).close_samples,
                                  want.close_samples)
