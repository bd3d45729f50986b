"""Where a GRPO step's update comes from: the tokens that state the answer, or the rest of the completion.

GRPO gives every model-written token of a rollout the rollout's advantage. A yes/no answer is decided by
one or two of its ~450 tokens (the conclusion's " Yes" / " No" and the ``<answer>`` span); the others (the
forecast action, the reasoning) carry the same advantage, and their gradients, which do not move that
answer, sum into the same update. This module splits one step's gradient exactly in two and asks how far
each part would move each query's answer.

- ``decision_tokens``: [N, T] the answer's tokens of each rollout (``rl.answer_span``: the decision word, then
  ``<answer>`` ... ``</answer>``).
- ``step_gradients``: the gradient of the step's real loss (``GRPOTrainer.accumulate``) and of the same
  loss with gradient through the decision tokens only; every normaliser and the loss value are the same,
  so full = decision + rest exactly.
- ``with_credit`` / ``step_gradient``: the same batch under another credit (rl/grpo.py, "Credit") and its
  step's gradient, so credits are compared on one batch.
- ``logodds_gradients``: per query, the mean gradient of log p(Yes) − log p(No) over fixed contexts of the
  start (``rl.probe.answer_contexts``: the quantity ``bench grpo_check`` measures).
- ``adam_first_step`` / ``predicted_moves``: AdamW's first update from a gradient, −lr g / (|g| + eps)
  (about −lr sign(g): a fresh optimiser, as each check seed starts), and its first-order effect on each
  query's log-odds, Σ update · ∇ log-odds.
- ``linear_step``: an update linear in the gradient at the same per-weight RMS, to tell what the per-weight
  normalisation of AdamW's first step does to a move from what the gradient itself does.
- ``applied_moves``: the same update applied, the log-odds read again, the parameters restored: the real
  effect, against which the first-order prediction is checked.

Both are for the first step only (later Adam steps divide by a running √v); a diagnostic of the update's
direction, compared in ``bench grpo_credit`` with the move the check saw.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from rl.answer_span import context_logodds
from rl.grpo import CreditConfig
from rl.soft_tokens import soft_tokens
from rl.trainer import GRPOSample, GRPOTrainer, StepBatch, answer_span_credit


def trainable(trainer: GRPOTrainer) -> dict[str, torch.nn.Parameter]:
    """The parameters the step updates, by name."""
    return {n: p for n, p in trainer.policy.named_parameters() if p.requires_grad}


def _grads(params: Mapping[str, torch.nn.Parameter]) -> dict[str, Tensor]:
    return {n: (p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p)) for n, p in params.items()}


def step_gradients(trainer: GRPOTrainer, sb: StepBatch, mask: Tensor,
                   old_ref: tuple[Tensor | None, Tensor | None] | None = None) -> dict[str, dict[str, Tensor]]:
    """{"full", "decision", "rest"} -> name -> gradient of the step's loss: all tokens, only ``mask``'s,
    and the difference (the other tokens' part; exact, the loss being a sum over tokens with fixed
    normalisers). One pass of ``num_iterations``' first, as the step's first optimiser update sees it.
    ``old_ref``: ``trainer.old_and_ref(sb)`` if known (it does not depend on the credit)."""
    params = trainable(trainer)
    old_ref = trainer.old_and_ref(sb) if old_ref is None else old_ref
    out = {name: step_gradient(trainer, sb, tokens, old_ref) for name, tokens in (("full", None), ("decision", mask))}
    out["rest"] = {n: out["full"][n] - out["decision"][n] for n in params}
    return out


def step_gradient(trainer: GRPOTrainer, sb: StepBatch, tokens: Tensor | None = None,
                  old_ref: tuple[Tensor | None, Tensor | None] | None = None) -> dict[str, Tensor]:
    """name -> gradient of the step's loss through ``tokens`` ([N, T] bool; None = every generated token),
    under the credit ``sb`` carries (``sb.token_adv``). ``old_ref``: ``trainer.old_and_ref(sb)`` if known."""
    old, ref = trainer.old_and_ref(sb) if old_ref is None else old_ref
    trainer.opt.zero_grad(set_to_none=True)
    trainer.accumulate(sb, old, ref, grad_tokens=tokens)
    out = _grads(trainable(trainer))
    trainer.opt.zero_grad(set_to_none=True)
    return out


def with_credit(trainer: GRPOTrainer, sb: StepBatch, credit: CreditConfig) -> StepBatch:
    """The same batch (rollouts, rewards, weights) with the token advantages of ``credit``: what the step
    would have trained on under another credit (rl/grpo.py, "Credit")."""
    if credit.mode == "sequence":
        return dataclasses.replace(sb, token_adv=None, token_w=None)
    adv, w = answer_span_credit(sb.rollouts, sb.samples, sb.rewards, sb.adv, sb.batch["gen"], trainer.engine.tokenizer,
                                credit, trainer.cfg.group_size)
    return dataclasses.replace(sb, token_adv=adv, token_w=w)


def logodds_gradients(trainer: GRPOTrainer, samples: Sequence[GRPOSample], contexts: Sequence[Mapping[str, Any]],
                      per_query: int) -> dict[int, dict[str, Tensor]]:
    """query -> name -> the mean gradient of log p(Yes) − log p(No) over the query's first ``per_query``
    contexts, under the trainer's (start) policy."""
    params = trainable(trainer)
    ts = soft_tokens(samples)
    trainer.policy.eval()
    out = {}
    for q, cs in _per_query(contexts, per_query).items():
        trainer.opt.zero_grad(set_to_none=True)
        for c in cs:  # as the loss passes: under the run's precision, through Fabric's backward
            with trainer.fabric.autocast():
                z = context_logodds(trainer.policy, trainer.engine.tokenizer, c, ts)
            trainer.fabric.backward(z / len(cs))
        out[q] = _grads(params)
    trainer.opt.zero_grad(set_to_none=True)
    return out


def _per_query(contexts: Sequence[Mapping[str, Any]], per_query: int) -> dict[int, list[Mapping[str, Any]]]:
    """query -> its first ``per_query`` contexts, by query."""
    by_query: dict[int, list[Mapping[str, Any]]] = {}
    for c in contexts:
        if len(by_query.setdefault(int(c["query"]), [])) < per_query:
            by_query[int(c["query"])].append(c)
    return dict(sorted(by_query.items()))


def applied_moves(trainer: GRPOTrainer, samples: Sequence[GRPOSample], contexts: Sequence[Mapping[str, Any]],
                  per_query: int, updates: Mapping[str, Mapping[str, Tensor]]) -> dict[str, dict[int, float]]:
    """name -> query -> the real change of the query's mean log-odds over its first ``per_query`` contexts when
    ``updates[name]`` is added to the trainable parameters: what ``predicted_moves`` says to first order. The
    parameters are restored by copy after each update."""
    params = trainable(trainer)
    ts = soft_tokens(samples)
    picked = _per_query(contexts, per_query)
    trainer.policy.eval()

    @torch.no_grad()
    def read() -> dict[int, float]:
        return {q: float(np.mean([float(context_logodds(trainer.policy, trainer.engine.tokenizer, c, ts)) for c in cs]))
                for q, cs in picked.items()}

    saved = {n: p.detach().clone() for n, p in params.items()}
    before, out = read(), {}
    for name, update in updates.items():
        with torch.no_grad():
            for n, p in params.items():
                p.add_(update[n])
        after = read()
        out[name] = {q: after[q] - before[q] for q in before}
        with torch.no_grad():
            for n, p in params.items():
                p.copy_(saved[n])
    return out


def adam_first_step(grad: Mapping[str, Tensor], lr: float, eps: float = 1e-8) -> dict[str, Tensor]:
    """AdamW's first update from ``grad`` with no weight decay: m̂ = g, v̂ = g², so −lr g / (|g| + eps)."""
    return {n: -lr * g / (g.abs() + eps) for n, g in grad.items()}


def linear_step(grad: Mapping[str, Tensor], lr: float) -> dict[str, Tensor]:
    """An update linear in ``grad`` at AdamW's first-step scale: −lr g / rms(g), the RMS over every entry of
    every tensor, so its per-weight RMS is lr as the sign-like first step's is. What the step would move if
    the optimiser did not normalise each weight apart: a direction cancelled in g stays cancelled."""
    sq = sum(float(g.double().pow(2).sum()) for g in grad.values())
    n = sum(g.numel() for g in grad.values())
    rms = (sq / max(n, 1)) ** 0.5
    return {k: (-lr * g / rms if rms > 0 else torch.zeros_like(g)) for k, g in grad.items()}


def predicted_moves(update: Mapping[str, Tensor], logodds_grads: Mapping[int, Mapping[str, Tensor]]) -> dict[int, float]:
    """query -> first-order change of its log-odds of Yes under ``update``: Σ update · ∇ log-odds."""
    return {q: float(sum((update[n].double() * g[n].double()).sum() for n in update)) for q, g in logodds_grads.items()}


def cosine(a: Mapping[str, Tensor], b: Mapping[str, Tensor]) -> float:
    """Cosine between two gradients over all their tensors."""
    dot = sum(float((a[n].double() * b[n].double()).sum()) for n in a)
    na = sum(float(a[n].double().pow(2).sum()) for n in a) ** 0.5
    nb = sum(float(b[n].double().pow(2).sum()) for n in b) ** 0.5
    return dot / (na * nb) if na > 0 and nb > 0 else float("nan")


def norm(a: Mapping[str, Tensor]) -> float:
    return sum(float(t.double().pow(2).sum()) for t in a.values()) ** 0.5
