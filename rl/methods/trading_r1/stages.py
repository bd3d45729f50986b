"""A Trading-R1 curriculum stage: the reward heads it may weight (``REWARD_HEADS``), their weighted
sum (``stage_reward``) and its config (``StageConfig``). Shared by the curriculum runner
(``curriculum``) and the training backend (``backend``), below both."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rl.methods.trading_r1 import rewards as R
from stockr1.config import config_from_dict

REWARD_HEADS: dict[str, Callable[..., list[float | None]]] = {
    "structure": R.structure_rewards,
    "evidence": R.evidence_rewards,
    "decision": R.decision_rewards,
    "outcome": R.outcome_rewards,
    "placement": R.placement_rewards,
}


@dataclass(frozen=True)
class StageConfig:
    name: str
    rewards: dict[str, float]
    sft: dict[str, Any] = field(default_factory=dict)
    rft: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        bad = sorted(set(self.rewards) - set(REWARD_HEADS))
        if bad:
            raise ValueError(f"stage {self.name!r}: unknown reward heads {bad}; valid: {sorted(REWARD_HEADS)}")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str) -> StageConfig:
        """Strict: the stage's keys, its ``sft`` keys (``StageSFT``) and its ``rft`` keys (the GRPO config
        ``rl.methods.run_grpo`` builds from them) are checked now; an error names ``where``."""
        from rl.methods import rft_train_config

        stage = config_from_dict(cls, d, where)
        config_from_dict(StageSFT, stage.sft, f"{where}.sft")
        try:
            rft_train_config(stage.rft)
        except ValueError as e:
            raise ValueError(f"{where}.rft: {e}") from e
        return stage


@dataclass(frozen=True)
class StageSFT:
    """A stage's text SFT warm start (``backend.text_sft`` keyword arguments); ``ckpt_every``: steps between
    its resumable states (``<out>/<stage>/sft/state.pt``)."""

    epochs: int = 1
    lr: float = 5e-4
    batch_size: int = 4
    max_len: int = 4096
    seed: int = 0
    ckpt_every: int = 250

    def __post_init__(self) -> None:
        if min(self.epochs, self.batch_size, self.max_len, self.ckpt_every) < 1 or not self.lr > 0:
            raise ValueError(f"sft: epochs, batch_size, max_len, ckpt_every must be >= 1 and lr > 0, got {self}")


def stage_reward(weights: dict[str, float]) -> Callable[..., list[float | None]]:
    """TRL-style weighted sum of the stage's heads. A head that is undefined for a sample (None,
    e.g. no label) contributes nothing; if every head is undefined the sample is None."""

    def reward(prompts, completions, **columns) -> list[float | None]:
        parts = [(w, REWARD_HEADS[h](prompts, completions, **columns)) for h, w in weights.items()]
        out: list[float | None] = []
        for i in range(len(completions)):
            vals = [(w, v[i]) for w, v in parts if v[i] is not None]
            out.append(sum(w * v for w, v in vals) if vals else None)
        return out

    reward.__name__ = "trading_r1_" + "+".join(weights)
    return reward
