"""e_ψ: the action encoder (Stock-R1 §3.3): embed the action's fields, concatenate, MLP -> z_a.

Featurisation (``featurize``), per action:
- every scored categorical/ordinal field -> an index into its values, with one extra "missing" index
  per field (so a partial action is a normal input and "no action" is the all-missing action);
- numeric fields -> scale-free numbers relative to the window's start close c_0 (the decision-day close
  from the data, not the LLM's claim): prices as 100 ln(v / c_0) / 5, percentages / 5, the turning
  point count / 5, clipped to [-10, 10], each with a presence bit. Units of 5% keep a 10-day move O(1).
  ``start_value`` is encoded the same way, so a wrong claimed start shows up as a non-zero feature.

``ActionEncoder`` maps ``ActionBatch`` to ``z_a [B, cond_dim]``: [field embeddings | numeric * mask | mask]
-> Linear -> SiLU -> Linear -> LayerNorm. The decoder feeds z_a to the TS encoder's FiLM hook.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from forecast_action.schema import FIELD_SPECS, SCORED_FIELDS, ForecastAction

CODE_FIELDS: tuple[str, ...] = tuple(f for f in SCORED_FIELDS if FIELD_SPECS[f].kind != "numeric")
NUMERIC_FIELDS: tuple[str, ...] = tuple(f for f in SCORED_FIELDS if FIELD_SPECS[f].kind == "numeric")
_UNIT = 5.0  # percent per feature unit
_CLIP = 10.0


@dataclass(frozen=True)
class ActionEncoderConfig:
    """cond_dim: width of z_a (= the TS encoder's cond_dim); emb_dim: per-field embedding width."""

    cond_dim: int = 64
    emb_dim: int = 8
    hidden: int = 128


@dataclass
class ActionBatch:
    """codes: [B, F_c] long (missing = n_values of the field); numeric: [B, F_n]; mask: [B, F_n] (1 = given)."""

    codes: Tensor
    numeric: Tensor
    mask: Tensor

    def to(self, device: torch.device | str) -> ActionBatch:
        return ActionBatch(self.codes.to(device), self.numeric.to(device), self.mask.to(device))

    def __len__(self) -> int:
        return int(self.codes.shape[0])


def featurize(actions: Sequence[ForecastAction | None], start: np.ndarray | Sequence[float]) -> ActionBatch:
    """B actions (None = no action) and their start closes [B] -> ActionBatch."""
    start = np.asarray(start, dtype=np.float64).reshape(-1)
    if len(actions) != len(start):
        raise ValueError(f"{len(actions)} actions but {len(start)} start prices")
    b = len(actions)
    codes = np.array([[FIELD_SPECS[f].n_bins for f in CODE_FIELDS]] * b, dtype=np.int64).reshape(b, -1)
    num = np.zeros((b, len(NUMERIC_FIELDS)))
    mask = np.zeros((b, len(NUMERIC_FIELDS)))
    for i, a in enumerate(actions):
        if a is None:
            continue
        for j, f in enumerate(CODE_FIELDS):
            v = getattr(a, f)
            if v is not None:
                codes[i, j] = FIELD_SPECS[f].values.index(v)  # type: ignore[union-attr]
        for j, f in enumerate(NUMERIC_FIELDS):
            v = getattr(a, f)
            if v is None:
                continue
            scale = FIELD_SPECS[f].scale
            if scale == "price":
                x = 100.0 * math.log(max(v, 1e-12) / start[i]) if start[i] > 0 else 0.0
            else:
                x = float(v)
            num[i, j] = np.clip(x / _UNIT, -_CLIP, _CLIP)
            mask[i, j] = 1.0
    return ActionBatch(torch.from_numpy(codes), torch.from_numpy(num).float(), torch.from_numpy(mask).float())


def drop_fields(batch: ActionBatch, p_none: float, generator: torch.Generator | None = None) -> ActionBatch:
    """Action dropout for training: with prob ``p_none`` a sample loses its whole action; otherwise each
    field is kept with a per-sample rate k ~ U(0, 1), so single-field, partial and full actions all occur."""
    b = len(batch)
    dev = batch.codes.device
    none = torch.rand(b, 1, generator=generator, device=dev) < p_none
    keep_rate = torch.rand(b, 1, generator=generator, device=dev)
    keep_c = (torch.rand(batch.codes.shape, generator=generator, device=dev) < keep_rate) & ~none
    keep_n = (torch.rand(batch.mask.shape, generator=generator, device=dev) < keep_rate) & ~none
    missing = torch.tensor([FIELD_SPECS[f].n_bins for f in CODE_FIELDS], device=dev)
    codes = torch.where(keep_c, batch.codes, missing.expand_as(batch.codes))
    mask = batch.mask * keep_n.float()
    return ActionBatch(codes, batch.numeric * mask, mask)


class ActionEncoder(nn.Module):
    """``forward(ActionBatch) -> z_a [B, cond_dim]``."""

    def __init__(self, cfg: ActionEncoderConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embeds = nn.ModuleList(nn.Embedding(FIELD_SPECS[f].n_bins + 1, cfg.emb_dim) for f in CODE_FIELDS)
        d_in = len(CODE_FIELDS) * cfg.emb_dim + 2 * len(NUMERIC_FIELDS)
        # The final LayerNorm gives z_a unit scale per dimension: the conditioned heads are zero-initialised
        # linear maps of z_a and Adam moves each weight ~lr per step, so an O(0.1) z_a learns ~10x slower.
        self.mlp = nn.Sequential(nn.Linear(d_in, cfg.hidden), nn.SiLU(), nn.Linear(cfg.hidden, cfg.cond_dim),
                                 nn.LayerNorm(cfg.cond_dim))

    def forward(self, batch: ActionBatch) -> Tensor:
        emb = [e(batch.codes[:, j]) for j, e in enumerate(self.embeds)]
        x = torch.cat([*emb, batch.numeric * batch.mask, batch.mask], dim=-1)
        return self.mlp(x)
