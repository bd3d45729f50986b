"""How fast could the check's optimiser move each query's answer, if its gradient pointed at the gold?

``bench grpo_check`` reads how far GRPO moves each training query's answer log-odds toward its gold on
fixed start contexts (``rl.probe.answer_contexts``): ~0.03 nats a step on the balanced queries, where the
start's log-odds sit ~2 nats on the wrong side for half of them. Before blaming GRPO's credit, its noise or
its length, this asks what the same trainer (its policy, trainable weights, AdamW, lr and clipping) does
with an oracle's gradient in place of GRPO's loss: the supervised loss of the gold answer at each context's
decision point,

    L = mean over queries q of mean over q's train contexts c of softplus(−s_q z_c),  s_q = +1 (gold Yes), −1 (No)

(z_c = log p(Yes) − log p(No) for the word written there; −log σ(s_q z_c) is the cross-entropy of the gold
among the two words), every query weighted equally. That does not make its shared shift ~0 on balanced golds:
the cross-entropy pushes hardest on the answers that are wrong, so while one gold's queries are mostly wrong
the step moves every answer toward that gold (the small policy's first oracle step: ~2.5 nats toward No).
Unlike GRPO's loss it has no KL term to the start (the check's beta): at the check's KL (~1e-2) that term is
small, and leaving it out keeps the bound an upper one.
Each query's contexts are split in two (``split_contexts``): the oracle trains on one half and its moves are
read on the other, so a move there is one that carries to rollouts it never saw (the check's probes sample
fresh rollouts); the train half's moves (memorised) are kept beside them.

It is an upper bound of a kind, not a forecast: GRPO's answer signal reaches only the groups that hold both
answers, through ~1% of the tokens, with a sign that is noisy; the oracle has the answer on every context,
every step. If even the oracle needs many of the check's steps to turn the answers, the step budget and the
learning rate block the check whatever the credit; if it turns them in a few, the gradient GRPO builds is
what is missing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from rl.answer_span import context_logodds
from rl.soft_tokens import soft_tokens
from rl.trainer import GRPOSample, GRPOTrainer


def gold_sign(gold: Any) -> float:
    """+1 for a gold "Yes", −1 for a gold "No" (the oracle's target side of the log-odds of Yes)."""
    g = str(gold).strip().lower()
    if g not in ("yes", "no"):
        raise ValueError(f"the gold-answer oracle needs yes/no golds, got {gold!r}")
    return 1.0 if g == "yes" else -1.0


def split_contexts(contexts: Sequence[Mapping[str, Any]]) -> tuple[list[int], list[int]]:
    """(train, read): indices into ``contexts``, each query's contexts alternating read, train, read, ... in
    their order, so both halves hold every query that has two or more contexts. A query with one context
    gives it to the read half only (the oracle then never trains on that query; its reading says how far the
    other queries' training carried to it). Raises when fewer than 2 queries of either gold have a train context."""
    train: list[int] = []
    read: list[int] = []
    seen: dict[int, int] = {}
    for i, c in enumerate(contexts):
        k = seen.get(int(c["query"]), 0)
        (read if k % 2 == 0 else train).append(i)
        seen[int(c["query"])] = k + 1
    golds = {int(contexts[i]["query"]): gold_sign(contexts[i]["gold"]) for i in train}
    for side, name in ((1.0, "Yes"), (-1.0, "No")):
        if sum(1 for s in golds.values() if s == side) < 2:
            raise ValueError(f"the oracle needs >= 2 gold-{name} queries with two or more contexts each, got "
                             f"{sum(1 for s in golds.values() if s == side)} (queries with contexts: {dict(sorted(seen.items()))})")
    return train, read


def _query_weights(contexts: Sequence[Mapping[str, Any]], idx: Sequence[int]) -> dict[int, float]:
    """context index -> its weight in the oracle's loss: 1 / (queries x the query's contexts)."""
    per_query: dict[int, int] = {}
    for i in idx:
        per_query[int(contexts[i]["query"])] = per_query.get(int(contexts[i]["query"]), 0) + 1
    return {i: 1.0 / (len(per_query) * per_query[int(contexts[i]["query"])]) for i in idx}


@torch.no_grad()
def read_logodds(trainer: GRPOTrainer, ts: torch.Tensor | None, contexts: Sequence[Mapping[str, Any]],
                 idx: Sequence[int]) -> list[float]:
    """[len(idx)] z on the given contexts under the trainer's current policy (eval mode, as the check reads)."""
    trainer.policy.eval()
    return [float(context_logodds(trainer.policy, trainer.engine.tokenizer, contexts[i], ts)) for i in idx]


def oracle_step(trainer: GRPOTrainer, ts: torch.Tensor | None, contexts: Sequence[Mapping[str, Any]],
                train: Sequence[int]) -> dict[str, Any]:
    """One optimiser step of the trainer on the oracle's loss over the ``train`` contexts, clipped as the
    trainer clips. Returns the loss, the gradient norm before clipping and z on ``train`` before the step
    (read from the same forward pass, so the train half costs no extra pass)."""
    w = _query_weights(contexts, train)
    trainer.policy.eval()  # the check's loss pass runs in the rollouts' mode (no dropout): so does the oracle's
    trainer.opt.zero_grad(set_to_none=True)
    loss, z_before = 0.0, []
    for i in train:  # one context's graph at a time: memory of one forward
        with trainer.fabric.autocast():  # as the loss passes: the run's precision, Fabric's backward
            z = context_logodds(trainer.policy, trainer.engine.tokenizer, contexts[i], ts)
        li = torch.nn.functional.softplus(-gold_sign(contexts[i]["gold"]) * z) * w[i]
        trainer.fabric.backward(li)
        loss += float(li.detach())
        z_before.append(float(z.detach()))
    params = [p for p in trainer.policy.parameters() if p.requires_grad]
    gnorm = float(torch.linalg.vector_norm(torch.stack([p.grad.detach().norm() for p in params if p.grad is not None])))
    if trainer.cfg.max_grad_norm:
        trainer.fabric.clip_gradients(trainer.policy, trainer.opt, max_norm=trainer.cfg.max_grad_norm,
                                      error_if_nonfinite=False)
    trainer.opt.step()
    trainer.sched.step()
    trainer.opt.zero_grad(set_to_none=True)
    return {"loss": loss, "grad_norm": gnorm, "train_logodds": z_before}


def run_oracle(trainer: GRPOTrainer, samples: Sequence[GRPOSample], contexts: Sequence[Mapping[str, Any]],
               steps: int, log: Callable[[str], None] = print, save_every: int = 1) -> list[dict[str, Any]]:
    """Train ``trainer`` ``steps`` oracle steps and read z after each: a record per step k = 0 .. steps
    ({step, read_logodds [R], train_logodds [T], loss, grad_norm, time_s, train, read}: step 0 is the start,
    its loss the first step's; ``train`` / ``read`` index ``contexts``; ``time_s`` the wall seconds of the step
    that led to it, its reading included). Resumable: the records live in ``trainer.history`` and
    ``trainer.save()`` writes them with the policy and AdamW every ``save_every`` steps, so a rerun after ``trainer.resume()`` goes on from
    there and does exactly what the uninterrupted run did."""
    if steps < 1:
        raise ValueError(f"oracle steps must be >= 1, got {steps}")
    train, read = split_contexts(contexts)
    ts = soft_tokens(samples)
    history = trainer.history
    if not history:
        history.append({"step": 0, "read_logodds": read_logodds(trainer, ts, contexts, read)})
    while trainer.step < steps:
        t0 = time.perf_counter()
        out = oracle_step(trainer, ts, contexts, train)
        history[-1].update(train_logodds=out["train_logodds"], loss=out["loss"], grad_norm=out["grad_norm"])
        trainer.step += 1
        history.append({"step": trainer.step, "read_logodds": read_logodds(trainer, ts, contexts, read),
                        "time_s": time.perf_counter() - t0})
        log(f"[oracle] step {trainer.step}/{steps}: loss {out['loss']:.4f}, grad norm {out['grad_norm']:.4g}")
        if trainer.step % save_every == 0 or trainer.step == steps:
            trainer.save()
    last = history[-1]
    if "train_logodds" not in last:  # the end's train half: one extra read
        last["train_logodds"] = read_logodds(trainer, ts, contexts, train)
        last["loss"] = last["grad_norm"] = None  # no step was taken from the end
    return [dict(h, train=train, read=read) for h in history]
