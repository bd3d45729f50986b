"""Forecast uncertainty U = Σ_{s,i} σ²_{t+s,i} (Stock-R1 §3.2) and its normalisation to [0, 1].

The paper normalises U "to a bounded range" without saying how. We use the empirical CDF of
``log U`` on the TRAINING split: ``u = F_train(log U)``, linearly interpolated between
``n_knots`` evenly spaced quantiles and clipped to [0, 1] outside them. It is monotone in U, needs
no scale choice, and reads as "the share of training windows that were less uncertain", so the RL
thresholds u_0 / u_hi of App. B.4 are percentiles. The knots are buffers, hence saved in every
checkpoint's state dict.

Note: with i ∈ {O, C, V} as in the paper, the volume term dominates U (daily log-volume changes have
~20x the std of price returns); ``channels`` lets a caller pick e.g. the close only.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from ts_encoder.model import GAUSSIAN_CHANNELS, TSOutput


def raw_uncertainty(out: TSOutput, channels: Sequence[int] = (0, 1, 2)) -> Tensor:
    """[B] U = Σ_s Σ_{i in channels} σ²; channels index rows of ``out.sigma`` (0=O, 1=C, 2=V).

    A channel absent from a row (``out.channels``) adds nothing to that row's U. Choice: U is then over
    fewer channels, so a close-only row's U (close only) is far below an OHLCV row's (where the volume
    dominates) and the two are not comparable under one normaliser; a model of a universe that mixes
    them should use ``channels=(1,)`` (the close, observed everywhere)."""
    sig2 = out.sigma[:, list(channels)].pow(2)
    if out.channels is None or bool(out.channels.all()):
        return sig2.sum(dim=(1, 2))
    obs = out.channels[:, [GAUSSIAN_CHANNELS[c] for c in channels], None]  # [B, len(channels), 1]
    return torch.where(obs, sig2, 0.0).sum(dim=(1, 2))


class UncertaintyNormalizer(nn.Module):
    """Monotone map U -> [0, 1]: empirical CDF of log U on the training split."""

    def __init__(self, n_knots: int = 101) -> None:
        super().__init__()
        if n_knots < 2:
            raise ValueError(f"n_knots must be >= 2, got {n_knots}")
        self.register_buffer("knots", torch.zeros(n_knots, dtype=torch.float64))
        self.register_buffer("fitted", torch.zeros((), dtype=torch.bool))

    @torch.no_grad()
    def fit(self, u: Tensor) -> UncertaintyNormalizer:
        """u: [N] raw uncertainties of training windows (N ≥ 2, all > 0)."""
        u = u.detach().double().flatten()
        if u.numel() < 2 or not torch.all(torch.isfinite(u)) or not torch.all(u > 0):
            raise ValueError(f"need >= 2 finite positive uncertainties to fit, got {u.numel()} values")
        probs = torch.linspace(0, 1, self.knots.numel(), dtype=torch.float64, device=u.device)
        knots = torch.quantile(u.log(), probs)
        # strictly increasing knots keep the map invertible where training data had ties
        knots = knots + torch.arange(knots.numel(), dtype=torch.float64, device=u.device) * 1e-9
        self.knots.copy_(knots)
        self.fitted.fill_(True)
        return self

    @torch.no_grad()
    def forward(self, u: Tensor) -> Tensor:
        """u: [B] raw uncertainties -> [B] in [0, 1] (float32)."""
        if not bool(self.fitted):
            raise RuntimeError("UncertaintyNormalizer is not fitted; call fit() on training-split uncertainties")
        x = u.double().clamp_min(1e-300).log()
        k = self.knots.to(x.device)
        n = k.numel()
        idx = torch.searchsorted(k, x).clamp(1, n - 1)
        lo, hi = k[idx - 1], k[idx]
        frac = ((x - lo) / (hi - lo)).clamp(0, 1)
        return ((idx - 1 + frac) / (n - 1)).clamp(0, 1).float()
