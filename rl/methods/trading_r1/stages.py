"""A Trading-R1 curriculum stage: the reward heads it may weight (``REWARD_HEADS``), their weighted
sum (``stage_reward``) and its config (``StageConfig``). Shared by the curriculum runner
(``curriculum``) and the training backend (``backend``), below both."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rl.methods.trading_r1 import rewards as R

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
