"""Training backend of the Trading-R1 curriculum on the shared stack.

- SFT warm start: next-token loss on the model-written thesis only (prompt masked), tokenized with
  ``llm.rollout.encode_segments`` so SFT and rollouts share token boundaries; AdamW, constant LR.
  Text-only: the thesis has no tool calls and no soft tokens, so the joint SFT of ``llm.sft``
  (which also trains the forecast decoder) is not needed here.
- RFT: ``rl.trainer.GRPOTrainer`` with ``FuncScorer`` over the stage's TRL-style reward heads
  (weights from the stage config) and a tool-free ``RolloutEngine``.
Each phase loads the previous checkpoint (``Policy.load`` of a saved policy dir, or a fresh
``Policy`` from a HF path / "tiny") and saves ``<out>/policy``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rl.methods.trading_r1.stages import REWARD_HEADS, StageConfig

SFT_KEYS = ("epochs", "lr", "batch_size", "max_len", "seed")


def text_sft(policy, prompts: Sequence[str], targets: Sequence[str], epochs: int = 1, lr: float = 5e-4,
             batch_size: int = 4, max_len: int = 4096, seed: int = 0) -> list[float]:
    """Prompt-masked next-token training of ``policy`` on (prompt, target) pairs; returns batch losses."""
    from llm.logprobs import pad_sequences, token_logprobs
    from llm.rollout import encode_segments
    from llm.special_tokens import EOS_TOKEN
    from llm.tokenizer import chat_prompt

    tok = policy.tokenizer
    rows = [encode_segments(tok, [(chat_prompt(tok, p), False), (t + EOS_TOKEN, True)]) for p, t in zip(prompts, targets, strict=True)]
    rows = [(ids[-max_len:], mask[-max_len:]) for ids, mask in rows]  # keep the target end if too long
    opt = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=lr)
    rng, losses = np.random.default_rng(seed), []
    policy.train()
    for _ in range(epochs):
        order = rng.permutation(len(rows))
        for k in range(0, len(rows), batch_size):
            batch = [rows[i] for i in order[k:k + batch_size]]
            ids, att, gen = pad_sequences([b[0] for b in batch], tok.pad_token_id, [b[1] for b in batch], side="right")
            dev = next(policy.parameters()).device
            lp = token_logprobs(policy, ids.to(dev), att.to(dev))
            g = gen.to(dev).float()
            loss = -(lp * g).sum() / g.sum().clamp(min=1.0)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
    return losses


@dataclass
class SharedStackBackend:
    """policy_overrides: PolicyConfig fields for a fresh policy (e.g. tokenizer_path, lora_r)."""

    policy_overrides: dict[str, Any] = field(default_factory=dict)
    accelerator: str = "cpu"
    history: list[dict[str, Any]] = field(default_factory=list)

    def load(self, init: str):
        from llm.policy import Policy, PolicyConfig

        if (Path(init) / "policy_config.json").exists():
            return Policy.load(init)
        return Policy(PolicyConfig.from_dict({"name_or_path": init, "soft_tokens": False, **self.policy_overrides}))

    def sft(self, examples, target, init, stage: StageConfig, out: Path) -> str:
        policy = self.load(init)
        kw = {k: v for k, v in stage.sft.items() if k in SFT_KEYS}
        losses = text_sft(policy, [e["prompt"] for e in examples], [e[target] for e in examples], **kw)
        self.history.append({"stage": stage.name, "phase": "sft", "loss_first": losses[0], "loss_last": losses[-1]})
        return str(policy.save(Path(out) / "policy"))

    def rft(self, examples, reward: Callable, init, stage: StageConfig, out: Path) -> str:
        from rl.methods import run_grpo

        policy = self.load(init)
        hist = run_grpo(policy, [e["prompt"] for e in examples],
                        [{"label": e["label"], "excess_return": e["excess_return"]} for e in examples],
                        {h: REWARD_HEADS[h] for h in stage.rewards}, dict(stage.rewards), stage.rft, out,
                        accelerator=self.accelerator)
        self.history.append({"stage": stage.name, "phase": "rft", "steps": len(hist),
                             "reward": [h.get("reward/total", float("nan")) for h in hist],
                             "frac_zero_spread": [h.get("reward/frac_zero_spread", float("nan")) for h in hist]})
        return str(policy.save(Path(out) / "policy"))
