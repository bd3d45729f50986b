"""Training backend of the Trading-R1 curriculum on the shared stack.

- SFT warm start: ``rl.methods.text_sft`` (next-token loss on the model-written thesis only, prompt
  masked; AdamW, constant LR over the stage's epochs).
  Text-only: the thesis has no tool calls and no soft tokens, so the joint SFT of ``llm.sft``
  (which also trains the forecast decoder) is not needed here.
- RFT: ``rl.trainer.GRPOTrainer`` with ``FuncScorer`` over the stage's TRL-style reward heads
  (weights from the stage config) and a tool-free ``RolloutEngine``.
Each phase loads the previous checkpoint (``Policy.load`` of a saved policy dir, or a fresh
``Policy`` from a HF path / "tiny") and saves ``<out>/policy``. Both resume after a kill: the SFT from
``<out>/state.pt``, the RFT from ``<out>/last.ckpt`` (each bit-identical to an uninterrupted phase on CPU;
``stockr1.resume``), so a rerun of the curriculum continues inside the stage it was killed in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rl.methods.text_sft import TextSFTConfig, text_sft
from rl.methods.trading_r1.stages import REWARD_HEADS, StageConfig

SFT_KEYS = ("epochs", "lr", "batch_size", "max_len", "seed", "ckpt_every")


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
        kw = {k: v for k, v in stage.sft.items() if k in SFT_KEYS and k != "seed"}
        losses = text_sft(policy, [e["prompt"] for e in examples], [e[target] for e in examples], TextSFTConfig(**kw),
                          seed=int(stage.sft.get("seed", 0)), ckpt=Path(out) / "state.pt")
        self.history.append({"stage": stage.name, "phase": "sft", "loss_first": losses[0], "loss_last": losses[-1]})
        return str(policy.save(Path(out) / "policy"))

    def rft(self, examples, reward: Callable, init, stage: StageConfig, out: Path) -> str:
        from rl.methods import run_grpo

        policy = self.load(init)
        hist = run_grpo(policy, [e["prompt"] for e in examples],
                        [{"label": e["label"], "excess_return": e["excess_return"]} for e in examples],
                        {h: REWARD_HEADS[h] for h in stage.rewards}, dict(stage.rewards), stage.rft, out,
                        accelerator=self.accelerator, resume=True)
        self.history.append({"stage": stage.name, "phase": "rft", "steps": len(hist),
                             "reward": [h.get("reward/total", float("nan")) for h in hist],
                             "frac_zero_spread": [h.get("reward/frac_zero_spread", float("nan")) for h in hist]})
        return str(policy.save(Path(out) / "policy"))
