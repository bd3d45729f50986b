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
    summed over s and averaged over the batch, so ``loss == Σ λ_name · parts[name]``."""
    w = weights or LossWeights()
    if y.shape[0] != out.mu.shape[0] or y.shape[2] != out.mu.shape[2]:
        raise ValueError(f"y must be [B={out.mu.shape[0]}, 5, S={out.mu.shape[2]}], got {tuple(y.shape)}")
    nll = gaussian_nll(y[:, list(GAUSSIAN_CHANNELS)], out.mu, out.sigma).sum(-1).mean(0)  # [3]
    parts = dict(zip(_NLL_NAMES, nll.unbind(0), strict=True))
    parts["pinball_high"] = pinball(y[:, HIGH] - out.q_high, w.tau_high).sum(-1).mean(0)
    parts["pinball_low"] = pinball(y[:, LOW] - out.q_low, w.tau_low).sum(-1).mean(0)
    loss = (w.open * parts["nll_open"] + w.close * parts["nll_close"] + w.volume * parts["nll_volume"]
            + w.high * parts["pinball_high"] + w.low * parts["pinball_low"])
    if w.close_crps > 0:
        c = GAUSSIAN_CHANNELS.index(CLOSE)
        parts["crps_close"] = gaussian_crps(y[:, CLOSE].cumsum(-1), out.mu[:, c].cumsum(-1),
                                            out.sigma[:, c].pow(2).cumsum(-1).sqrt()).sum(-1).mean(0)
        loss = loss + w.close_crps * parts["crps_close"]
    return loss, parts
