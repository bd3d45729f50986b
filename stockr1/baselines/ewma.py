"""EWMA volatility (RiskMetrics): the volatility forecast risk desks reach for first."""

from __future__ import annotations

import numpy as np

from stockr1.baselines.base import forecast_from_paths, gaussian_paths
from stockr1.types import CLOSE, Forecast, Windows

LAMBDA = 0.94  # RiskMetrics (J.P. Morgan 1996) daily decay


def ewma_variance(r: np.ndarray, lam: float = LAMBDA, var0: np.ndarray | None = None) -> np.ndarray:
    """Variance of the day after ``r [N, L]`` (daily returns, oldest first): ``σ²_{d+1} = λσ²_d + (1-λ)r_d²``.

    var0: [N] variance of the first day; default the window's mean squared return (zero-mean sample
    variance). With L = 90 its weight is λ^90 ≈ 0.4%, so the choice hardly matters.
    """
    r = np.asarray(r, np.float64)
    var = (r**2).mean(1) if var0 is None else np.asarray(var0, np.float64)
    for t in range(r.shape[1]):
        var = lam * var + (1.0 - lam) * r[:, t] ** 2
    return var


class EWMAVol:
    """Zero-mean i.i.d. Gaussian daily log returns with the RiskMetrics EWMA variance (λ = 0.94) of
    the window's own close log returns, held flat over the horizon (RiskMetrics' square-root-of-time
    rule). No drift: RiskMetrics sets the daily mean to zero. Nothing is fitted (λ is fixed)."""

    name = "ewma"

    def __init__(self, lam: float = LAMBDA) -> None:
        self.lam = lam

    def fit(self, train: Windows, val: Windows | None = None) -> EWMAVol:
        return self

    def predict(self, windows: Windows, n_samples: int = 100, seed: int = 0) -> Forecast:
        rng = np.random.default_rng(seed)
        sig = np.sqrt(ewma_variance(windows.x[:, CLOSE, :], self.lam))
        cum = gaussian_paths(np.zeros(len(windows)), sig, windows.future.shape[1], n_samples, rng)
        return forecast_from_paths(windows, cum, rng)
