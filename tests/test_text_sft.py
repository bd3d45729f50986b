"""rl.methods.text_sft: the schedule against hand-computed values, batches that are whole passes, every
parameter trained, and a resumed run that ends where an uninterrupted one does."""

import math

import numpy as np
import pytest
import torch

from rl.methods.text_sft import TextSFTConfig, batch_order, text_sft
from tests.resume_check import assert_identical

PROMPTS = ["Close 101.5, prior 100.2: decide.", "Close 99.1, prior 100.4: decide.", "Close 100.0, flat: decide."]
TARGETS = ["<answer>BUY</answer>", "<answer>SELL</answer>", "<answer>HOLD</answer>"]


def test_schedule_warmup_then_cosine_to_the_floor():
    cfg = TextSFTConfig(steps=12, lr=1.0, warmup_steps=2, min_lr_ratio=0.1)
    assert cfg.lr_factor(0, 12) == pytest.approx(0.5)  # linear warmup: (0 + 1) / 2
    assert cfg.lr_factor(1, 12) == pytest.approx(1.0)
    assert cfg.lr_factor(2, 12) == pytest.approx(1.0)  # cosine starts at the peak
    assert cfg.lr_factor(7, 12) == pytest.approx(0.1 + 0.9 * 0.5)  # halfway: (7 - 2) / (12 - 2)
    assert cfg.lr_factor(12, 12) == pytest.approx(0.1)
    assert TextSFTConfig(lr=1.0).lr_factor(5, 10) == 1.0  # the curriculum's constant rate


def test_epochs_are_whole_passes_over_the_examples():
    cfg = TextSFTConfig(epochs=3, batch_size=4)
    assert cfg.total_steps(10) == 3 * math.ceil(10 / 4)
    order = batch_order(10, 4, cfg.total_steps(10), seed=0)
    assert [len(b) for b in order] == [4, 4, 2] * 3
    for e in range(3):
        assert sorted(np.concatenate(order[3 * e:3 * e + 3]).tolist()) == list(range(10))
    assert len(batch_order(10, 4, 7, seed=0)) == 7  # a step budget cuts across passes


@pytest.mark.parametrize("bad", [{"steps": 0}, {"lr": 0.0}, {"min_lr_ratio": 0.0}, {"batch_size": 0}])
def test_bad_budget_is_refused(bad):
    with pytest.raises(ValueError, match="text sft"):
        TextSFTConfig(**bad)


def test_every_parameter_trains_and_the_loss_falls(tiny_policy):
    policy = tiny_policy()
    before = {n: p.detach().clone() for n, p in policy.named_parameters() if p.requires_grad}
    losses = text_sft(policy, PROMPTS, TARGETS, TextSFTConfig(steps=30, batch_size=3, lr=3e-3, warmup_steps=3))
    assert len(losses) == 30 and np.mean(losses[-5:]) < 0.5 * np.mean(losses[:3])
    unchanged = [n for n, p in policy.named_parameters() if p.requires_grad and torch.equal(p.detach(), before[n])]
    assert unchanged == [n for n in unchanged if "soft" in n or "projector" in n]  # text only: no soft tokens


class _Interrupt(Exception):
    pass


def test_an_interrupted_run_resumes_to_the_uninterrupted_weights(tiny_policy, tmp_path):
    """Bit for bit: every tensor of the final state (weights, AdamW's moments), the schedule and the losses;
    LoRA dropout on, so the resumed steps must draw the uninterrupted run's dropout masks."""
    cfg = TextSFTConfig(steps=6, batch_size=2, lr=3e-3, warmup_steps=2, min_lr_ratio=0.1, ckpt_every=2)
    lora = {"lora_r": 4, "lora_dropout": 0.3}
    whole = tiny_policy(**lora)
    ref = text_sft(whole, PROMPTS, TARGETS, cfg, seed=1, ckpt=tmp_path / "whole.pt")

    def stop_after_3(step, total, loss):
        if step == 3:  # the state of step 2 is on disk; step 3 is lost with the process
            raise _Interrupt

    part = tiny_policy(**lora)
    with pytest.raises(_Interrupt):
        text_sft(part, PROMPTS, TARGETS, cfg, seed=1, ckpt=tmp_path / "state.pt", progress=stop_after_3)
    assert torch.load(tmp_path / "state.pt", weights_only=False)["step"] == 2
    torch.manual_seed(123)  # whatever the new process drew before, the resumed run draws what the whole one drew
    resumed = tiny_policy(**lora)  # a fresh process: the weights come from the state file
    losses = text_sft(resumed, PROMPTS, TARGETS, cfg, seed=1, ckpt=tmp_path / "state.pt")
    assert losses == ref
    a, b = (torch.load(tmp_path / f, weights_only=False) for f in ("whole.pt", "state.pt"))
    assert a["step"] == 6 and assert_identical(a, b) > 10
