"""Hold the answer prior shared by every query still (``train.credit.answer_prior: "hold"``).

Why: on balanced yes/no training queries, the small policy's move of each query's answer toward its own
gold is real but small, while the log-odds shift shared by every query walks several nats, in a direction
set by the seed (results/grpo_check, the log-odds split). ``"cancel"`` and ``"project"`` (``rl.grpo``)
take the shared push out of the advantages, so out of the gradient to first order; AdamW's per-weight
normalisation need not keep it out of the update (results/grpo_credit). This acts on the update itself:

1. before the step, ``d`` = the gradient of the step's mean answer log-odds: log p(Yes) − log p(No) at
   each rollout's decision point (``rl.answer_span.decision_contexts``), averaged per query over at most
   ``hold_per_query`` of its rollouts, then over the step's queries (``shared_direction``);
2. after the optimiser step, the update Δ loses its component along d (``remove_along``):
   Δ ← Δ − (⟨Δ, d⟩ / ⟨d, d⟩) d.

To first order the step then leaves the mean answer log-odds of its queries where the step found it, while
each query's log-odds still move against the others. What it gives up, on purpose: the shared prior is not
learnt at all, so a start whose base rate is wrong keeps it. Simplifications: the direction is read on the
step's own rollouts (the policy before the update), not on held-out contexts; AdamW's moments keep the
component that the update loses; under DDP the ranks' directions are averaged before the projection,
so the ranks stay in step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from rl.answer_span import context_logodds, decision_contexts


def step_contexts(rollouts: Sequence[Any], tokenizer, per_query: int) -> list[dict[str, Any]]:
    """The step's decision contexts (``decision_contexts``), at most ``per_query`` per query, each with its
    ``query`` (the rollout's ``prompt_index``: its row in the step's soft tokens)."""
    out, seen = [], {}
    for c in decision_contexts(rollouts, tokenizer):
        q = rollouts[c["row"]].prompt_index
        if seen.get(q, 0) < per_query:
            seen[q] = seen.get(q, 0) + 1
            out.append({**c, "query": q})
    return out


def shared_direction(policy, tokenizer, fabric, params: Mapping[str, torch.nn.Parameter],
                     contexts: Sequence[Mapping[str, Any]], ts: Tensor | None) -> dict[str, Tensor]:
    """name -> the gradient of the mean over queries of each query's mean log-odds over its ``contexts``,
    under the run's precision (``fabric.autocast``, ``fabric.backward``); zeros without contexts. Leaves
    every ``.grad`` empty. ``ts``: the step's soft tokens [Q, K, d]."""
    for p in params.values():
        p.grad = None
    per_q: dict[int, int] = {}
    for c in contexts:
        per_q[c["query"]] = per_q.get(c["query"], 0) + 1
    n_q = max(len(per_q), 1)
    with fabric.no_backward_sync(policy, enabled=fabric.world_size > 1):  # the ranks' sum is taken below
        for c in contexts:
            with fabric.autocast():
                z = context_logodds(policy, tokenizer, c, ts)
            fabric.backward(z / (per_q[c["query"]] * n_q))
    out = {n: (p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p)) for n, p in params.items()}
    for p in params.values():
        p.grad = None
    if fabric.world_size > 1:
        out = {n: fabric.all_reduce(g, reduce_op="sum") / fabric.world_size for n, g in out.items()}
    return out


@torch.no_grad()
def remove_along(params: Mapping[str, torch.nn.Parameter], before: Mapping[str, Tensor],
                 direction: Mapping[str, Tensor]) -> float:
    """Set each parameter to ``before + Δ − (⟨Δ, d⟩ / ⟨d, d⟩) d`` with Δ = parameter − ``before`` and d =
    ``direction``. Returns ⟨Δ, d⟩: to first order, the move of the mean log-odds the step would have made and
    does not (nats). A zero direction leaves the update as it is (returns 0)."""
    dd = sum(float((d.double() ** 2).sum()) for d in direction.values())
    if dd == 0.0:
        return 0.0
    dot = sum(float(((p.detach() - before[n]).double() * direction[n].double()).sum()) for n, p in params.items())
    for n, p in params.items():
        p.sub_((dot / dd) * direction[n].to(p.dtype))
    return dot
