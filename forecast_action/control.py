"""The control loss: a differentiable surrogate of "g(decoded) has the requested value" (issue 21).

L_TS only ever conditions the decoder on the realised a* of a window (or a part of it). For most
windows the realised profile is the history's usual one, so a request the future did not take
("high volatility" in a calm window, "up" in a falling one) is never seen with a target, and the
decoder learns to ignore such fields. The control loss trains on counterfactual actions (another
window's a*, or one random field value) and asks the decoded distribution itself to have the
requested profile.

Surrogate. g(decoded) is the per-field consensus (mode) of g over sample paths of the close
(``derive.actions_from_forecast``); the paths are r_s = μ_s + σ_s ε_s (``ts_encoder.sampling``). So we
draw M reparameterised paths, compute g's statistics on them exactly as ``derive.path_features`` does
(``path_stats``; tested equal), and replace g's hard binning at the train-fitted cut points (c1, c2)
by soft memberships with edge width T = temperature · (c2 - c1):

    log P(low) = log σ(-z1),  log P(middle) = log σ(z1) + log σ(-z2),  log P(high) = log σ(z2),
    z_k = (f - c_k) / T.

The loss of one requested field value is -log (1/M Σ_m P_m(value)): the negative log of the share of
sample paths whose profile has the value, which is what the mode of g over paths counts; it stops at
``share_target`` (a plurality is all the mode needs; more makes the distribution over-confident). Products of
log-sigmoids keep a gradient even when no path is in the bin yet (d log σ(z)/dz → 1 as z → -∞). The
loss reaches μ (direction, drawdown, trend) and σ (volatility, range, tail risk) through the same paths,
so a volatility field can only be satisfied by widening or narrowing the predictive distribution.

Direction uses the same form on end_change_pct with cuts (-flat_pct, +flat_pct): down / flat / up.
Fields g decides by a rank statistic or an argmax (monotonicity, peak / trough timing) have no
useful smooth surrogate here and get no control term; numeric fields get none either.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from forecast_action.derive import ActionThresholds
from forecast_action.encoder import CODE_FIELDS, ActionBatch, drop_fields
from forecast_action.schema import FIELD_SPECS

# field -> (statistic of path_stats, bin position (0 low, 1 middle, 2 high) of each value code)
CONTROLLED: dict[str, tuple[str, tuple[int, ...]]] = {
    "direction": ("end_change_pct", (2, 0, 1)),  # values (up, down, flat)
    "volatility_level": ("volatility", (0, 1, 2)),
    "range_width_bin": ("range_pct", (0, 1, 2)),
    "max_drawdown_bin": ("drawdown", (0, 1, 2)),
    "tail_risk_level": ("tail_risk", (0, 1, 2)),
    "trendline_fit": ("trend_r2", (0, 1, 2)),
}
_CLOSE = 1  # row of TSOutput.mu / sigma holding the close log return


@dataclass(frozen=True)
class ControlTarget:
    """One controlled field as the loss sees it: its column in ``ActionBatch.codes``, g's cut points on
    its statistic and the bin position of each value code."""

    field: str
    column: int
    stat: str
    cuts: tuple[float, float]
    position: tuple[int, ...]

    @classmethod
    def all(cls, thresholds: ActionThresholds) -> tuple[ControlTarget, ...]:
        out = []
        for f, (stat, pos) in CONTROLLED.items():
            cuts = (-thresholds.flat_pct, thresholds.flat_pct) if f == "direction" else thresholds.cuts[stat]
            out.append(cls(f, CODE_FIELDS.index(f), stat, (float(cuts[0]), float(cuts[1])), pos))
        return tuple(out)


def path_stats(mu: Tensor, sigma: Tensor, eps: Tensor) -> dict[str, Tensor]:
    """g's statistics of M reparameterised close paths per window, as ``derive.path_features`` defines
    them (start close = 1: every statistic used here is scale-free).

    mu, sigma: [B, S] close log-return mean / std; eps: [B, M, S] standard normal -> each [B, M]."""
    r = mu[:, None, :] + sigma[:, None, :] * eps  # [B, M, S]
    p = torch.cat([torch.ones_like(r[..., :1]), torch.exp(torch.cumsum(r, dim=-1))], dim=-1)  # [B, M, S+1]
    close = p[..., 1:]
    runmax = torch.cummax(p, dim=-1).values
    t = torch.arange(p.shape[-1], dtype=p.dtype, device=p.device)
    tc, pc = t - t.mean(), p - p.mean(dim=-1, keepdim=True)
    syy = (pc**2).sum(-1)
    r2 = (pc @ tc) ** 2 / ((tc**2).sum() * syy.clamp_min(1e-30))
    return {
        "end_change_pct": 100.0 * (close[..., -1] - 1.0),
        "range_pct": 100.0 * (close.max(-1).values - close.min(-1).values),
        "volatility": r.std(-1, unbiased=False),
        "drawdown": ((runmax - p) / runmax).max(-1).values,
        "tail_risk": -r.min(-1).values,
        "trend_r2": torch.where(syy > 0, r2, torch.zeros_like(r2)),
    }


def soft_bin_logprob(f: Tensor, cuts: tuple[float, float], temperature: float) -> Tensor:
    """f: [...] statistic -> [..., 3] soft log-memberships of the bins (low, middle, high) at ``cuts``."""
    t = temperature * (cuts[1] - cuts[0])
    z1, z2 = (f - cuts[0]) / t, (f - cuts[1]) / t
    return torch.stack([F.logsigmoid(-z1), F.logsigmoid(z1) + F.logsigmoid(-z2), F.logsigmoid(z2)], dim=-1)


def control_loss(mu: Tensor, sigma: Tensor, requested: ActionBatch, thresholds: ActionThresholds,
                 eps: Tensor, temperature: float, share_target: float = 1.0) -> Tensor:
    """Mean over (window, requested controlled field) of max(0, log(share_target) - log(share)), share =
    the (soft) share of the M paths in the requested bin.

    mu, sigma: [B, S] close log-return heads of the decoder run on ``requested``; eps: [B, M, S].
    ``share_target`` < 1 stops the push once that share of paths is in the bin: the mode over paths
    (what g(decoded) takes) needs only a plurality, and pushing every path into the bin makes the
    decoded distribution over-confident (measured: a direction-only request then worsens CRPS).
    Zero (with a gradient path) when no controlled field is requested."""
    stats = path_stats(mu, sigma, eps)
    m = eps.shape[1]
    terms, counts = [], []
    for tgt in ControlTarget.all(thresholds):
        code = requested.codes[:, tgt.column]  # [B]; n_bins = missing
        given = code < FIELD_SPECS[tgt.field].n_bins
        pos = torch.tensor(tgt.position, device=code.device)[code.clamp_max(len(tgt.position) - 1)]  # [B]
        lp = soft_bin_logprob(stats[tgt.stat], tgt.cuts, temperature)  # [B, M, 3]
        lp = lp.gather(-1, pos[:, None, None].expand(-1, m, 1)).squeeze(-1)  # [B, M]
        log_share = torch.logsumexp(lp, dim=-1) - math.log(m)  # [B]
        nll = (math.log(share_target) - log_share).clamp_min(0.0)
        terms.append((nll * given).sum())
        counts.append(given.sum())
    n = torch.stack(counts).sum()
    return torch.stack(terms).sum() / n.clamp_min(1) + 0.0 * mu.sum()


def counterfactual_actions(teacher: ActionBatch, p_single: float,
                           generator: torch.Generator | None = None) -> ActionBatch:
    """Actions the future of the window did not (necessarily) take, [B] rows.

    With prob ``p_single`` a row is one controlled field at a uniformly drawn value (the single-field
    requests the controllability benchmark makes; extremes as often as middles); otherwise it is the
    a* of another window of the batch (a random permutation) under field dropout, so requested
    profiles are joint, internally consistent and as varied as the data's."""
    b, dev = len(teacher), teacher.codes.device
    perm = torch.randperm(b, generator=generator, device=dev)
    other = drop_fields(ActionBatch(teacher.codes[perm], teacher.numeric[perm], teacher.mask[perm]), 0.0, generator)
    missing = torch.tensor([FIELD_SPECS[f].n_bins for f in CODE_FIELDS], device=dev)
    cols = torch.tensor([CODE_FIELDS.index(f) for f in CONTROLLED], device=dev)
    col = cols[torch.randint(len(cols), (b,), generator=generator, device=dev)]  # [B]
    value = (torch.rand(b, generator=generator, device=dev) * missing[col]).long()  # uniform over the field's values
    single_codes = missing.expand(b, -1).clone()
    single_codes[torch.arange(b, device=dev), col] = value
    single = (torch.rand(b, generator=generator, device=dev) < p_single)[:, None]
    codes = torch.where(single, single_codes, other.codes)
    mask = other.mask * (~single).float()
    return ActionBatch(codes, other.numeric * mask, mask)


def close_heads(mu: Tensor, sigma: Tensor) -> tuple[Tensor, Tensor]:
    """TSOutput.mu / sigma [B, 3, S] -> the close rows [B, S] the sample paths are drawn from."""
    return mu[:, _CLOSE], sigma[:, _CLOSE]
