"""Training the conditioned decoder end to end on tiny synthetic data, and the action benchmark on it."""

import json

import numpy as np
import pytest
import torch

from benchmarks.action import main as bench_main
from forecast_action.derive import ActionThresholds
from forecast_action.encoder import featurize
from forecast_action.module import THRESHOLDS_FILE, ActionDecoderModule, load_encoder_state
from forecast_action.schema import ForecastAction
from forecast_action.train import ActionTrainConfig, train
from stockr1.data import synthetic_windows
from stockr1.types import train_only
from ts_encoder.config import TSEncoderConfig
from ts_encoder.model import TSEncoder

MODEL = {"lookback": 90, "horizon": 10, "d_model": 16, "n_layers": 1, "n_heads": 2, "ffn_dim": 32, "d_llm": 8,
         "dropout": 0.0}
CFG = ActionTrainConfig(data={"source": "synthetic", "max_train": 96}, model=MODEL,
                        action={"cond_dim": 8, "emb_dim": 4, "hidden": 16},
                        train={"lr": 3e-3, "batch_size": 32, "max_epochs": 2, "seed": 0})


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("action_ckpt")
    torch.manual_seed(0)
    before = ActionDecoderModule(encoder=MODEL, action=CFG.action).decoder.action_encoder.mlp[0].weight.clone()
    module = train(CFG, out)
    return out, module, before


def test_training_moves_the_action_path_and_reloads(trained) -> None:
    out, module, before = trained
    assert not torch.allclose(module.decoder.action_encoder.mlp[0].weight, before)
    assert module.decoder.encoder.film.net[-1].weight.abs().sum() > 0  # FiLM left its identity init
    assert bool(module.decoder.normalizer.fitted)
    th = ActionThresholds.load(out / THRESHOLDS_FILE)
    # fitted on the whole train split (before max_train subsampling), never val/test
    assert th == module.thresholds and th == ActionThresholds.fit(train_only(synthetic_windows()))
    again = ActionDecoderModule.load_from_checkpoint(out / "decoder.ckpt", map_location="cpu")
    w = synthetic_windows().split_of("test").select(np.arange(4))
    acts = [ForecastAction(direction="up"), None, ForecastAction(volatility_level="high"), ForecastAction()]
    f1 = module.decoder.forecast(w, acts, n_samples=5, generator=torch.Generator().manual_seed(0))
    f2 = again.forecast(w, n_samples=5, seed=0, actions=acts)  # the TSForecastModule signature + actions
    np.testing.assert_allclose(f1.close_samples, f2.close_samples)
    assert np.all(np.isfinite(f1.uncertainty)) and np.all((f1.uncertainty >= 0) & (f1.uncertainty <= 1))


def test_sft_loads_the_trainer_checkpoint_directly(trained) -> None:
    from llm.sft import load_decoder

    out, module, _ = trained
    dec = load_decoder(out / "decoder.ckpt")
    w = synthetic_windows().split_of("test").select(np.arange(3))
    acts = [ForecastAction(direction="down"), None, ForecastAction()]
    f1 = module.decoder.forecast(w, acts, n_samples=4, generator=torch.Generator().manual_seed(1))
    f2 = dec.forecast(w, acts, n_samples=4, generator=torch.Generator().manual_seed(1))
    np.testing.assert_allclose(f1.close_samples, f2.close_samples)
    with pytest.raises(ValueError, match="cannot load a decoder"):
        load_decoder(out / "missing.ckpt")


def test_init_from_pretrained_encoder(tmp_path) -> None:
    torch.manual_seed(0)
    enc = TSEncoder(TSEncoderConfig(**MODEL))  # an unconditioned (cond_dim=0) pretrained encoder
    torch.save({"state_dict": {f"model.{k}": v for k, v in enc.state_dict().items()}}, tmp_path / "ts.ckpt")
    enc_state, act_state = load_encoder_state(tmp_path / "ts.ckpt")
    assert set(enc_state) == set(enc.state_dict()) and act_state == {}
    m = ActionDecoderModule(encoder=MODEL, action=CFG.action, init_encoder=str(tmp_path / "ts.ckpt"))
    assert torch.equal(m.decoder.encoder.head_mu.weight, enc.head_mu.weight)
    assert m.hparams.pretrained_from == str(tmp_path / "ts.ckpt") and m.hparams.init_encoder is None


def test_action_scope_freezes_the_trunk_and_continues_from_a_decoder(trained) -> None:
    out, module, _ = trained
    m = ActionDecoderModule(encoder=MODEL, action=CFG.action, init_encoder=str(out / "decoder.ckpt"),
                            train_scope="action")
    assert torch.equal(m.decoder.action_encoder.mlp[0].weight, module.decoder.action_encoder.mlp[0].weight)
    assert torch.equal(m.model.film.net[-1].weight, module.model.film.net[-1].weight)
    trainable = {n.split(".")[0] for n, p in m.model.named_parameters() if p.requires_grad}
    assert trainable == {"film", "scale_embed", "head_mu", "head_sigma", "head_high", "head_low"}
    w = synthetic_windows().split_of("train").select(np.arange(8))
    x = torch.as_tensor(w.x)
    out_ = m.decoder(x, featurize([ForecastAction(direction="up")] * 8, w.last_close))
    out_.mu.sum().backward()
    assert m.model.blocks[0].attn.qkv.weight.grad is None  # no gradient reaches the trunk
    assert m.decoder.action_encoder.mlp[0].weight.grad is not None


def test_benchmark_writes_oracle_and_controllability(trained, tmp_path) -> None:
    out, _, _ = trained
    rc = bench_main(["--checkpoint", str(out / "decoder.ckpt"), "--out", str(tmp_path), "--data", "synthetic",
                     "--max-windows", "12", "--n-samples", "8", "--fields", "direction,volatility_level",
                     "--threads", "1"])
    assert rc == 0
    m = json.loads((tmp_path / "metrics.json").read_text())
    assert {"unconditioned", "oracle_full", "oracle_discrete", "oracle_direction"} <= set(m)
    assert 0 <= m["control/direction"]["up"] <= 1 and "base_up" in m["control/direction"]
    assert m["meta"]["n_windows"] == 12
    assert m["oracle_full"]["crps_reduction"] == pytest.approx(
        1 - m["oracle_full"]["crps"] / m["unconditioned"]["crps"])
    assert "Oracle gain" in (tmp_path / "table.md").read_text() and (tmp_path / "controllability.png").exists()
    readme = (tmp_path / "README.md").read_text()  # generated from these numbers, naming the command
    assert f"`stockr1 bench action --checkpoint {out / 'decoder.ckpt'} --out {tmp_path}" in readme
    assert f"{m['unconditioned']['crps']:.4f}" in readme and "at commit `" in readme
    with pytest.raises(FileExistsError, match="already holds results"):  # a second run is refused
        bench_main(["--checkpoint", str(out / "decoder.ckpt"), "--out", str(tmp_path)])
