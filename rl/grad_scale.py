"""How a GRPO step's gradient is spread over the policy's kinds of trainable weights.

Why it is logged: AdamW's first steps move each weight by about ``lr`` whatever its gradient, while a step
linear in the gradient (``train.adam_eps`` above |g|) moves it by ``lr g / eps``; which one a recipe takes,
and at what lr, depends on each group's gradient scale. On the small policy the 11 protocol rows carry most
of the squared norm in a few thousand entries, the LoRA adapter the rest in millions
(configs/grpo_check/smollm2-135m-linear.yaml), so one number (``policy/grad_norm``) hides it. Every step
logs, per group, before clipping:

- ``policy/grad_share/<group>``: its share of the squared gradient norm (the groups sum to 1);
- ``policy/grad_rms/<group>``: sqrt(|g|^2 / entries), the scale an eps must exceed for a linear step;
- ``policy/grad_mean_abs/<group>``: |g|_1 / entries. A linear step at ``lr_lin`` and eps changes the loss,
  to first order, by (lr_lin / eps) |g|^2, a sign-like one at ``lr`` by lr |g|_1; they match at
  lr_lin = lr x eps x mean_abs / rms^2.

The groups are named by ``param_group``. Under a sharded strategy (FSDP, DeepSpeed) a rank holds a shard of
each gradient, so the trainer logs none there; under DDP every rank holds the averaged gradient.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch

# (group, substrings of a parameter's name): the first that matches names it
PARAM_GROUPS = (("rows", ("trainable_tokens",)), ("projector", ("projector.",)), ("adapter", ("lora_",)))
GROUPS = (*(group for group, _ in PARAM_GROUPS), "base")


def param_group(name: str) -> str:
    """``rows`` (the protocol tokens' trainable embedding rows), ``projector`` (the soft-token projector),
    ``adapter`` (LoRA) or ``base`` (any other trained weight: a full fine-tune's)."""
    return next((group for group, keys in PARAM_GROUPS if any(k in name for k in keys)), "base")


def grad_scales(named: Iterable[tuple[str, torch.nn.Parameter]]) -> dict[str, float]:
    """Per ``param_group`` of the trainable parameters with a gradient: ``policy/grad_share/<g>``,
    ``policy/grad_rms/<g>`` and ``policy/grad_mean_abs/<g>`` (module docstring). Empty when none has one."""
    sums: dict[str, list[torch.Tensor]] = {}  # group -> per tensor [|g|^2, |g|_1], kept on the device
    n: dict[str, int] = {}
    for name, p in named:
        if not p.requires_grad or p.grad is None:
            continue
        g, grad = param_group(name), p.grad.detach().float()
        sums.setdefault(g, []).append(torch.stack([grad.pow(2).sum(), grad.abs().sum()]))
        n[g] = n.get(g, 0) + grad.numel()
    if not n:
        return {}
    groups = list(n)
    sq, l1 = torch.stack([torch.stack(sums[g]).sum(0) for g in groups]).cpu().double().unbind(1)  # one sync
    total = float(sq.sum())
    out: dict[str, float] = {}
    for i, g in enumerate(groups):
        out[f"policy/grad_share/{g}"] = float(sq[i]) / total if total > 0 else math.nan
        out[f"policy/grad_rms/{g}"] = math.sqrt(float(sq[i]) / n[g])
        out[f"policy/grad_mean_abs/{g}"] = float(l1[i]) / n[g]
    return out
