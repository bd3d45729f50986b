"""L_TS of Stock-R1 §3.2:

    L_TS = Σ_s [ Σ_{i∈{O,C,V}} λ_i ( (r^i - μ^i)² / (2 σ^i²) + ½ ln σ^i² )
               + Σ_{j∈{H,L}} λ_j ρ_τj(r^j - q^j) ],   ρ_τ(u) = u (τ - 1[u < 0]),

summed over the horizon s = 1..S as written (no ½ ln 2π constant) and averaged over the batch.
"""

from __future__ import annotations

import torch
from torch import Tensor

from stockr1.types import HIGH, LOW
from ts_encoder.config import LossWeights
from ts_encoder.model import GAUSSIAN_CHANNELS, TSOutput

_NLL_NAMES = ("nll_open", "nll_close", "nll_volume")


def pinball(u: Tensor, tau: float) -> Tensor:
    """ρ_τ(u) = u (τ - 1[u < 0]) elementwise, u = target - quantile."""
    return u * (tau - (u < 0).to(u.dtype))


def gaussian_nll(r: Tensor, mu: Tensor, sigma: Tensor) -> Tensor:
    """(r - μ)² / (2σ²) + ½ ln σ², elementwise."""
    return (r - mu) ** 2 / (2 * sigma**2) + torch.log(sigma)


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
    return loss, parts
