"""ActionConditionedDecoder persistence: save/load round trip, old files, corrupt files, Lightning checkpoints."""

from __future__ import annotations

import dataclasses
import json
import shutil

import lightning
import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from forecast_action.build import load_decoder, save_decoder
from forecast_action.decoder import FORMAT_VERSION, LEGACY_FILE_VERSION, ActionConditionedDecoder
from forecast_action.encoder import ActionEncoderConfig
from forecast_action.module import ActionDecoderModule
from forecast_action.schema import ForecastAction
from stockr1.data import synthetic_windows
from ts_encoder.config import TSEncoderConfig

MODEL = {"lookback": 90, "horizon": 10, "d_model": 16, "n_layers": 1, "n_heads": 2, "ffn_dim": 32, "d_llm": 8,
         "dropout": 0.0}
ACT = {"cond_dim": 8, "emb_dim": 4, "hidden": 16}
ACTIONS = [ForecastAction(direction="up"), None, ForecastAction(volatility_level="high", end_change_pct=3.0)]


@pytest.fixture(scope="module")
def windows():
    return synthetic_windows(n_tickers=1, n_days=200).split_of("test").select(np.arange(3))


def perturbed(dec: ActionConditionedDecoder, windows) -> ActionConditionedDecoder:
    """Move every part a save must carry away from its init: weights, zero-init action head, input
    stats, fitted normaliser - so a loader that dropped any of them would forecast differently."""
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in dec.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=g))
    x = torch.as_tensor(windows.x)
    dec.encoder.set_input_stats(x.mean((0, 2)), x.std((0, 2)) + 0.5)
    dec.normalizer.fit(torch.linspace(0.1, 2.0, 50))
    return dec


def tiny_decoder(windows) -> ActionConditionedDecoder:
    torch.manual_seed(0)
    return perturbed(ActionConditionedDecoder(TSEncoderConfig(**MODEL), ActionEncoderConfig(**ACT)), windows)


def samples(dec: ActionConditionedDecoder, windows) -> np.ndarray:
    f = dec.forecast(windows, ACTIONS, n_samples=6, generator=torch.Generator().manual_seed(3))
    return np.concatenate([f.close_samples.reshape(len(windows), -1), f.uncertainty[:, None]], axis=1)


def legacy_file(dec: ActionConditionedDecoder, path, **over) -> None:
    """A single-file decoder of the earlier releases (format version 2), written the way they wrote it."""
    torch.save({"format": "stockr1.action_decoder", "version": LEGACY_FILE_VERSION,
                "ts_cfg": dataclasses.asdict(dec.ts_cfg), "act_cfg": dataclasses.asdict(dec.act_cfg),
                "tool_samples": dec.tool_samples, "state_dict": dec.state_dict(), **over}, path)


def test_round_trip_gives_equal_forecasts(windows, tmp_path) -> None:
    dec = tiny_decoder(windows)
    dec.train()
    dec.save_pretrained(tmp_path / "d")
    meta = json.loads((tmp_path / "d" / "config.json").read_text())
    assert meta["version"] == FORMAT_VERSION and meta["ts_cfg"]["cond_dim"] == ACT["cond_dim"]
    assert meta["uncertainty_fitted"] and len(meta["sha256"]) == 64
    assert set(load_file(str(tmp_path / "d" / "model.safetensors"))) == set(dec.state_dict())  # no pickles
    again = ActionConditionedDecoder.from_pretrained(tmp_path / "d")
    assert not again.training and again.ts_cfg == dec.ts_cfg and again.act_cfg == dec.act_cfg
    a, b = samples(dec, windows), samples(again, windows)
    np.testing.assert_array_equal(a, b)
    # the stored action path is live: "up" and no action forecast differently from the same weights
    up = again.forecast(windows.select([0]), [ACTIONS[0]], 4, torch.Generator().manual_seed(0)).close
    none = again.forecast(windows.select([0]), [None], 4, torch.Generator().manual_seed(0)).close
    assert not np.allclose(up, none)
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["config.json", "model.safetensors"]  # no temp files


def test_sft_helpers_delegate_and_read_the_earlier_single_files(windows, tmp_path) -> None:
    dec = tiny_decoder(windows)
    save_decoder(dec, tmp_path / "new")
    np.testing.assert_array_equal(samples(load_decoder(tmp_path / "new"), windows), samples(dec, windows))
    legacy_file(dec, tmp_path / "v2.pt")
    np.testing.assert_array_equal(samples(load_decoder(tmp_path / "v2.pt"), windows), samples(dec, windows))
    # exactly what forecast_action.build.save_decoder wrote before the format had a version
    torch.save({"ts_cfg": dataclasses.asdict(dec.ts_cfg), "act_cfg": dataclasses.asdict(dec.act_cfg),
                "state_dict": dec.state_dict()}, tmp_path / "old.pt")
    np.testing.assert_array_equal(samples(load_decoder(tmp_path / "old.pt"), windows), samples(dec, windows))


def _edit_config(d, **over) -> None:
    meta = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**meta, **over}))


def test_corrupt_or_incompatible_directories_raise_naming_the_file(windows, tmp_path) -> None:
    dec = tiny_decoder(windows)
    ts, act = dataclasses.asdict(dec.ts_cfg), dataclasses.asdict(dec.act_cfg)
    good = dec.save_pretrained(tmp_path / "good")
    cases = {
        "truncated": (lambda d: (d / "model.safetensors").write_bytes((good / "model.safetensors").read_bytes()[:500]),
                      "corrupt: its SHA-256"),
        "config_garbage": (lambda d: (d / "config.json").write_text("{not json"), "cannot read"),
        "wide": (lambda d: _edit_config(d, ts_cfg={**ts, "d_model": 32}), r"do not fit the config: .*\(16,\).*\(32,\)"),
        "cond": (lambda d: _edit_config(d, ts_cfg={**ts, "cond_dim": 4}), "cond_dim"),
        "unknown_field": (lambda d: _edit_config(d, ts_cfg={**ts, "n_experts": 4}), "invalid config"),
        "future": (lambda d: _edit_config(d, version=FORMAT_VERSION + 1), "version"),
        "other_format": (lambda d: _edit_config(d, format="stockr1.forecaster"), "format"),
        "no_action_cfg": (lambda d: _edit_config(d, act_cfg={**act, "hidden": 8}), "action_encoder"),
    }
    for name, (spoil, why) in cases.items():
        d = tmp_path / name
        shutil.copytree(good, d)
        spoil(d)
        for load in (ActionConditionedDecoder.load, load_decoder):
            with pytest.raises(ValueError, match=why) as e:
                load(d)
            assert str(d) in str(e.value), name
    with pytest.raises(FileNotFoundError, match="missing"):
        load_decoder(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no config.json"):
        load_decoder(tmp_path / "empty")


def corrupt_variants(dec: ActionConditionedDecoder, good: bytes) -> dict[str, tuple[object, str]]:
    ts, act, sd = dataclasses.asdict(dec.ts_cfg), dataclasses.asdict(dec.act_cfg), dec.state_dict()
    return {
        "truncated.pt": (good[: len(good) // 2], "cannot load a decoder"),
        "garbage.pt": (b"not a torch file", "cannot load a decoder"),
        "wide.pt": ({"ts_cfg": {**ts, "d_model": 32}, "act_cfg": act, "state_dict": sd}, "do not match"),
        "cond.pt": ({"ts_cfg": {**ts, "cond_dim": 4}, "act_cfg": act, "state_dict": sd}, "cond_dim"),
        "unknown_field.pt": ({"ts_cfg": {**ts, "n_experts": 4}, "act_cfg": act, "state_dict": sd}, "invalid config"),
        "future.pt": ({"format": "stockr1.action_decoder", "version": LEGACY_FILE_VERSION + 1, "ts_cfg": ts,
                       "act_cfg": act, "state_dict": sd}, "version"),
        "other.pt": ({"model": sd}, "not an action-decoder file"),
        "missing_key.pt": ({"ts_cfg": ts, "act_cfg": act,
                            "state_dict": {k: v for k, v in sd.items() if "action_head" not in k}}, "action_head"),
    }


def test_corrupt_or_incompatible_single_files_raise_value_error_naming_the_file(windows, tmp_path) -> None:
    dec = tiny_decoder(windows)
    legacy_file(dec, tmp_path / "good.pt")
    for name, (content, why) in corrupt_variants(dec, (tmp_path / "good.pt").read_bytes()).items():
        path = tmp_path / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            torch.save(content, path)
        for load in (ActionConditionedDecoder.load, load_decoder):
            with pytest.raises(ValueError, match=why) as e:
                load(path)
            assert str(path) in str(e.value), name
    with pytest.raises(FileNotFoundError, match="missing.pt"):
        load_decoder(tmp_path / "missing.pt")


def lightning_ckpt(module: ActionDecoderModule, path) -> None:
    """The layout Lightning's ``trainer.save_checkpoint`` writes (the keys ``load_from_checkpoint`` reads)."""
    torch.save({"state_dict": module.state_dict(), "hyper_parameters": dict(module.hparams),
                "pytorch-lightning_version": lightning.__version__}, path)


def test_lightning_checkpoint_still_loads_and_resaves(windows, tmp_path) -> None:
    torch.manual_seed(0)
    module = ActionDecoderModule(encoder=MODEL, action=ACT)
    perturbed(module.decoder, windows)
    lightning_ckpt(module, tmp_path / "decoder.ckpt")
    dec = load_decoder(tmp_path / "decoder.ckpt")
    expected = samples(module.decoder, windows)
    np.testing.assert_array_equal(samples(dec, windows), expected)
    dec.save_pretrained(tmp_path / "decoder")  # the decoder inside the module (shared encoder) saves standalone
    np.testing.assert_array_equal(samples(ActionConditionedDecoder.load(tmp_path / "decoder"), windows), expected)
    with pytest.raises(ValueError, match="stockr1 decoder --export"):  # the plain loader says how to convert it
        ActionConditionedDecoder.load(tmp_path / "decoder.ckpt")
    (tmp_path / "bad.ckpt").write_bytes((tmp_path / "decoder.ckpt").read_bytes()[:100])
    with pytest.raises(ValueError, match="bad.ckpt"):
        load_decoder(tmp_path / "bad.ckpt")
