"""Post-hoc calibration of the close's predictive spread, fitted once on the VALIDATION split.

The encoder's close paths are Gaussian: at horizon s the cumulative log return is
``m_s + sd_s · w_s`` with ``w_s ~ N(0, 1)``. On held-out data the standardised residual
``z_s = (ln(C_{t+s}/C_t) − m_s) / sd_s`` is neither unit-variance nor Gaussian (index returns have
fat tails: the intervals are too wide at 50% and too narrow at 95%). A calibration is a monotone
map per horizon ``g_s`` that replaces ``w_s`` by ``g_s(w_s)``:

* ``scale``: ``g_s(w) = c_s · w`` with ``c_s = sqrt(mean_i z_{i,s}²)``, the Gaussian maximum-likelihood
  variance multiplier (one number per horizon);
* ``quantile``: ``g_s(w) = Q̂_s(Φ(w))``, the empirical quantile function of ``z_s`` (at the levels
  ``LEVELS``, linear in w between them, so ``scale`` knots give exactly ``c_s · w``; beyond the outermost level the edge knot is scaled by ``w / Φ⁻¹(level)``, i.e.
  a Gaussian tail of the edge's width). On the fitting set the calibrated quantiles are the empirical
  ones, so coverage is right at every level there; the shape can be fat-tailed and skewed.
* ``shape``: the fat-tailed SHAPE without touching the variance: ``g_s(w) = Q̂_u(Φ(w))`` with ``u`` the
  residuals divided by their horizon's RMS (``z_{i,s} / c_s``), pooled over all horizons (S times the data
  of one horizon's tails, one shape for every horizon). The model keeps its own variance; only its
  Gaussian shape is replaced (narrower centre, wider tails for index returns).
* ``scale_shape``: ``c_s · Q̂_u(Φ(w))``: the ``scale`` multiplier and the pooled shape.

Both are stored as knots ``[S, Q]`` over the same ``LEVELS`` (``scale`` as ``c_s · Φ⁻¹(LEVELS)``), so
one ``transform`` serves both and the saved artefact does not depend on the kind. Applying ``g`` to the
standardised noise of each path keeps the paths' dependence across horizons (a Gaussian copula).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor, nn

KINDS = ("none", "scale", "quantile", "shape", "scale_shape")
# dense in the tails, where the 90 / 95% intervals are decided
LEVELS: tuple[float, ...] = (0.005, 0.01, 0.02, 0.025, 0.03, 0.04, *np.round(np.arange(0.05, 0.951, 0.025), 4).tolist(),
                             0.96, 0.97, 0.975, 0.98, 0.99, 0.995)


def _normal_icdf(p: Tensor) -> Tensor:
    return torch.special.ndtri(p)


class SpreadCalibration(nn.Module):
    """Per-horizon monotone map of the standardised close noise; identity until fitted."""

    def __init__(self, horizon: int) -> None:
        super().__init__()
        levels = torch.tensor(LEVELS, dtype=torch.float64)
        self.register_buffer("levels", levels)
        self.register_buffer("knots", _normal_icdf(levels)[None].repeat(horizon, 1))  # [S, Q] identity
        self.register_buffer("fitted", torch.zeros((), dtype=torch.bool))

    @torch.no_grad()
    def fit(self, z: np.ndarray | Tensor, kind: str) -> SpreadCalibration:
        """z: [N, S] standardised residuals of the close's cumulative log return on the fitting split."""
        if kind not in KINDS:
            raise ValueError(f"calibration kind must be one of {KINDS}, got {kind!r}")
        z = torch.as_tensor(np.asarray(z, dtype=np.float64))
        if z.ndim != 2 or z.shape[1] != self.knots.shape[0] or z.shape[0] < 2 or not torch.isfinite(z).all():
            raise ValueError(f"z must be finite [N >= 2, S={self.knots.shape[0]}], got {tuple(z.shape)}")
        gauss = _normal_icdf(self.levels)[None]  # [1, Q]
        if kind == "none":
            self.knots.copy_(gauss.repeat(z.shape[1], 1))
            self.fitted.fill_(False)
            return self
        rms = z.pow(2).mean(0).sqrt()  # [S] c_s
        if kind == "scale":
            knots = rms[:, None] * gauss
        elif kind == "quantile":
            knots = torch.quantile(z, self.levels, dim=0).T.contiguous()  # [S, Q]
        else:  # shape / scale_shape: the quantiles of z / c_s pooled over the horizons
            pooled = torch.quantile((z / rms).flatten(), self.levels)[None]  # [1, Q]
            knots = (rms[:, None] if kind == "scale_shape" else torch.ones_like(rms)[:, None]) * pooled
            knots = knots.contiguous()
        self.knots.copy_(knots)
        self.fitted.fill_(True)
        return self

    def multipliers(self) -> Tensor:
        """[S] the central (25-75%) width of g relative to the identity: c_s for ``scale``."""
        lv = self.levels
        i, j = int(torch.argmin((lv - 0.25).abs())), int(torch.argmin((lv - 0.75).abs()))
        return (self.knots[:, j] - self.knots[:, i]) / (_normal_icdf(lv[j]) - _normal_icdf(lv[i]))

    @torch.no_grad()
    def forward(self, w: Tensor) -> Tensor:
        """w: [..., S] standard-normal noise per horizon -> g_s(w) [..., S] (identity when not fitted)."""
        if not bool(self.fitted):
            return w
        w = w.double()
        zl, knots = _normal_icdf(self.levels), self.knots  # [Q], [S, Q]
        q = zl.numel()
        idx = torch.searchsorted(zl, w.contiguous()).clamp(1, q - 1)  # [..., S]
        s_idx = torch.arange(knots.shape[0]).expand_as(idx)
        lo_k, hi_k = knots[s_idx, idx - 1], knots[s_idx, idx]
        lo_z, hi_z = zl[idx - 1], zl[idx]
        inner = lo_k + (w - lo_z) / (hi_z - lo_z) * (hi_k - lo_k)  # linear in w between the knots
        below = knots[..., 0].expand_as(w) * (w / zl[0])  # Gaussian tail of the edge's width
        above = knots[..., -1].expand_as(w) * (w / zl[-1])
        return torch.where(w < zl[0], below, torch.where(w > zl[-1], above, inner))
