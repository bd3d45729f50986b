"""TSForecastModule + WindowDataModule: training changes weights, checkpoint round-trip with no
extra arguments gives identical forecasts, `ckpt_path="last"` resumes, train-only statistics."""

from pathlib import Path

import lightning as L
import numpy as np
import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint

from stockr1.data import synthetic_windows
from ts_encoder.datamodule import WindowDataModule
from ts_encoder.module import TSForecastModule

ENC = {"lookback": 20, "horizon": 5, "d_model": 16, "n_layers": 1, "n_heads": 2, "ffn_dim": 32, "d_llm": 8}


def _windows():
    return synthetic_windows(n_tickers=2, n_days=300, seed=0, lookback=20, horizon=5)


def _trainer(tmp: Path, max_steps: int) -> L.Trainer:
    ckpt = ModelCheckpoint(dirpath=tmp, monitor="val/loss", mode="min", save_last=True, filename="best",
                           auto_insert_metric_name=False)
    return L.Trainer(default_root_dir=tmp, accelerator="cpu", devices=1, max_steps=max_steps, limit_val_batches=1, val_check_interval=2,
                     logger=False, callbacks=[ckpt], enable_progress_bar=False, enable_model_summary=False)


def test_fit_checkpoint_round_trip_and_resume(tmp_path: Path) -> None:
    torch.manual_seed(0)
    windows = _windows()
    dm = WindowDataModule.from_windows(windows, batch_size=32, eval_batch_size=64)
    module = TSForecastModule(encoder=ENC, lr=1e-3, warmup_steps=2, fan_chart_windows=2, val_samples=8)
    init = {k: v.clone() for k, v in module.state_dict().items()}
    _trainer(tmp_path, 4).fit(module, dm)
    changed = [k for k, v in module.state_dict().items() if k.startswith("model.") and not torch.equal(v, init[k])]
    assert "model.head_mu.weight" in changed and "model.blocks.0.attn.qkv.weight" in changed
    assert "model.b_inter" in changed  # the bias scalars are trained
    # input standardisation = training-split statistics
    train_x = windows.split_of("train").x.astype(np.float64)
    np.testing.assert_allclose(module.model.x_loc.numpy(), train_x.mean(axis=(0, 2)), rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(module.model.x_scale.numpy(), train_x.std(axis=(0, 2)), rtol=1e-4)
    assert bool(module.normalizer.fitted)

    last = tmp_path / "last.ckpt"
    assert last.exists() and (tmp_path / "best.ckpt").exists()
    module.eval()
    loaded = TSForecastModule.load_from_checkpoint(last, map_location="cpu")  # no extra arguments
    assert loaded.cfg == module.cfg
    val = windows.split_of("val")
    a, b = module.forecast(val, n_samples=16, seed=3), loaded.forecast(val, n_samples=16, seed=3)
    for name in ("close", "close_samples", "high", "low", "volume", "uncertainty"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert np.all((a.uncertainty >= 0) & (a.uncertainty <= 1))
    assert a.close_samples.shape == (len(val), 16, 5)

    # `predict` + ForecastWriter writes the same forecasts as .forecast() (same order, same seed)
    from ts_encoder.writer import ForecastWriter

    writer = ForecastWriter(output_dir=str(tmp_path / "pred"), n_samples=16, seed=3)
    L.Trainer(accelerator="cpu", logger=False, callbacks=[writer], enable_progress_bar=False).predict(
        loaded, WindowDataModule.from_windows(windows, eval_batch_size=64, predict_split="val"))
    z = np.load(tmp_path / "pred" / "forecast.npz")
    np.testing.assert_allclose(z["close_samples"], a.close_samples, rtol=1e-6)
    np.testing.assert_allclose(z["uncertainty"], a.uncertainty, rtol=1e-6)
    assert list(z["ticker"]) == list(val.ticker.astype(str))

    # resume from last.ckpt: continues at step 4 and stops at 6
    resumed = TSForecastModule(encoder=ENC, lr=1e-3, warmup_steps=2, fan_chart_windows=0)
    trainer = _trainer(tmp_path, 6)
    trainer.fit(resumed, WindowDataModule.from_windows(windows, batch_size=32), ckpt_path="last")
    assert trainer.global_step == 6


def test_forecast_rejects_wrong_lookback() -> None:
    module = TSForecastModule(encoder=ENC)
    w = synthetic_windows(n_tickers=1, n_days=200, seed=0, lookback=30, horizon=5)
    with pytest.raises(ValueError, match="expects"):
        module.forecast(w)


def test_datamodule_checks() -> None:
    w = _windows()
    with pytest.raises(ValueError, match="lookback / horizon"):
        WindowDataModule(lookback=90, horizon=10)._set(w)
    bad = w.x.copy()
    bad[3, 0, 0] = np.nan
    from stockr1.types import Windows

    broken = Windows(ticker=w.ticker, date=w.date, x=bad, y=w.y, hist=w.hist, future=w.future, split=w.split)
    with pytest.raises(ValueError, match="non-finite x"):
        WindowDataModule.from_windows(broken)
    with pytest.raises(ValueError, match="unknown data source"):
        WindowDataModule(source="nope")
    dm = WindowDataModule.from_windows(w, batch_size=8)
    batch = next(iter(dm.train_dataloader()))
    assert batch["x"].shape == (8, 5, 20) and batch["y"].shape == (8, 5, 5)


def test_datamodule_tickers_keeps_only_those_tickers_in_every_split() -> None:
    """`ts fit --data.tickers '[SYN00]'` trains, validates and tests on SYN00 alone (cross-series training)."""
    from lightning.pytorch.cli import LightningCLI

    cli = LightningCLI(TSForecastModule, WindowDataModule, run=False, args=[
        "--model.encoder", str(ENC).replace("'", '"'), "--data.source", "synthetic", "--data.n_tickers", "2",
        "--data.n_days", "300", "--data.lookback", "20", "--data.horizon", "5", "--data.tickers", "[SYN00]",
        "--trainer.logger", "false"])
    dm = cli.datamodule
    dm.setup()
    full = _windows()
    for split, w in dm.windows.items():
        assert set(w.ticker.tolist()) == {"SYN00"}
        assert len(w) == int(((full.split == split) & (full.ticker == "SYN00")).sum()) > 0
    with pytest.raises(ValueError, match=r"data.tickers: no windows for \['NOPE'\]"):
        WindowDataModule.from_windows(full, tickers=["NOPE"])
