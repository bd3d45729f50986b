"""Absent channels (close-only series beside OHLCV ones) through windows, the TS encoder, its loss, the
decoder and its loss, the forecasts and the metrics: what an absent channel holds (NaN, random numbers,
1e6) cannot change any output, loss or gradient; the release encoder is unchanged on full data."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from forecast_action.decoder import ActionConditionedDecoder
from forecast_action.decoder_loss import DecoderLoss, DecoderRecipe
from forecast_action.derive import ActionThresholds, actions_from_windows
from forecast_action.encoder import ActionEncoderConfig, featurize
from forecast_action.forecaster import Forecaster
from stockr1.data import build_windows, load_source, sample_windows
from stockr1.data.quality import check_frames
from stockr1.data.splits import SplitSpec
from stockr1.metrics.forecast import forecast_metrics
from stockr1.types import CHANNELS, CLOSE, HIGH, LOW, VOLUME, Windows, train_only
from ts_encoder.config import LossWeights, TSEncoderConfig
from ts_encoder.datamodule import WindowDataModule, input_stats
from ts_encoder.loss import ts_loss
from ts_encoder.model import TSEncoder
from ts_encoder.sampling import forecast_windows
from ts_encoder.uncertainty import raw_uncertainty

ROOT = Path(__file__).resolve().parents[1]
ABSENT = [c for c in range(5) if c != CLOSE]
CFG = TSEncoderConfig(lookback=20, horizon=5, d_model=16, n_layers=2, n_heads=2, ffn_dim=32, d_llm=8, dropout=0.1)
CONFIGS = {  # the plain encoder, and the one with every optional path: EWMA reference, missing embedding, FiLM
    "plain": CFG,
    "ewma_missing_film": replace(CFG, scale_ref="ewma", missing_embed=True, cond_dim=4),
}


def mixed_windows(lookback: int = 20, horizon: int = 5) -> Windows:
    """Two OHLCV synthetic tickers and a third whose open/high/low/volume are absent (close-only)."""
    frames = load_source("synthetic", n_tickers=3, n_days=220, seed=1)
    frames["SYN02"] = frames["SYN02"].assign(open=np.nan, high=np.nan, low=np.nan, volume=np.nan)
    frames, _ = check_frames(frames)
    return build_windows(frames, lookback=lookback, horizon=horizon, split=SplitSpec(val_frac=0.2, test_frac=0.2))


def refill(a: np.ndarray | torch.Tensor, channels: np.ndarray, how: str, axis: int) -> np.ndarray:
    """``a`` with every absent entry (channels False; channel axis ``axis``) replaced by ``how``."""
    a = np.array(a, dtype=np.float64, copy=True)
    mask = np.expand_dims(~channels, tuple(range(2, a.ndim))) if axis == 1 else ~channels[:, None, :]
    fill = {"nan": np.nan, "big": 1e6, "random": np.random.default_rng(7).normal(0, 3, a.shape)}[how]
    return np.ascontiguousarray(np.where(mask, fill, a))  # one memory layout: reductions then round alike


def _encoder(cfg: TSEncoderConfig, train: Windows) -> TSEncoder:
    torch.manual_seed(0)
    model = TSEncoder(cfg)
    model.set_input_stats(*input_stats(train_only(train)))
    with torch.no_grad():  # non-trivial values on the zero-initialised parts, so they are exercised
        for p in model.parameters():
            if not p.abs().sum():
                p.normal_(0, 0.05)
    return model


def test_windows_mark_absent_channels_and_hold_nan_there():
    w = mixed_windows()
    close_only = w.ticker == "SYN02"
    assert close_only.any() and (~close_only).any()
    np.testing.assert_array_equal(w.channels[close_only], np.tile([False, False, False, True, False], (close_only.sum(), 1)))
    assert w.channels[~close_only].all()
    assert np.isnan(w.x[close_only][:, ABSENT]).all() and np.isnan(w.future[close_only][:, :, ABSENT]).all()
    assert np.isfinite(w.x[close_only][:, CLOSE]).all() and np.isfinite(w.x[~close_only]).all()
    assert (w.select(np.flatnonzero(close_only)).channels == w.channels[close_only]).all()
    assert (train_only(w).channels == w.channels[w.split == "train"]).all()
    with pytest.raises(ValueError, match="close is required"):
        Windows(w.ticker, w.date, w.x, w.y, w.hist, w.future, w.split, w.context, np.zeros_like(w.channels))


@pytest.mark.parametrize("name", list(CONFIGS))
def test_absent_values_change_no_output_loss_or_gradient(name):
    """A mixed batch, in train mode (dropout on): the absent entries of x and y as NaN, as random numbers
    and as 1e6 give bit-identical outputs, loss parts and gradients, all finite; a change to an observed
    value does change them (so the test can fail)."""
    cfg = CONFIGS[name]
    w = mixed_windows(cfg.lookback, cfg.horizon)
    model = _encoder(cfg, w)
    rows = np.r_[np.flatnonzero(w.ticker == "SYN02")[:4], np.flatnonzero(w.ticker == "SYN00")[:4]]
    b = w.select(rows)
    ch = torch.as_tensor(b.channels)
    cond = torch.randn(len(b), cfg.cond_dim) if cfg.cond_dim else None

    def run(x: np.ndarray, y: np.ndarray) -> dict[str, torch.Tensor]:
        model.zero_grad()
        torch.manual_seed(1)  # the same dropout masks every time
        out = model.train()(torch.as_tensor(x, dtype=torch.float32), cond, ch)
        loss, parts = ts_loss(out, torch.as_tensor(y, dtype=torch.float32), LossWeights(close_crps=1.0))
        loss.backward()
        res = {"loss": loss.detach(), **{k: v.detach() for k, v in parts.items()},
               **{f: getattr(out, f).detach() for f in ("mu", "sigma", "q_high", "q_low", "hidden", "h_ts", "state")},
               **{f"grad.{n}": p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}}
        assert all(torch.isfinite(v).all() for v in res.values())
        return res

    ref = run(refill(b.x, b.channels, "nan", 1), refill(b.y, b.channels, "nan", 1))
    assert ref["grad.patch_embed.weight"].abs().sum() > 0
    if cfg.missing_embed:  # L_TS never reaches the missing embedding: it feeds the absent tokens' h_ts only
        assert not ref["grad.missing_embed"].any()
    for how in ("random", "big"):
        got = run(refill(b.x, b.channels, how, 1), refill(b.y, b.channels, how, 1))
        assert got.keys() == ref.keys()
        for k in ref:
            assert torch.equal(got[k], ref[k]), (how, k)
    x2 = b.x.copy()
    x2[0, CLOSE, -1] += 0.05  # an observed value of the close-only row
    moved = run(refill(x2, b.channels, "nan", 1), refill(b.y, b.channels, "nan", 1))
    assert not torch.equal(moved["mu"][0], ref["mu"][0]) and torch.equal(moved["mu"][4:], ref["mu"][4:])


def test_absent_tokens_are_no_keys_and_the_state_is_over_observed_ones():
    """Changing the missing embedding moves only the absent tokens' own h_ts: no observed token, no
    state and no head reads an absent token."""
    cfg = CONFIGS["ewma_missing_film"]
    w = mixed_windows(cfg.lookback, cfg.horizon)
    model = _encoder(cfg, w).eval()
    b = w.select(np.flatnonzero(w.ticker == "SYN02")[:3])
    x, ch = torch.as_tensor(refill(b.x, b.channels, "nan", 1), dtype=torch.float32), torch.as_tensor(b.channels)
    with torch.no_grad():
        a = model(x, channels=ch)
        model.missing_embed.add_(1.0)
        c = model(x, channels=ch)
    absent_tok = ~ch.repeat(1, cfg.n_patches)  # [B, K], token k = p * V + v
    for f in ("mu", "sigma", "q_high", "q_low", "state"):
        assert torch.equal(getattr(a, f), getattr(c, f)), f
    assert torch.equal(a.h_ts[~absent_tok], c.h_ts[~absent_tok])
    assert not torch.equal(a.h_ts[absent_tok], c.h_ts[absent_tok])


def test_a_full_row_gives_the_same_numbers_on_the_masked_path():
    """An OHLCV row next to close-only rows (the masked code path) forecasts as it does alone (within
    float rounding: its state is a sum / 5 instead of a mean)."""
    w = mixed_windows()
    model = _encoder(CFG, w).eval()
    full = np.flatnonzero(w.ticker == "SYN00")[:3]
    rows = np.r_[full, np.flatnonzero(w.ticker == "SYN02")[:3]]
    b = w.select(rows)
    with torch.no_grad():
        alone = model(torch.as_tensor(w.x[full]))
        mixed = model(torch.as_tensor(refill(b.x, b.channels, "nan", 1), dtype=torch.float32), channels=torch.as_tensor(b.channels))
    for f in ("mu", "sigma", "q_high", "q_low", "h_ts"):
        torch.testing.assert_close(getattr(mixed, f)[:3], getattr(alone, f), rtol=1e-5, atol=1e-6)


def test_uncertainty_skips_absent_channels():
    w = mixed_windows()
    model = _encoder(CFG, w).eval()
    b = w.select(np.r_[np.flatnonzero(w.ticker == "SYN02")[:2], np.flatnonzero(w.ticker == "SYN01")[:2]])
    with torch.no_grad():
        out = model(torch.as_tensor(b.x), channels=torch.as_tensor(b.channels))
    u = raw_uncertainty(out)
    sig2 = out.sigma.pow(2).sum(-1)  # [B, 3] over (O, C, V)
    torch.testing.assert_close(u[:2], sig2[:2, 1])  # close-only rows: the close alone
    torch.testing.assert_close(u[2:], sig2[2:].sum(1))


def test_decoder_and_its_loss_ignore_absent_values():
    """The action-conditioned decoder and DecoderLoss (L_TS + the control loss on counterfactual actions)
    give the same total and gradients whatever the absent channels hold."""
    cfg = replace(CFG, dropout=0.0)
    w = mixed_windows(cfg.lookback, cfg.horizon)
    th = ActionThresholds.fit(train_only(w))
    torch.manual_seed(0)
    dec = ActionConditionedDecoder(cfg, ActionEncoderConfig(cond_dim=8, emb_dim=4, hidden=16))
    dec.fit_input_stats(train_only(w))
    assert torch.isfinite(dec.encoder.x_loc).all() and torch.isfinite(dec.encoder.x_scale).all()
    b = w.select(np.r_[np.flatnonzero(w.ticker == "SYN02")[:4], np.flatnonzero(w.ticker == "SYN00")[:4]])
    teacher = featurize(actions_from_windows(b, th), b.last_close)
    loss_fn = DecoderLoss(DecoderRecipe(control_samples=4), th)

    def run(how: str) -> dict[str, torch.Tensor]:
        dec.zero_grad()
        res = loss_fn(dec, torch.as_tensor(refill(b.x, b.channels, how, 1), dtype=torch.float32),
                      torch.as_tensor(refill(b.y, b.channels, how, 1), dtype=torch.float32), teacher,
                      torch.Generator().manual_seed(3), channels=torch.as_tensor(b.channels))
        res.total.backward()
        out = {"total": res.total.detach(), "control": res.control.detach(), "mu": res.out.mu.detach(),
               **{n: p.grad.clone() for n, p in dec.named_parameters() if p.grad is not None}}
        assert all(torch.isfinite(v).all() for v in out.values())
        return out

    ref = run("nan")
    for how in ("random", "big"):
        got = run(how)
        assert all(torch.equal(got[k], ref[k]) for k in ref), how
    fc = dec.forecast(b, n_samples=8, generator=torch.Generator().manual_seed(0))
    close_only = b.ticker == "SYN02"
    for name in ("high", "low", "volume"):
        a = getattr(fc, name)
        assert np.isnan(a[close_only]).all() and np.isfinite(a[~close_only]).all(), name


def test_forecast_and_metrics_never_score_an_absent_channel():
    """Forecasts of close-only rows have NaN high/low/volume; the metrics of a mixed set do not change
    with what the absent channels hold (truth or forecast), and their high/low/volume metrics are those
    of the OHLCV rows alone."""
    w = mixed_windows()
    model = _encoder(replace(CFG, dropout=0.0), w)
    test = w.split_of("test")
    fc = forecast_windows(model, test, n_samples=32, seed=0)
    close_only = test.ticker == "SYN02"
    assert np.isnan(fc.volume[close_only]).all() and np.isfinite(fc.volume[~close_only]).all()
    assert np.isfinite(fc.close_samples).all()
    ref = forecast_metrics(fc, test)
    assert all(np.isfinite(v) for v in ref.values())
    other = replace(fc, **{k: refill(getattr(fc, k)[:, :, None].repeat(5, 2), test.channels, "random", 2)[:, :, c]
                           for k, c in (("high", HIGH), ("low", LOW), ("volume", VOLUME))})
    w2 = Windows(test.ticker, test.date, test.x, test.y, test.hist, refill(test.future, test.channels, "big", 2),
                 test.split, test.context, test.channels)
    assert forecast_metrics(other, w2) == ref
    full = np.flatnonzero(~close_only)
    sub = forecast_metrics(replace(fc, **{k: getattr(fc, k)[full] for k in ("close", "close_samples", "high", "low",
                                                                           "volume", "uncertainty")}), test.select(full))
    for k in ("vol_mape", "vol_rmse", "cov_high95", "cov_low05", "pinball_high95", "pinball_low05", "pinball"):
        assert ref[k] == pytest.approx(sub[k], rel=1e-12), k
    assert ref["crps"] != pytest.approx(sub["crps"])  # the close is scored on every row


def test_input_stats_are_over_observed_values_only():
    w = mixed_windows()
    train = train_only(w)
    loc, scale = input_stats(train)
    full = train.x[train.ticker != "SYN02"].astype(np.float64)
    np.testing.assert_allclose(loc[VOLUME].item(), full[:, VOLUME].mean(), rtol=1e-5)
    np.testing.assert_allclose(loc[CLOSE].item(), train.x[:, CLOSE].astype(np.float64).mean(), rtol=1e-5)
    dm = WindowDataModule.from_windows(w, batch_size=8)
    batch = next(iter(dm.train_dataloader()))
    assert batch["channels"].dtype == torch.bool and batch["channels"].shape == (8, 5)


def test_the_release_encoder_is_unchanged_on_full_data():
    """release/tiny/ts loads strictly (no new parameter), gives bit-identical outputs with channels=None and
    all-True channels, and reproduces the outputs the code before the mask gave (fixture from commit
    3045d87, same weights: tests/fixtures/ts_release_reference.npz)."""
    ref = np.load(ROOT / "tests/fixtures/ts_release_reference.npz")
    meta = json.loads((ROOT / "release/tiny/ts/config.json").read_text())
    assert meta["sha256"] == str(ref["weights_sha256"]), \
        "release/tiny/ts was replaced: this reference pins the pre-mask release; regenerate or drop it"
    assert "missing_embed" not in meta["encoder"]
    fc = Forecaster.from_pretrained(ROOT / "release/tiny/ts")
    weights = load_file(ROOT / "release/tiny/ts/model.safetensors")
    assert set(fc.encoder.state_dict()) == {k.removeprefix("model.") for k in weights if k.startswith("model.")}
    w = sample_windows().split_of("test").select(ref["idx"])
    x = torch.as_tensor(w.x)
    with torch.no_grad():
        a = fc.encoder.eval()(x)
        b = fc.encoder(x, channels=torch.ones(len(w), 5, dtype=torch.bool))
    for f in ("mu", "sigma", "q_high", "q_low", "state", "h_ts"):
        assert torch.equal(getattr(a, f), getattr(b, f)), f
    for f in ("mu", "sigma", "q_high", "q_low", "state"):
        np.testing.assert_allclose(getattr(a, f).numpy(), ref[f], rtol=1e-5, atol=1e-7, err_msg=f)
    np.testing.assert_allclose(a.h_ts[:, -5:].numpy(), ref["h_ts_last"], rtol=1e-5, atol=1e-6)
    assert TSEncoderConfig.from_any(meta["encoder"]).to_dict() == meta["encoder"]  # saved configs stay byte-identical


def test_forecast_cli_on_a_date_and_close_csv(tmp_path, capsys):
    """`stockr1 forecast` on a CSV with only Date and Close: close quantiles, NaN volume/high/low."""
    from forecast_action.forecast_cli import main
    from tests.test_forecaster import random_walk

    random_walk(150, seed=2)[["Date", "Close"]].to_csv(tmp_path / "c.csv", index=False)
    assert main(["--checkpoint", str(ROOT / "release/tiny/ts"), "--data", str(tmp_path / "c.csv"),
                 "--out", str(tmp_path / "f.csv")]) == 0
    assert "has no open/high/low/volume: masked" in capsys.readouterr().err
    out = pd.read_csv(tmp_path / "f.csv")
    assert len(out) == 10 and (out["q0.95"] > out["q0.05"]).all() and out["mean"].notna().all()
    assert out[["volume", "high_q0.95", "low_q0.05"]].isna().all().all()
    assert out["uncertainty"].between(0, 1).all()


def test_channels_are_in_channel_order():
    assert CHANNELS[CLOSE] == "close" and [CHANNELS[c] for c in ABSENT] == ["open", "high", "low", "volume"]


def test_qa_skips_templates_that_need_an_absent_channel():
    """Volume questions are asked of the OHLCV series only, never of the close-only one."""
    from llm.qa.core import decision_at
    from llm.qa.families import templates_for
    from llm.qa.generator import QAConfig, generate_qa

    w = mixed_windows(lookback=30, horizon=10)
    spike = next(t for t in templates_for("event") if t.key == "ev_volume_spike")
    i_close, i_full = int(np.flatnonzero(w.ticker == "SYN02")[0]), int(np.flatnonzero(w.ticker == "SYN00")[0])
    assert decision_at(w, i_close).channels == ("close",) and not spike.usable(decision_at(w, i_close))
    assert decision_at(w, i_full).channels == CHANNELS and spike.usable(decision_at(w, i_full))
    items, _ = generate_qa(w, QAConfig(n_train=300, n_val=0, n_test=0, families=("event",)))
    spikes = [it for it in items if it.template == "ev_volume_spike"]
    assert spikes and {it.ticker for it in spikes} <= {"SYN00", "SYN01"}
    assert any(it.ticker == "SYN02" for it in items)  # the close-only series still gets its other questions


def test_ts_module_and_decoder_module_train_on_a_mixed_universe(tmp_path):
    """Lightning training of the encoder (validation metrics, uncertainty normaliser, checkpoint round trip)
    and of the action decoder on windows where a third of the rows are close-only: finite losses, weights
    that move, a checkpoint that reloads with its missing embedding."""
    import lightning as L

    from forecast_action.module import ActionDecoderModule
    from ts_encoder.module import TSForecastModule

    w = mixed_windows()
    enc = {**CFG.to_dict(), "missing_embed": True}
    for make in (lambda: TSForecastModule(encoder=enc, lr=1e-3, warmup_steps=1, fan_chart_windows=0, val_samples=8),
                 lambda: ActionDecoderModule(encoder=enc, action={"cond_dim": 8, "emb_dim": 4, "hidden": 16},
                                             warmup_steps=1, val_samples=8, recipe={"control_samples": 4})):
        torch.manual_seed(0)
        module = make()
        init = {k: v.clone() for k, v in module.state_dict().items()}
        dm = WindowDataModule.from_windows(w, batch_size=32, eval_batch_size=64)
        trainer = L.Trainer(default_root_dir=tmp_path, accelerator="cpu", devices=1, max_steps=3, limit_val_batches=2,
                            val_check_interval=3, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                            enable_model_summary=False)
        trainer.fit(module, dm)
        logged = {k: float(v) for k, v in trainer.callback_metrics.items()}
        assert logged and all(np.isfinite(v) for v in logged.values()), logged
        assert not torch.equal(module.state_dict()["model.head_mu.weight"], init["model.head_mu.weight"])
        assert bool(module.normalizer.fitted) and torch.isfinite(module.model.x_loc).all()
        trainer.save_checkpoint(tmp_path / "m.ckpt")
        again = type(module).load_from_checkpoint(tmp_path / "m.ckpt", map_location="cpu")
        assert again.model.missing_embed is not None and again.cfg.missing_embed


def test_baselines_forecast_close_only_series():
    """Every baseline family on a mixed set: NaN high/low/volume exactly on the close-only rows, finite
    metrics; the neural baseline's fit and forecast do not depend on what the absent channels hold."""
    from benchmarks.baselines import BASELINES

    w = mixed_windows()
    train, val, test = train_only(w), w.split_of("val"), w.split_of("test")
    close_only = test.ticker == "SYN02"
    for name in ("random_walk", "drift", "ewma", "garch11", "dlinear"):
        model = BASELINES[name](max_epochs=2) if name == "dlinear" else BASELINES[name]()
        fc = model.fit(train, val).predict(test, n_samples=16, seed=0)
        for f in ("high", "low", "volume"):
            a = getattr(fc, f)
            assert np.isnan(a[close_only]).all() and np.isfinite(a[~close_only]).all(), (name, f)
        assert all(np.isfinite(v) for v in forecast_metrics(fc, test).values()), name

    def dlinear(how: str) -> np.ndarray:
        def fill(x: Windows) -> Windows:
            return replace(x, x=refill(x.x, x.channels, how, 1).astype(np.float32),
                           y=refill(x.y, x.channels, how, 1).astype(np.float32))
        model = BASELINES["dlinear"](max_epochs=2).fit(fill(train), fill(val))
        return model.predict(fill(test), n_samples=16, seed=0).close_samples

    np.testing.assert_array_equal(dlinear("nan"), dlinear("big"))


def test_masked_loss_parts_are_averages_over_the_observing_rows():
    """By hand: each part is its channel's loss averaged over the rows that have the channel, so the
    volume / high / low parts of a mixed batch equal those of its OHLCV rows alone, the close's that of
    every row; a batch without any OHLCV row has 0 there."""
    from ts_encoder.model import TSOutput

    g = torch.Generator().manual_seed(0)
    b, s = 4, 3
    out = TSOutput(mu=torch.randn(b, 3, s, generator=g) * 0.01, sigma=torch.rand(b, 3, s, generator=g) + 0.5,
                   q_high=torch.randn(b, s, generator=g), q_low=torch.randn(b, s, generator=g),
                   hidden=torch.zeros(b, 1, 1), h_ts=torch.zeros(b, 1, 1), state=torch.zeros(b, 1))
    y = torch.randn(b, 5, s, generator=g) * 0.01
    ch = torch.tensor([[True] * 5, [True] * 5, [False, False, False, True, False], [False, False, False, True, False]])
    y_masked = torch.where(ch[:, :, None], y, torch.nan)
    _, parts = ts_loss(replace(out, channels=ch), y_masked)
    _, full = ts_loss(TSOutput(**{k: getattr(out, k)[:2] for k in ("mu", "sigma", "q_high", "q_low", "hidden", "h_ts", "state")}), y[:2])
    _, every = ts_loss(out, y)
    for k in ("nll_open", "nll_volume", "pinball_high", "pinball_low"):
        torch.testing.assert_close(parts[k], full[k])
    torch.testing.assert_close(parts["nll_close"], every["nll_close"])
    _, none = ts_loss(replace(out, channels=ch[2:].repeat(2, 1)), y_masked[2:].repeat(2, 1, 1))
    assert none["nll_volume"] == 0 and none["pinball_high"] == 0


def test_close_uncertainty_compares_close_only_and_ohlcv_rows_on_one_scale():
    """``uncertainty: close`` sums the close σ² alone, on every row. Under the default ``ocv`` a close-only
    row's U is its close σ² while an OHLCV row's is dominated by its volume σ², so one normaliser would
    call every stock confident; the forecasts read the choice from the encoder's config."""
    from ts_encoder.uncertainty import UncertaintyNormalizer

    w = mixed_windows()
    w = w.select(np.concatenate([np.flatnonzero(w.ticker == "SYN02")[:30], np.flatnonzero(w.ticker != "SYN02")[:30]]))
    cfg = replace(CFG, dropout=0.0, uncertainty="close")
    assert cfg.u_channels == (1,) and CFG.u_channels == (0, 1, 2)
    assert "uncertainty" not in CFG.to_dict() and TSEncoderConfig.from_any(cfg.to_dict()) == cfg
    model = _encoder(cfg, w).eval()
    with torch.no_grad():
        out = model(torch.as_tensor(w.x), channels=torch.as_tensor(w.channels))
    u = raw_uncertainty(out, cfg.u_channels)
    torch.testing.assert_close(u, out.sigma[:, 1].pow(2).sum(-1))  # the close row of σ, on every row
    ocv = raw_uncertainty(out)
    close_only = torch.as_tensor(~w.channels[:, VOLUME])
    assert close_only.any() and (~close_only).any()
    torch.testing.assert_close(ocv[close_only], u[close_only])
    assert (ocv[~close_only] > 10 * u[~close_only]).all()  # not one scale under ocv
    norm = UncertaintyNormalizer().fit(u.double())
    fc = forecast_windows(model, w, n_samples=4, normalizer=norm)
    np.testing.assert_allclose(fc.uncertainty, norm(u).double().numpy())
