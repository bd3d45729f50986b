"""The baseline interface and the shared step from sampled close paths to a ``Forecast``.

Every baseline models the close (and some the volume); they all derive the High 0.95 / Low 0.05
quantiles the same way, so differences in those columns come from the close distribution alone:
each sampled day's high is ``max(prev close, close) * exp(u)`` with ``u`` bootstrapped from the
window's own history of ``ln(H_d / max(C_{d-1}, C_d))`` (the low likewise with ``min`` and ``L_d``);
the quantile is taken over the sample paths.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from stockr1.types import CLOSE, HIGH, LOW, VOLUME, Forecast, TrainWindows, Windows


class Baseline(Protocol):
    """``fit`` sees only training windows, ``train_only(windows)`` (and may pick hyper-parameters on
    validation windows); a fit that estimates anything from ``train`` refuses a plain ``Windows``;
    ``predict`` returns a predictive distribution for each window's next S days."""

    name: str

    def fit(self, train: TrainWindows, val: Windows | None = None) -> Baseline: ...

    def predict(self, windows: Windows, n_samples: int = 100, seed: int = 0) -> Forecast: ...


def trailing_vol(windows: Windows, n: int) -> np.ndarray:
    """[N] std (ddof=1) of the last ``n`` daily close log returns of each window's history."""
    r = windows.x[:, CLOSE, -n:].astype(np.float64)
    return r.std(axis=1, ddof=1)


def trailing_volume(windows: Windows, n: int = 5) -> np.ndarray:
    """[N, S] flat volume forecast: mean of the last ``n`` days' volume (no volume model)."""
    v = windows.hist[:, -n:, VOLUME].mean(1)
    return np.repeat(v[:, None], windows.future.shape[1], axis=1)


def gaussian_paths(mu: np.ndarray, sigma: np.ndarray, s: int, m: int, rng: np.random.Generator) -> np.ndarray:
    """Cumulative log returns ``[N, M, S]`` of i.i.d. daily N(mu, sigma²); mu, sigma: [N] or [N, S]."""
    n = len(mu)
    mu = np.broadcast_to(np.asarray(mu, np.float64).reshape(n, -1), (n, s))
    sigma = np.broadcast_to(np.asarray(sigma, np.float64).reshape(n, -1), (n, s))
    daily = mu[:, None, :] + sigma[:, None, :] * rng.standard_normal((n, m, s))
    return np.cumsum(daily, axis=2)


def forecast_from_paths(
    windows: Windows,
    cum_logret: np.ndarray,
    rng: np.random.Generator,
    close_point: np.ndarray | None = None,
    volume: np.ndarray | None = None,
) -> Forecast:
    """Price-space ``Forecast`` from cumulative close log returns ``[N, M, S]`` from the last close.

    close_point: [N, S] point forecast; default the sample mean path (the paper's ĉ).
    volume:      [N, S] volume point forecast; default ``trailing_volume``.
    """
    n, m, s = cum_logret.shape
    c0 = windows.last_close.astype(np.float64)
    paths = c0[:, None, None] * np.exp(cum_logret)  # [N, M, S]
    prev = np.concatenate([np.broadcast_to(c0[:, None, None], (n, m, 1)), paths[:, :, :-1]], axis=2)
    h, c = windows.hist[:, :, HIGH], windows.hist[:, :, CLOSE]
    lo_ = windows.hist[:, :, LOW]
    up_ex = np.log(h[:, 1:] / np.maximum(c[:, 1:], c[:, :-1])).clip(min=0.0)  # [N, L-1]
    dn_ex = np.log(lo_[:, 1:] / np.minimum(c[:, 1:], c[:, :-1])).clip(max=0.0)
    pick = rng.integers(0, up_ex.shape[1], size=(n, m, s))
    rows = np.arange(n)[:, None, None]
    highs = np.maximum(prev, paths) * np.exp(up_ex[rows, pick])
    lows = np.minimum(prev, paths) * np.exp(dn_ex[rows, pick])
    return Forecast(
        close=paths.mean(1) if close_point is None else close_point,
        close_samples=paths,
        high=np.quantile(highs, 0.95, axis=1),
        low=np.quantile(lows, 0.05, axis=1),
        volume=trailing_volume(windows) if volume is None else volume,
        uncertainty=np.full(n, np.nan),
    )
