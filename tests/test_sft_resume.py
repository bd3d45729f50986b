"""Joint SFT killed after a checkpoint and resumed by a fresh trainer ends bit-identical to the run that was
never interrupted (issue 34): every tensor of the final checkpoint (policy, projector, decoder, AdamW's
moments), the LR schedule, the step and the loss history. The run draws what makes resuming hard: a
balanced batch draw, LoRA dropout, the decoder's field dropout and control-loss samples."""

from __future__ import annotations

import shutil

import pytest
import torch
import yaml
from safetensors.torch import load_file

from forecast_action.decoder_loss import DecoderLoss, DecoderRecipe
from forecast_action.derive import ActionThresholds
from llm.policy import Policy, PolicyConfig
from llm.sft import JointSFT, SFTData, SFTTrainer, TrainConfig, run_sft
from stockr1.resume import staging
from stockr1.types import train_only
from tests.resume_check import assert_identical, kill_inside_write
from tests.test_sft_joint import TS_CFG, Decoder, tiny_traces
from tests.tiny_runs import tiny_sft_config

CFG = TrainConfig(lr=3e-3, decoder_lr=1e-3, warmup_steps=2, max_steps=7, batch_size=3, ckpt_every=2, log_every=100,
                  accelerator="cpu", seed=5)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    return tiny_traces(tmp_path_factory.mktemp("tok"))


class Kill(Exception):
    pass


class KillAt:
    """A logger that dies when step ``at`` is logged: after that step trained, before its checkpoint."""

    def __init__(self, at: int) -> None:
        self.at = at

    def log(self, rec, step: int) -> None:
        if step == self.at:
            raise Kill


def trainer(setup, run_dir, logger=None) -> tuple[SFTTrainer, SFTData]:
    """A fresh model and trainer, as a new process would build them (init seeded like ``build_sft``)."""
    w, traces, tok = setup
    torch.manual_seed(0)
    pcfg = PolicyConfig(tiny_hidden=32, tiny_layers=1, tiny_heads=2, tiny_kv_heads=1, tiny_intermediate=64, lora_r=4,
                        lora_alpha=8, lora_dropout=0.2, d_ts=TS_CFG.d_llm)
    loss = DecoderLoss(DecoderRecipe(), ActionThresholds.fit(train_only(w)))  # field dropout + control samples
    model = JointSFT(Policy(pcfg, tokenizer=tok), Decoder(), lambda_ts=0.5, decoder_loss=loss)
    groups = [t.answer for t in traces]  # a balanced draw (SFTData.sample with unequal probabilities)
    return SFTTrainer(model, CFG, run_dir, logger), SFTData(traces, w, tok, max_len=4096, groups=groups)


def final_state(run_dir) -> dict:
    st = torch.load(run_dir / "last.ckpt", map_location="cpu", weights_only=False)
    st["history"] = [{k: v for k, v in h.items() if k != "sec"} for h in st["history"]]  # wall time
    return st


def test_killed_sft_resumes_to_the_uninterrupted_weights(setup, tmp_path) -> None:
    full, data = trainer(setup, tmp_path / "full")
    full.fit(data)

    cut, data = trainer(setup, tmp_path / "cut", logger=KillAt(5))
    with pytest.raises(Kill):
        cut.fit(data)
    saved = final_state(tmp_path / "cut")
    assert saved["step"] == 4  # step 5 trained and was lost with the process

    torch.manual_seed(123)  # whatever the new process drew before, the resumed run draws what the full one drew
    resumed, data = trainer(setup, tmp_path / "cut")
    assert resumed.maybe_resume() and resumed.step == 4
    resumed.fit(data)

    a, b = final_state(tmp_path / "full"), final_state(tmp_path / "cut")
    assert a["step"] == b["step"] == CFG.max_steps and len(b["history"]) == CFG.max_steps
    assert assert_identical(a, b) > 50  # model (policy, projector, decoder), AdamW moments, schedule, history
    moved = [k for k, v in a["model"].items() if v.is_floating_point() and not torch.equal(v, saved["model"][k])]
    assert any(k.startswith("decoder.") for k in moved) and any(k.startswith("policy.") for k in moved)


def test_per_step_draws_do_not_depend_on_where_the_run_started(setup, tmp_path) -> None:
    """What a step consumes is a function of (seed, step): the batches of steps 5-7 are the same whether the
    loop started at step 0 or at step 4, and another seed draws other batches."""
    from stockr1.resume import step_rng

    _, data = trainer(setup, tmp_path)
    draws = [data.sample(step_rng(CFG.seed, k), CFG.batch_size).tolist() for k in range(7)]
    assert draws[4:] == [data.sample(step_rng(CFG.seed, k), CFG.batch_size).tolist() for k in range(4, 7)]
    assert draws != [data.sample(step_rng(CFG.seed + 1, k), CFG.batch_size).tolist() for k in range(7)]


DECODER = {"seed": 0, "warmup_steps": 3, "tool_samples": 4,
           "ts": {"lookback": 90, "horizon": 10, "patch_len": 15, "d_model": 16, "n_layers": 1, "n_heads": 2,
                  "ffn_dim": 32, "dropout": 0.1, "d_llm": 8},
           "action": {"cond_dim": 8, "emb_dim": 2, "hidden": 16}}


@pytest.mark.slow
def test_stockr1_sft_killed_inside_a_checkpoint_write_resumes_bit_identically(tmp_path) -> None:
    """The issue's scenario through the command: `stockr1 sft` SIGKILLed while it writes its step-4 checkpoint
    (the staging file torn in half), then `stockr1 sft --resume`: it resumes at step 2, the last complete
    checkpoint, and ends with the policy/, decoder/ and last.ckpt of the uninterrupted run, bit for bit."""
    cfg = tiny_sft_config(tmp_path, {"n_train": 12, "n_val": 2, "n_test": 2}, DECODER,
                          {"max_steps": 6, "ckpt_every": 2, "lr": 3e-3, "decoder_lr": 1e-3, "warmup_steps": 2})
    path = tmp_path / "sft.yaml"
    path.write_text(yaml.safe_dump(cfg))
    run_sft(path, out_root=tmp_path / "full")
    full, cut = tmp_path / "full" / "s", tmp_path / "cut" / "s"
    cut.mkdir(parents=True)
    for name in ("qa.jsonl", "traces.jsonl", "thresholds.json"):  # prepared once: the test is about training
        shutil.copy(full / name, cut / name)
    shutil.copytree(full / "decoder_init", cut / "decoder_init")

    torn = kill_inside_write(["stockr1.cli", "sft", "--config", path, "--out", tmp_path / "cut"], n=2)
    assert torn == cut / "last.ckpt" and final_state(cut)["step"] == 2  # step 4's write was torn: not loaded
    with pytest.raises(FileExistsError, match="--resume.*--overwrite"):
        run_sft(path, out_root=tmp_path / "cut")
    summary = run_sft(path, out_root=tmp_path / "cut", resume=True)
    assert summary["steps"] == 6 and not staging(torn).exists()

    assert assert_identical(final_state(full), final_state(cut)) > 50
    for d in ("policy", "decoder"):
        files = sorted(p.relative_to(full) for p in (full / d).rglob("*.safetensors"))
        assert files and files == sorted(p.relative_to(cut) for p in (cut / d).rglob("*.safetensors"))
        for f in files:
            assert assert_identical(load_file(full / f), load_file(cut / f)) > 0, f
