"""Training the conditioned decoder end to end on tiny synthetic data, and the action benchmark on it."""

import json

import numpy as np
import pytest
import torch

from benchmarks.action import main as bench_main
from forecast_action.decoder import ActionConditionedDecoder
from forecast_action.derive import ActionThresholds
from forecast_action.encoder import featurize
from forecast_action.forecaster import Forecaster
from forecast_action.module import ActionDecoderModule, load_encoder_state
from forecast_action.schema import FIELD_SPECS, ForecastAction
from forecast_action.train import ActionTrainConfig, train
from stockr1.data import synthetic_windows
from stockr1.types import train_only
from ts_encoder.config import TSEncoderConfig
from ts_encoder.model import TSEncoder

MODEL = {"lookback": 90, "horizon": 10, "d_model": 16, "n_layers": 1, "n_heads": 2, "ffn_dim": 32, "d_llm": 8,
         "dropout": 0.0}
RAW = {"data": {"source": "synthetic", "max_train": 96}, "model": MODEL,
       "action": {"cond_dim": 8, "emb_dim": 4, "hidden": 16},
       "train": {"lr": 3e-3, "batch_size": 32, "max_epochs": 2, "seed": 0}}
CFG = ActionTrainConfig.from_dict(RAW)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("action_ckpt")
    torch.manual_seed(0)
    before = ActionDecoderModule(encoder=MODEL, action=RAW["action"]).decoder.action_encoder.mlp[0].weight.clone()
    module = train(CFG, out)
    return out, module, before


def test_training_moves_the_action_path_and_reloads(trained) -> None:
    out, module, before = trained
    assert not torch.allclose(module.decoder.action_encoder.mlp[0].weight, before)
    assert module.decoder.encoder.film.net[-1].weight.abs().sum() > 0  # FiLM left its identity init
    assert bool(module.decoder.normalizer.fitted)
    saved = ActionConditionedDecoder.from_pretrained(out / "decoder")  # the artefact: thresholds inside
    # fitted on the whole train split (before max_train subsampling), never val/test
    assert saved.thresholds == module.thresholds == ActionThresholds.fit(train_only(synthetic_windows()))
    assert sorted(p.name for p in out.iterdir()) == ["best.ckpt", "decoder", "last.ckpt", "logs"]
    assert sorted(p.name for p in (out / "decoder").iterdir()) == ["config.json", "model.safetensors"]
    again = ActionDecoderModule.load_from_checkpoint(out / "best.ckpt", map_location="cpu")
    w = synthetic_windows().split_of("test").select(np.arange(4))
    acts = [ForecastAction(direction="up"), None, ForecastAction(volatility_level="high"), ForecastAction()]
    f1 = module.decoder.forecast(w, acts, n_samples=5, generator=torch.Generator().manual_seed(0))
    f2 = again.forecast(w, n_samples=5, seed=0, actions=acts)  # the TSForecastModule signature + actions
    np.testing.assert_allclose(f1.close_samples, f2.close_samples)
    assert np.all(np.isfinite(f1.uncertainty)) and np.all((f1.uncertainty >= 0) & (f1.uncertainty <= 1))


def test_sft_loads_the_saved_decoder_and_an_exported_older_checkpoint(trained, tmp_path) -> None:
    from forecast_action.build import load_decoder
    from forecast_action.train import main

    out, module, _ = trained
    w = synthetic_windows().split_of("test").select(np.arange(3))
    acts = [ForecastAction(direction="down"), None, ForecastAction()]
    f1 = module.decoder.forecast(w, acts, n_samples=4, generator=torch.Generator().manual_seed(1))
    # an older run's Lightning decoder.ckpt converts to the saved form without training
    assert main(["--export", str(out / "best.ckpt"), "--out", str(tmp_path), "--threads", "1"]) == 0
    for path in (out / "decoder", tmp_path / "decoder", out / "best.ckpt"):
        dec = load_decoder(path)
        f2 = dec.forecast(w, acts, n_samples=4, generator=torch.Generator().manual_seed(1))
        np.testing.assert_allclose(f1.close_samples, f2.close_samples)
        assert dec.thresholds == module.thresholds
    with pytest.raises(ValueError, match="cannot load a decoder"):
        load_decoder(out / "missing.ckpt")


@pytest.mark.parametrize("raw, message", [
    ({**RAW, "trian": {}}, r"unknown decoder config keys \['trian'\].*did you mean 'train'"),
    ({**RAW, "train": {"lrr": 1e-3}}, r"decoder config.train keys \['lrr'\].*did you mean 'lr'"),
    ({**RAW, "data": {"sourc": "sample"}}, r"decoder config.data keys \['sourc'\].*did you mean 'source'"),
    ({**RAW, "train": {"lr": -1.0}}, r"train.lr=-1.0"),
    ({**RAW, "train": {"lr": "fast"}}, r"'lr' must be a number"),
    ({**RAW, "data": {"horizon": 120, "lookback": 90}}, r"data.horizon=120 is longer than the window"),
    ({**RAW, "data": {"horizon": 5}}, r"data.lookback/horizon 90/5 differ from model"),
    ({**RAW, "model": {**MODEL, "d_modle": 16}}, r"decoder config.model keys \['d_modle'\]"),
])
def test_config_typos_and_bad_values_fail_at_load_naming_the_key(raw, message) -> None:
    with pytest.raises(ValueError, match=message):
        ActionTrainConfig.from_dict(raw)


def test_init_from_pretrained_encoder(tmp_path) -> None:
    torch.manual_seed(0)
    enc = TSEncoder(TSEncoderConfig(**MODEL))  # an unconditioned (cond_dim=0) pretrained encoder
    Forecaster(enc).save_pretrained(tmp_path / "pretrained")  # what `stockr1 ts fit` exports
    enc_state, act_state = load_encoder_state(tmp_path / "pretrained")
    assert set(enc_state) == set(enc.state_dict()) and act_state == {}
    m = ActionDecoderModule(encoder=MODEL, action=RAW["action"], init_encoder=str(tmp_path / "pretrained"))
    assert torch.equal(m.decoder.encoder.head_mu.weight, enc.head_mu.weight)
    assert m.hparams.pretrained_from == str(tmp_path / "pretrained") and m.hparams.init_encoder is None
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "config.json").write_text('{"format": "stockr1.policy"}')
    with pytest.raises(ValueError, match="neither a saved TS encoder"):
        load_encoder_state(tmp_path / "other")


def test_action_scope_freezes_the_trunk_and_continues_from_a_decoder(trained) -> None:
    out, module, _ = trained
    m = ActionDecoderModule(encoder=MODEL, action=RAW["action"], init_encoder=str(out / "decoder"),
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
    rc = bench_main(["--checkpoint", str(out / "decoder"), "--out", str(tmp_path), "--data", "synthetic",
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
    assert f"`stockr1 bench action --checkpoint {out / 'decoder'} --out {tmp_path}" in readme
    assert f"{m['unconditioned']['crps']:.4f}" in readme and "at commit `" in readme
    for f in ("direction", "volatility_level"):  # the realised distribution of g(decoded) per requested value
        row = m[f"control/{f}"]
        for v in (*FIELD_SPECS[f].values, "none"):
            assert sum(row[f"dist_{v}"]) == pytest.approx(1.0)
        for i, v in enumerate(FIELD_SPECS[f].values):  # the match share is the requested value's own entry
            assert row[f"dist_{v}"][i] == pytest.approx(row[v])
    assert (tmp_path / "control_distribution.png").exists()
    with pytest.raises(FileExistsError, match="already holds results"):  # a second run is refused
        bench_main(["--checkpoint", str(out / "decoder"), "--out", str(tmp_path)])


def test_benchmark_puts_a_baseline_decoder_beside(trained, tmp_path) -> None:
    """--baseline: the same decoder as its own baseline gives the same numbers in both columns."""
    out, _, _ = trained
    dec = str(out / "decoder")
    assert bench_main(["--checkpoint", dec, "--baseline", dec, "--out", str(tmp_path), "--data", "synthetic",
                       "--max-windows", "6", "--n-samples", "4", "--fields", "direction", "--threads", "1"]) == 0
    m = json.loads((tmp_path / "metrics.json").read_text())
    assert m["baseline/control/direction"] == m["control/direction"]
    assert m["baseline/oracle_full"] == m["oracle_full"] and m["meta"]["baseline"] == dec
    table = (tmp_path / "table.md").read_text()
    assert "| baseline | oracle_full |" in table and ", was " in table
