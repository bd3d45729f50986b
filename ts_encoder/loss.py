"""L_TS of Stock-R1 §3.2:

    L_TS = Σ_s [ Σ_{i∈{O,C,V}} λ_i ( (r^i - μ^i)² / (2 σ^i²) + ½ ln σ^i² )
               + Σ_{j∈{H,L}} λ_j ρ_τj(r^j - q^j) ],   ρ_τ(u) = u (τ - 1[u < 0]),

summed over the horizon s = 1..S as written (no ½ ln 2π constant) and averaged over the batch.

Optional (``LossWeights.close_crps`` > 0, default 0 = the paper's loss): + λ Σ_h CRPS(N(m_h, v_h), y_h), the
closed-form Gaussian CRPS of the cumulative close log return y_h = Σ_{s≤h} r^C_s under the model's paths
(m_h = Σ_{s≤h} μ^C_s, v_h = Σ_{s≤h} σ^C_s²): the score ``bench forecast`` ranks forecasters by. Set
``close: 0`` to train the close on it alone.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from stockr1.types import CLOSE, HIGH, LOW
from ts_encoder.config import LossWeights
from ts_encoder.model import GAUSSIAN_CHANNELS, TSOutput

_NLL_NAMES = ("nll_open", "nll_close", "nll_volume")


def pinball(u: Tensor, tau: float) -> Tensor:
    """ρ_τ(u) = u (τ - 1[u < 0]) elementwise, u = target - quantile."""
    return u * (tau - (u < 0).to(u.dtype))


def gaussian_nll(r: Tensor, mu: Tensor, sigma: Tensor) -> Tensor:
    """(r - μ)² / (2σ²) + ½ ln σ², elementwise."""
    return (r - mu) ** 2 / (2 * sigma**2) + torch.log(sigma)


def gaussian_crps(y: Tensor, mu: Tensor, sd: Tensor) -> Tensor:
    """CRPS of N(μ, sd²) at y, elementwise: sd [z (2Φ(z) - 1) + 2φ(z) - 1/√π], z = (y - μ) / sd."""
    z = (y - mu) / sd
    pdf = torch.exp(-0.5 * z**2) / math.sqrt(2 * math.pi)
    cdf = 0.5 * (1 + torch.erf(z / math.sqrt(2)))
    return sd * (z * (2 * cdf - 1) + 2 * pdf - 1 / math.sqrt(math.pi))


def ts_loss(out: TSOutput, y: Tensor, weights: LossWeights | None = None) -> tuple[Tensor, dict[str, Tensor]]:
    """y: [B, 5, S] future log-return channels. Returns (loss, parts); parts are unweighted,
    summed over s and averaged over the batch, so ``loss == Σ λ_name · parts[name]``.

    With ``out.channels`` ([B, 5] bool, from ``TSEncoder.forward(..., channels=)``) an absent channel
    is never scored: its y (NaN) and outputs are replaced before any arithmetic, and each part is the
    average over the rows that observe its channel (0 when no row of the batch does), so neither the
    values of y nor the outputs of an absent channel reach the loss or its gradient."""
    w = weights or LossWeights()
    if y.shape[0] != out.mu.shape[0] or y.shape[2] != out.mu.shape[2]:
        raise ValueError(f"y must be [B={out.mu.shape[0]}, 5, S={out.mu.shape[2]}], got {tuple(y.shape)}")
    obs = out.channels
    if obs is None or bool(obs.all()):
        nll = gaussian_nll(y[:, list(GAUSSIAN_CHANNELS)], out.mu, out.sigma).sum(-1).mean(0)  # [3]
        parts = dict(zip(_NLL_NAMES, nll.unbind(0), strict=True))
        parts["pinball_high"] = pinball(y[:, HIGH] - out.q_high, w.tau_high).sum(-1).mean(0)
        parts["pinball_low"] = pinball(y[:, LOW] - out.q_low, w.tau_low).sum(-1).mean(0)
    else:
        parts = _masked_parts(out, y, obs, w)
    loss = (w.open * parts["nll_open"] + w.close * parts["nll_close"] + w.volume * parts["nll_volume"]
            + w.high * parts["pinball_high"] + w.low * parts["pinball_low"])
    if w.close_crps > 0:
        c = GAUSSIAN_CHANNELS.index(CLOSE)
        parts["crps_close"] = gaussian_crps(y[:, CLOSE].cumsum(-1), out.mu[:, c].cumsum(-1),
                                            out.sigma[:, c].pow(2).cumsum(-1).sqrt()).sum(-1).mean(0)
        loss = loss + w.close_crps * parts["crps_close"]
    return loss, parts


def _observed_mean(per_row: Tensor, obs: Tensor) -> Tensor:
    """per_row [B, ...] -> mean over the rows with obs [B] True (0 when none): the masked part."""
    m = obs.reshape(obs.shape + (1,) * (per_row.ndim - 1))
    return torch.where(m, per_row, 0.0).sum(0) / obs.sum().clamp_min(1)


def _masked_parts(out: TSOutput, y: Tensor, obs: Tensor, w: LossWeights) -> dict[str, Tensor]:
    """The parts of ``ts_loss`` over the observed channels only (obs [B, 5] bool)."""
    g = list(GAUSSIAN_CHANNELS)
    og = obs[:, g, None]  # [B, 3, 1]
    nll = gaussian_nll(torch.where(og, y[:, g], 0.0), torch.where(og, out.mu, 0.0), torch.where(og, out.sigma, 1.0))
    parts = {name: _observed_mean(nll[:, k].sum(-1), obs[:, c]) for k, (name, c) in enumerate(zip(_NLL_NAMES, g, strict=True))}
    for name, c, q, tau in (("pinball_high", HIGH, out.q_high, w.tau_high), ("pinball_low", LOW, out.q_low, w.tau_low)):
        o = obs[:, c, None]
        parts[name] = _observed_mean(pinball(torch.where(o, y[:, c], 0.0) - q, tau).sum(-1), obs[:, c])
    return parts
