"""Does the optimiser optimise? Re-sample a policy on its GRPO training queries and score it.

``probe_rewards`` draws G rollouts per query at the training temperature from any policy (the SFT
start or a finished GRPO run) with the run's own rollout settings and frozen tool, and scores them
with the *full* Stock-R1 reward (every component, App. C.2 weights), whatever subset the run trained
on, so rows of an ablation are compared on one objective. Seeded: the same (policy, queries, seed)
gives the same rollouts. A GRPO run that optimises should raise the mean total reward (and the
answer reward) of its own training queries above the SFT policy's, beyond the sampling-seed spread.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from rl.rewards import PENALTY, REWARD_NAMES, RewardWeights, variance_shares
from rl.soft_tokens import soft_tokens
from rl.trainer import GRPOSample, StockR1Scorer


def probe_rewards(engine, samples: Sequence[GRPOSample], thresholds: Any, group_size: int, seed: int,
                  weights: RewardWeights = RewardWeights()) -> dict[str, Any]:
    """Mean rewards of ``group_size`` sampled rollouts per query in ``samples``.

    Returns ``reward_total``, one ``reward/<component>`` per component, ``answer_parse_rate`` and
    ``action_success_rate`` (%), ``per_query_total`` [Q] (the mean total per query, for paired
    comparisons between policies on the same queries) and ``per_query`` [Q]: each query's gold answer,
    answer type, its G parsed answers (None: none parsed) and mean of each reward component (None where
    the component is undefined for the query), to see which queries an answer reward moved on."""
    if not samples:
        raise ValueError("probe_rewards needs at least one query")
    torch.manual_seed(seed)
    if getattr(engine, "generator", None) is not None:
        engine.generator.manual_seed(seed)
    ts = soft_tokens(samples)
    with torch.no_grad():
        rollouts = engine.generate([s.prompt for s in samples], ts, [s.sample_ref for s in samples],
                                   num_return_sequences=group_size)
    rewards = StockR1Scorer(thresholds, weights, REWARD_NAMES)(rollouts, samples)
    total = np.asarray(rewards.total, dtype=np.float64)
    r_ans = rewards.components["r_ans"]
    out: dict[str, Any] = {"reward_total": float(np.nanmean(total)), "n_queries": len(samples),
                           "group_size": group_size, "seed": seed}
    for name, v in rewards.components.items():
        out[f"reward/{name}"] = float(np.nanmean(v)) if not np.isnan(v).all() else None
    out["answer_parse_rate"] = 100.0 * float(np.mean(r_ans[~np.isnan(r_ans)] != PENALTY))
    out["action_success_rate"] = 100.0 * float(np.mean([r.action is not None for r in rollouts]))
    out["per_query_total"] = np.nanmean(total.reshape(len(samples), group_size), axis=1).tolist()
    out["variance_share"] = variance_shares(rewards.components, total, group_size, weights)
    out["per_query"] = [{"gold": s.columns.get("answer"), "answer_type": s.columns.get("answer_type"),
                         "answers": [r.answer for r in rollouts[i * group_size:(i + 1) * group_size]],
                         **{name: _mean_or_none(v[i * group_size:(i + 1) * group_size])
                            for name, v in rewards.components.items()}}
                        for i, s in enumerate(samples)]
    return out


def _mean_or_none(v: np.ndarray) -> float | None:
    v = np.asarray(v, dtype=np.float64)
    return None if np.isnan(v).all() else float(np.nanmean(v))
