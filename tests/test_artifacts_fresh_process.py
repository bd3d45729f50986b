"""Every model artefact loads with ``from_pretrained`` in a fresh process, from safetensors + JSON only,
and gives the same outputs as the object that saved it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

from forecast_action.decoder import ActionConditionedDecoder
from forecast_action.encoder import ActionEncoderConfig
from forecast_action.forecaster import Forecaster
from llm.policy import Policy, PolicyConfig
from llm.qa.prompt import SYSTEM_PROMPT
from llm.tokenizer import train_tokenizer
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
ids = torch.tensor([[1, 2, 3, 4]])
out = {"decoder_mu": dec(x, dec.no_action(torch.ones(2).numpy())).mu.tolist(),
       "encoder_h": enc(x).h_ts.tolist(), "policy_logits": pol.model(input_ids=ids).logits[0, -1, :5].tolist(),
       "projector": pol.projector(torch.ones(1, 8)).tolist(), "modules": sorted(m for m in sys.modules if m in
       ("lightning", "lightning.pytorch", "lightning.fabric"))}
print(json.dumps(out))
"""


def test_every_artefact_loads_in_a_fresh_process(tmp_path: Path) -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 5, 30)
    torch.save(x, tmp_path / "x.pt")
    dec = ActionConditionedDecoder(TS, ActionEncoderConfig(cond_dim=8, emb_dim=4, hidden=16)).eval()
    with torch.no_grad():
        for p in dec.parameters():
            p.add_(0.1 * torch.randn_like(p))  # off the zero init, so a dropped tensor would show
    dec.save_pretrained(tmp_path / "decoder")
    enc = TSEncoder(TS).eval()
    Forecaster(enc).save_pretrained(tmp_path / "forecaster")
    tok = train_tokenizer([SYSTEM_PROMPT, "a b c 1 2 3"], 300, tmp_path / "tok")
    pol = Policy(PolicyConfig(tiny_hidden=32, tiny_layers=1, tiny_heads=2, tiny_kv_heads=1, tiny_intermediate=64,
                              lora_r=0, d_ts=8), tokenizer=tok).eval()
    with torch.no_grad():
        for p in pol.projector.parameters():
            p.add_(0.1 * torch.randn_like(p))
    pol.save_pretrained(tmp_path / "policy")
    assert (tmp_path / "policy" / "projector.safetensors").is_file()
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
    assert got["modules"] == []  # loading needs no Lightning (resume state), only the artefacts
