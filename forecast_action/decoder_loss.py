"""The decoder's training loss, in one place: standalone training (``forecast_action.module``), the
SFT warm-up and joint SFT (``llm.sft``) all call ``DecoderLoss``, so "the tool used by SFT and GRPO" is
trained the way the standalone decoder is.

    loss = L_TS(decoder(x, drop(a*)), y) + control_weight · L_ctrl(decoder(x, a_cf))

- ``drop(a*)``: field dropout of the realised action (``encoder.drop_fields``): the whole action is
  hidden with prob ``p_none`` (the learned "missing" index of every field), otherwise each field is kept
  at a per-window rate k ~ U(0, 1), so full, partial, single-field and empty actions are all trained.
- ``a_cf``: counterfactual actions (``control.counterfactual_actions``) and L_ctrl the surrogate of
  "g(decoded) has the requested value" (``control.control_loss``). No L_TS on them: the realised future
  is not a sample of a future the window did not take.

Both halves run in one forward of the decoder over the batch twice (the trunk sees the same x).
Before issue 21, joint SFT and its warm-up trained L_TS on the full a* only (``p_none = 0``,
``control_weight = 0``, still ``JointSFT``'s default for a decoder without thresholds) and the
standalone decoder L_TS under dropout (``control_weight = 0``: what a checkpoint without a ``recipe``
hyper-parameter resumes with).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch
from torch import Tensor, nn

from forecast_action.control import close_heads, control_loss, counterfactual_actions
from forecast_action.derive import ActionThresholds
from forecast_action.encoder import ActionBatch, drop_fields
from ts_encoder.config import LossWeights
from ts_encoder.loss import ts_loss
from ts_encoder.model import TSOutput


@dataclass(frozen=True)
class DecoderRecipe:
    """Defaults: the recipe chosen on validation controllability and oracle gain for the tiny decoder
    (configs/forecast_action/tiny_controllable.yaml; the shipped SFT decoder in results/action). p_none: prob. the teacher action is hidden entirely; control_weight: weight of L_ctrl (0 = off);
    p_single: share of counterfactual actions that are one field; control_samples: reparameterised
    paths per window (M); temperature: soft bin edge width as a fraction of the bin's tertile gap;
    share_target: the share of paths in the requested bin beyond which the control loss stops (1 = never);
    field_dropout: train on a random subset of a*'s fields (False: on the full a*, the pre-recipe joint SFT)."""

    p_none: float = 0.2
    control_weight: float = 30.0
    p_single: float = 0.5
    control_samples: int = 32
    temperature: float = 0.1
    share_target: float = 0.7
    field_dropout: bool = True

    def __post_init__(self) -> None:
        if not (0 <= self.p_none <= 1 and 0 <= self.p_single <= 1):
            raise ValueError(f"recipe.p_none={self.p_none} and recipe.p_single={self.p_single} must be in [0, 1]")
        if not 0 < self.share_target <= 1:
            raise ValueError(f"recipe.share_target must be in (0, 1], got {self.share_target}")
        if self.control_weight < 0 or self.control_samples < 1 or not self.temperature > 0:
            raise ValueError(f"recipe: control_weight={self.control_weight} must be >= 0, control_samples="
                             f"{self.control_samples} >= 1, temperature={self.temperature} > 0")


@dataclass
class DecoderLossOutput:
    """total = ts + control_weight * control; out: the decoder output on drop(a*) (h_ts for the policy)."""

    total: Tensor
    ts: Tensor
    control: Tensor
    parts: dict[str, Tensor]
    out: TSOutput


def _rows(out: TSOutput, sl: slice) -> TSOutput:
    return TSOutput(**{f.name: None if getattr(out, f.name) is None else getattr(out, f.name)[sl] for f in fields(out)})


def _cat(a: ActionBatch, b: ActionBatch) -> ActionBatch:
    return ActionBatch(torch.cat([a.codes, b.codes]), torch.cat([a.numeric, b.numeric]), torch.cat([a.mask, b.mask]))


class DecoderLoss:
    """``loss(decoder, x [B, 5, L], y [B, 5, S], teacher: ActionBatch [B], channels=[B, 5] | None)
    -> DecoderLossOutput``; ``channels`` (False = absent) masks channels out of L_TS (the control loss
    reads the close, always observed).

    ``thresholds``: the train-fitted g the control loss bins with (needed when control_weight > 0)."""

    def __init__(self, recipe: DecoderRecipe, thresholds: ActionThresholds | None,
                 weights: LossWeights | None = None) -> None:
        if recipe.control_weight > 0 and thresholds is None:
            raise ValueError("the control loss needs the action thresholds g bins with (recipe.control_weight > 0)")
        self.recipe, self.thresholds, self.weights = recipe, thresholds, weights

    def __call__(self, decoder: nn.Module, x: Tensor, y: Tensor, teacher: ActionBatch,
                 generator: torch.Generator | None = None, channels: Tensor | None = None) -> DecoderLossOutput:
        r, b = self.recipe, x.shape[0]
        given = drop_fields(teacher, r.p_none, generator) if r.field_dropout else teacher
        if r.control_weight == 0:
            out = decoder(x, given, channels)
            ts, parts = ts_loss(out, y, self.weights)
            zero = ts.new_zeros(())
            return DecoderLossOutput(ts, ts, zero, parts, out)
        cf = counterfactual_actions(teacher, r.p_single, generator)
        both = decoder(torch.cat([x, x]), _cat(given, cf), None if channels is None else torch.cat([channels, channels]))
        out, out_cf = _rows(both, slice(0, b)), _rows(both, slice(b, 2 * b))
        ts, parts = ts_loss(out, y, self.weights)
        mu, sigma = close_heads(out_cf.mu, out_cf.sigma)
        eps = torch.randn(b, r.control_samples, mu.shape[-1], generator=generator, device=mu.device, dtype=mu.dtype)
        ctrl = control_loss(mu, sigma, cf, self.thresholds, eps, r.temperature,  # type: ignore[arg-type]
                            r.share_target)
        return DecoderLossOutput(ts + r.control_weight * ctrl, ts, ctrl, parts, out)
