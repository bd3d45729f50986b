"""DLinear and a compact PatchTST trained on training windows; Gaussian residual distributions.

Both map the 5 standardised log-return channels ``x [B, 5, L]`` to ``[B, 5, S]`` channel by
channel (shared weights, channel independence as in both papers) and are trained with MSE on all
channels (the observed ones: an absent channel of a close-only series is not scored). Early stopping picks the epoch on validation loss (never test).

Predictive distribution (they are point forecasters): the cumulative close log-return residual at
step h, divided by the window's trailing 60-day volatility, has variance ``g_h`` measured on the
validation windows (held-out residuals; training residuals would be optimistic). Sample paths add
independent Gaussian increments of variance ``σ_trail² (g_h - g_{h-1})`` to the predicted path, so
the day-h marginal has exactly the calibrated spread and the spread scales with the regime.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from torch import nn

from stockr1.baselines.base import forecast_from_paths, trailing_vol
from stockr1.data.returns import observed_moments
from stockr1.types import CLOSE, VOLUME, Forecast, TrainWindows, Windows, require_train


class DLinearNet(nn.Module):
    """DLinear (Zeng et al. 2023): moving-average trend + remainder, one linear map L -> S each."""

    def __init__(self, lookback: int, horizon: int, kernel: int = 25) -> None:
        super().__init__()
        self.kernel = kernel
        self.trend = nn.Linear(lookback, horizon)
        self.season = nn.Linear(lookback, horizon)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [B, C, L] -> [B, C, S]"""
        b, c, length = x.shape
        pad = (self.kernel - 1) // 2
        xp = torch.cat([x[..., :1].expand(b, c, pad), x, x[..., -1:].expand(b, c, self.kernel - 1 - pad)], -1)
        trend = xp.unfold(-1, self.kernel, 1).mean(-1)  # [B, C, L]
        return self.trend(trend) + self.season(x - trend)


class PatchTSTNet(nn.Module):
    """Compact PatchTST (Nie et al. 2023): non-overlapping patches of each channel -> tokens,
    pre-norm Transformer encoder, flatten head to S. Channel independent."""

    def __init__(
        self, lookback: int, horizon: int, patch: int = 10, d_model: int = 64, n_layers: int = 2,
        n_heads: int = 4, dropout: float = 0.1,
    ) -> None:
        super().__init__()
        self.patch = patch
        self.n_patch = lookback // patch
        self.embed = nn.Linear(patch, d_model)
        self.pos = nn.Parameter(torch.zeros(1, self.n_patch, d_model))
        layer = nn.TransformerEncoderLayer(d_model, n_heads, 2 * d_model, dropout, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.head = nn.Linear(self.n_patch * d_model, horizon)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [B, C, L] -> [B, C, S]; uses the last ``n_patch * patch`` days."""
        b, c, _ = x.shape
        p = x[..., -self.n_patch * self.patch :].reshape(b * c, self.n_patch, self.patch)
        h = self.encoder(self.embed(p) + self.pos)  # [B*C, P, D]
        return self.head(h.flatten(1)).reshape(b, c, -1)


class NeuralBaseline:
    """Trains ``net`` on training windows; see the module docstring for the distribution."""

    def __init__(
        self, name: str, kind: str, max_epochs: int = 30, patience: int = 3, lr: float = 1e-3,
        batch_size: int = 256, seed: int = 0, vol_window: int = 60,
    ) -> None:
        self.name, self.kind = name, kind
        self.max_epochs, self.patience, self.lr, self.batch_size = max_epochs, patience, lr, batch_size
        self.seed, self.vol_window = seed, vol_window
        self.net: nn.Module | None = None
        self.g = None  # [S] calibrated variance ratio of the cumulative close residual
        self.epochs_trained = 0

    def _make_net(self, lookback: int, horizon: int) -> nn.Module:
        if self.kind == "dlinear":
            return DLinearNet(lookback, horizon)
        if self.kind == "patchtst":
            return PatchTSTNet(lookback, horizon)
        raise ValueError(f"unknown neural baseline kind {self.kind!r}; expected dlinear or patchtst")

    def _xy(self, w: Windows) -> tuple[torch.Tensor, torch.Tensor]:
        """Standardised x, y [N, 5, L|S]; an absent channel (NaN) is 0 here: the nets are channel
        independent, so it reaches only its own (unscored) outputs, and ``_mse`` skips it."""
        x = (w.x.astype(np.float64) - self.mean[None, :, None]) / self.std[None, :, None]
        y = (w.y.astype(np.float64) - self.mean[None, :, None]) / self.std[None, :, None]
        if not w.channels.all():
            x, y = (np.where(w.channels[:, :, None], a, 0.0) for a in (x, y))
        return torch.as_tensor(x, dtype=torch.float32), torch.as_tensor(y, dtype=torch.float32)

    @torch.no_grad()
    def _predict_returns(self, w: Windows) -> np.ndarray:
        """[N, 5, S] predicted daily log returns (de-standardised)."""
        self.net.eval()
        x, _ = self._xy(w)
        out = torch.cat([self.net(x[i : i + 1024]) for i in range(0, len(x), 1024)]).double().numpy()
        return out * self.std[None, :, None] + self.mean[None, :, None]

    def fit(self, train: TrainWindows, val: Windows | None = None) -> NeuralBaseline:
        train = require_train(train, "NeuralBaseline.fit")  # its input scaler and weights: train only
        torch.manual_seed(self.seed)
        if train.channels.all():
            self.mean = train.x.astype(np.float64).mean(axis=(0, 2))
            self.std = train.x.astype(np.float64).std(axis=(0, 2)) + 1e-8
        else:  # each channel over the windows that have it
            self.mean, std = observed_moments(train.x.astype(np.float64), train.channels)
            self.std = std + 1e-8
        self.net = self._make_net(train.x.shape[2], train.y.shape[2])
        opt = torch.optim.AdamW(self.net.parameters(), lr=self.lr, weight_decay=0.01)
        xt, yt = self._xy(train)
        mt = _obs_weights(train)
        xv, yv = self._xy(val) if val is not None and len(val) else (xt, yt)
        mv = _obs_weights(val) if val is not None and len(val) else mt
        gen = torch.Generator().manual_seed(self.seed)
        best, best_state, bad = float("inf"), None, 0
        for epoch in range(self.max_epochs):
            self.net.train()
            for idx in torch.randperm(len(xt), generator=gen).split(self.batch_size):
                loss = _mse(self.net(xt[idx]), yt[idx], None if mt is None else mt[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
            self.net.eval()
            with torch.no_grad():
                vl = float(_mse(self.net(xv), yv, mv))
            if vl < best - 1e-6:
                best, best_state, bad, self.epochs_trained = vl, copy.deepcopy(self.net.state_dict()), 0, epoch + 1
            else:
                bad += 1
                if bad >= self.patience:
                    break
        self.net.load_state_dict(best_state)
        calib = val if val is not None and len(val) else train
        resid = np.cumsum(calib.y[:, CLOSE].astype(np.float64) - self._predict_returns(calib)[:, CLOSE], 1)
        sig = trailing_vol(calib, self.vol_window)[:, None]
        self.g = np.maximum.accumulate(np.mean((resid / np.maximum(sig, 1e-8)) ** 2, axis=0))
        return self

    def predict(self, windows: Windows, n_samples: int = 100, seed: int = 0) -> Forecast:
        if self.net is None:
            raise RuntimeError(f"{self.name}: call fit() before predict()")
        rng = np.random.default_rng(seed)
        n, s = len(windows), windows.future.shape[1]
        ret = self._predict_returns(windows)
        mean_path = np.cumsum(ret[:, CLOSE], axis=1)  # [N, S]
        sig = trailing_vol(windows, self.vol_window)[:, None]
        inc = sig * np.sqrt(np.diff(self.g, prepend=0.0))[None, :]  # [N, S]
        cum = mean_path[:, None, :] + np.cumsum(inc[:, None, :] * rng.standard_normal((n, n_samples, s)), 2)
        v0 = windows.last_volume.astype(np.float64)
        volume = (v0[:, None] + 1.0) * np.exp(np.cumsum(ret[:, VOLUME], axis=1)) - 1.0
        return forecast_from_paths(windows, cum, rng, volume=np.maximum(volume, 0.0))


def _obs_weights(w: Windows) -> torch.Tensor | None:
    """[N, 5, 1] float 1 where the channel is observed, or None when every channel is (plain MSE)."""
    return None if w.channels.all() else torch.as_tensor(w.channels[:, :, None], dtype=torch.float32)


def _mse(pred: torch.Tensor, y: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    """MSE over the observed channels only (``weights`` from ``_obs_weights``; None: all of them)."""
    if weights is None:
        return nn.functional.mse_loss(pred, y)
    return ((pred - y) ** 2 * weights).sum() / (weights.sum() * pred.shape[-1])


def DLinear(**kw) -> NeuralBaseline:
    return NeuralBaseline("dlinear", "dlinear", **kw)


def PatchTST(**kw) -> NeuralBaseline:
    return NeuralBaseline("patchtst", "patchtst", **kw)
