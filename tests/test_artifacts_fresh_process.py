"""Every model artefact loads with ``from_pretrained`` in a fresh process, from safetensors + JSON only,
and gives the same outputs as the object that saved it: the TS encoder, the decoder (with its
thresholds), a full fine-tune policy and a LoRA policy. Loading into a config of another shape is an
error naming the tensor that disagrees."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from forecast_action.decoder import ActionConditionedDecoder
from forecast_action.derive import QUANTILE_FEATURES, ActionThresholds
from forecast_action.encoder import ActionEncoderConfig
from forecast_action.forecaster import Forecaster
from llm.policy import Policy
from ts_encoder.config import TSEncoderConfig
from ts_encoder.model import TSEncoder

TS = TSEncoderConfig(lookback=30, horizon=5, patch_len=5, d_model=16, n_layers=1, n_heads=2, ffn_dim=32, d_llm=8)

LOAD = """
import json, sys, torch
from pathlib import Path
from forecast_action.decoder import ActionConditionedDecoder
from forecast_action.forecaster import Forecaster
from llm.policy import Policy
root = Path(sys.argv[1]); x = torch.load(root / "x.pt")
dec = ActionConditionedDecoder.from_pretrained(root / "decoder")
enc = Forecaster.from_pretrained(root / "forecaster").encoder
pol = Policy.from_pretrained(root / "policy")
lora = Policy.from_pretrained(root / "lora")
ids = torch.tensor([[1, 2, 3, 4]])
out = {"decoder_mu": dec(x, dec.no_action(torch.ones(2).numpy())).mu.tolist(), "thresholds": dec.thresholds.to_dict(),
       "lora_logits": lora.model(input_ids=ids).logits[0, -1, :5].tolist(), "lora_is_lora": lora.is_lora,
       "encoder_h": enc(x).h_ts.tolist(), "policy_logits": pol.model(input_ids=ids).logits[0, -1, :5].tolist(),
       "projector": pol.projector(torch.ones(1, 8)).tolist(), "modules": sorted(m for m in sys.modules if m in
       ("lightning", "lightning.pytorch", "lightning.fabric"))}
print(json.dumps(out))
"""


def _perturbed(pol: Policy) -> Policy:
    """Trainable weights off their init (LoRA's B starts at zero), so a dropped tensor would show."""
    with torch.no_grad():
        for p in pol.trainable_parameters():
            p.add_(0.1 * torch.randn_like(p))
    return pol


def test_every_artefact_loads_in_a_fresh_process(tmp_path: Path, tiny_policy) -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 5, 30)
    torch.save(x, tmp_path / "x.pt")
    th = ActionThresholds(cuts={f: (-0.01 * i, 0.01 * i) for i, f in enumerate(QUANTILE_FEATURES, 1)})
    dec = ActionConditionedDecoder(TS, ActionEncoderConfig(cond_dim=8, emb_dim=4, hidden=16), thresholds=th).eval()
    with torch.no_grad():
        for p in dec.parameters():
            p.add_(0.1 * torch.randn_like(p))  # off the zero init, so a dropped tensor would show
    dec.save_pretrained(tmp_path / "decoder")
    enc = TSEncoder(TS).eval()
    Forecaster(enc).save_pretrained(tmp_path / "forecaster")
    pol = _perturbed(tiny_policy()).eval()
    pol.save_pretrained(tmp_path / "policy")
    assert (tmp_path / "policy" / "projector.safetensors").is_file()
    lora = _perturbed(tiny_policy(lora_r=4, lora_dropout=0.0)).eval()
    assert lora.is_lora
    lora.save_pretrained(tmp_path / "lora")
    assert (tmp_path / "lora" / "adapter" / "adapter_model.safetensors").is_file() and not (tmp_path / "lora" / "model").exists()
    assert not list(tmp_path.rglob("*.pt"))[1:]  # only x.pt: no pickled weights anywhere

    res = subprocess.run([sys.executable, "-c", LOAD, str(tmp_path)], capture_output=True, text=True, check=True,
                         env={"HF_HUB_OFFLINE": "1", "PATH": ""}, cwd=Path(__file__).parents[1])
    got = json.loads(res.stdout.strip().splitlines()[-1])
    with torch.no_grad():
        np.testing.assert_allclose(got["decoder_mu"], dec(x, dec.no_action(np.ones(2))).mu.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got["encoder_h"], enc(x).h_ts.numpy(), rtol=1e-5, atol=1e-6)
        logits = pol.model(input_ids=torch.tensor([[1, 2, 3, 4]])).logits[0, -1, :5]
        np.testing.assert_allclose(got["policy_logits"], logits.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got["projector"], pol.projector(torch.ones(1, 8)).numpy(), rtol=1e-5, atol=1e-6)
        lora_logits = lora.model(input_ids=torch.tensor([[1, 2, 3, 4]])).logits[0, -1, :5]
        np.testing.assert_allclose(got["lora_logits"], lora_logits.numpy(), rtol=1e-5, atol=1e-6)
    assert got["lora_is_lora"] and ActionThresholds.from_dict(got["thresholds"]) == th
    assert got["modules"] == []  # loading needs no Lightning (resume state), only the artefacts


def test_a_policy_loaded_into_a_config_of_another_shape_names_the_mismatch(tmp_path: Path, tiny_policy) -> None:
    tiny_policy().save_pretrained(tmp_path / "full")
    with pytest.raises(ValueError, match=r"projector.safetensors: weights do not fit the config: .*\(32, 8\) in the "
                                         r"weights vs \(32, 16\) for the config"):
        Policy.from_pretrained(tmp_path / "full", d_ts=16)
    tiny_policy(lora_r=4).save_pretrained(tmp_path / "lora")
    with pytest.raises(ValueError, match=r"adapter: weights do not fit the config: size mismatch for .*\[11, 32\]\) from checkpoint.*\[11, 64\]"):
        Policy.from_pretrained(tmp_path / "lora", tiny_hidden=64)
