"""The Trading-R1 curriculum survives a SIGKILL at any checkpoint, across its stage boundaries: a process
killed inside a checkpoint write, rerun, ends with the weights of the uninterrupted curriculum, bit for bit
(every stage's SFT state, RFT checkpoint and final policy). The kill lands while the write's data sit in the
staging file (``stockr1.resume``, ``STOCKR1_TEST_PAUSE_BEFORE_COMMIT``); the test then tears that file in half,
as a kill inside ``torch.save`` would have left it: it must never be loaded."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from llm.policy import Policy, PolicyConfig
from llm.tokenizer import train_tokenizer
from stockr1.resume import staging
from tests import curriculum_run
from tests.resume_check import assert_identical, kill_inside_write

STAGES = ("structure", "claims", "decision")


@pytest.fixture(scope="module")
def init(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("tr1_init")
    texts = [e["prompt"] + e[f"target_{s}"] for e in curriculum_run.EXAMPLES for s in STAGES]
    train_tokenizer(texts * 5, 300, d / "tok")
    Policy(PolicyConfig(name_or_path="tiny", tokenizer_path=str(d / "tok"), tiny_hidden=32, tiny_layers=1,
                        tiny_heads=2, tiny_kv_heads=1, tiny_intermediate=64, lora_r=0, soft_tokens=False)).save(d / "init")
    return d / "init"


@pytest.fixture(scope="module")
def uninterrupted(init, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tr1_full")
    curriculum_run.run(out, init)
    return out


def states(out: Path) -> dict:
    """Every saved state of a curriculum run (wall times dropped)."""
    st = {}
    for s in STAGES:
        st[f"{s}/sft"] = torch.load(out / s / "sft" / "state.pt", weights_only=False)
        rft = torch.load(out / s / "rft" / "last.ckpt", weights_only=False)
        rft["history"] = [{k: v for k, v in h.items() if not k.startswith("time/")} for h in rft["history"]]
        st[f"{s}/rft"] = rft
        st[f"{s}/policy"] = load_file(out / s / "rft" / "policy" / "model" / "model.safetensors")
    return st


@pytest.mark.slow
@pytest.mark.parametrize("n, writing", [(5, "claims/sft/state.pt"), (8, "claims/rft/last.ckpt")],
                         ids=["stage_boundary", "mid_rft"])
def test_a_curriculum_killed_inside_a_checkpoint_write_resumes_bit_identically(init, uninterrupted, tmp_path, n,
                                                                               writing) -> None:
    torn = kill_inside_write(["tests.curriculum_run", tmp_path, init], n)
    assert torn == tmp_path / writing  # write 5: the first of stage claims (structure done); 8: claims' last RFT step
    part = staging(torn)  # torn in half by kill_inside_write
    assert (tmp_path / "structure" / "DONE").is_file() and not (tmp_path / "claims" / "DONE").exists()
    # what the rerun must not redo: the finished stage, and (killed in the RFT) the claims SFT and RFT step 1
    kept = [tmp_path / "structure" / "DONE", tmp_path / "structure" / "rft" / "last.ckpt"]
    if n == 8:
        kept.append(tmp_path / "claims" / "sft" / "state.pt")
        step1 = torch.load(torn, weights_only=False)["history"]  # the last complete checkpoint: RFT step 1
        assert len(step1) == 1
    mtimes = [p.stat().st_mtime_ns for p in kept]

    torch.manual_seed(123)
    curriculum_run.run(tmp_path, init)  # the rerun: structure skipped, claims continued, decision trained
    assert not part.exists()  # the torn staging file was never loaded, and is gone
    assert [p.stat().st_mtime_ns for p in kept] == mtimes
    if n == 8:  # step 1 was loaded, not retrained: its logged wall times are the killed run's
        assert_identical(torch.load(torn, weights_only=False)["history"][0], step1[0])
    assert assert_identical(states(uninterrupted), states(tmp_path)) > 100
