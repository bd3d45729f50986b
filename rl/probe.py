"""Does the optimiser optimise? Re-sample a policy on its GRPO training queries and score it.

``probe_rewards`` draws G rollouts per query at the training temperature from any policy (the SFT
start or a finished GRPO run) with the run's own rollout settings and frozen tool, and scores them
with the *full* Stock-R1 reward (every component, App. C.2 weights), whatever subset the run trained
on, so rows of an ablation are compared on one objective. Seeded: the same (policy, queries, seed)
gives the same rollouts. A GRPO run that optimises should raise the mean total reward (and the
answer reward) of its own training queries above the SFT policy's, beyond the sampling-seed spread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from rl.answer_span import context_logodds, decision_contexts
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


def answer_contexts(engine, samples: Sequence[GRPOSample], group_size: int, seed: int,
                    yes: str = "Yes", no: str = "No") -> list[dict[str, Any]]:
    """Fixed contexts for ``answer_logodds``: ``group_size`` rollouts per yes/no query of ``samples`` sampled
    from ``engine``'s policy (the start), each cut at its decision point (``decision_point``), as
    ``{query, gold, ids, words, given}``: the query's index in ``samples``, its gold answer, the token ids
    up to the decision (prompt, reasoning, tool observation, then "... is"), the two answer words as they
    would be written there (" Yes" / " No" in a conclusion; "Yes" / "No" right after ``<answer>`` when the
    rollout stated none) and the answer the rollout went on to give. A rollout that never wrote
    ``<answer>`` gives no context."""
    yes_no = [i for i, s in enumerate(samples) if s.columns.get("answer_type") == "yes_no"]
    if not yes_no:
        return []
    torch.manual_seed(seed)
    if getattr(engine, "generator", None) is not None:
        engine.generator.manual_seed(seed)
    picked = [samples[i] for i in yes_no]
    with torch.no_grad():
        rollouts = engine.generate([s.prompt for s in picked], soft_tokens(picked), [s.sample_ref for s in picked],
                                   num_return_sequences=group_size)
    out = []
    for c in decision_contexts(rollouts, engine.tokenizer, yes, no):
        r = rollouts[c["row"]]
        q = yes_no[r.prompt_index]
        out.append({"query": q, "gold": samples[q].columns.get("answer"), "ids": c["ids"], "words": c["words"],
                    "given": r.answer})
    return out


def answer_logodds(policy, samples: Sequence[GRPOSample], contexts: Sequence[Mapping[str, Any]]) -> list[float]:
    """Per context of ``answer_contexts``: ``policy``'s log p(Yes) − log p(No) for the context's two answer
    ``words`` written next (temperature 1; a word of several tokens: the sum of their log-probs), with the
    context's text fixed, so two policies are compared on the same reasoning and observation without
    sampling noise. The soft tokens are the query's (``soft_tokens``; the decoder is frozen during RL, so
    the start's and an end's agree)."""
    ts = soft_tokens(samples)
    with torch.no_grad():
        return [float(context_logodds(policy, policy.tokenizer, c, ts)) for c in contexts]
