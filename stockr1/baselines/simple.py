"""Random walk and historical drift: the baselines a forecaster of index returns must beat."""

from __future__ import annotations

import numpy as np

from stockr1.baselines.base import forecast_from_paths, gaussian_paths, trailing_vol
from stockr1.metrics.forecast import forecast_metrics
from stockr1.types import CLOSE, Forecast, TrainWindows, Windows, require_train

VOL_WINDOWS = (20, 60, 90)


def pick_vol_window(model, val: Windows | None, candidates: tuple[int, ...] = VOL_WINDOWS) -> int:
    """Trailing-volatility window with the lowest CRPS on validation windows (never test)."""
    cands = [c for c in candidates if c <= val.x.shape[2]] if val is not None and len(val) else []
    if not cands:
        return min(60, model.vol_window)
    scores = {}
    for c in cands:
        model.vol_window = c
        scores[c] = forecast_metrics(model.predict(val, n_samples=64, seed=123), val)["crps"]
    return min(scores, key=scores.get)


class RandomWalk:
    """Zero expected price change; daily log returns ~ N(-σ²/2, σ²) so the price is a martingale.

    σ: std of the last ``vol_window`` daily close log returns of the window (chosen on validation
    among 20/60/90 days). Point forecast: the last close (flat).
    """

    name = "random_walk"

    def __init__(self, vol_window: int = 60) -> None:
        self.vol_window = vol_window

    def fit(self, train: Windows, val: Windows | None = None) -> RandomWalk:
        self.vol_window = pick_vol_window(self, val)
        return self

    def predict(self, windows: Windows, n_samples: int = 100, seed: int = 0) -> Forecast:
        rng = np.random.default_rng(seed)
        s = windows.future.shape[1]
        sig = trailing_vol(windows, min(self.vol_window, windows.x.shape[2]))
        cum = gaussian_paths(-0.5 * sig**2, sig, s, n_samples, rng)
        flat = np.repeat(windows.last_close[:, None].astype(np.float64), s, axis=1)
        return forecast_from_paths(windows, cum, rng, close_point=flat)


def daily_close_returns(train: Windows) -> dict[str, np.ndarray]:
    """Per ticker, the daily close log return of each training decision day, in date order,
    one per date (with stride-1 windows this is the full training return series)."""
    out = {}
    for t in np.unique(train.ticker):
        sel = train.ticker == t
        dates, idx = np.unique(train.date[sel], return_index=True)
        out[str(t)] = train.x[sel][idx, CLOSE, -1].astype(np.float64)
    return out


class HistoricalDrift:
    """Daily log returns ~ N(μ, σ²): μ the ticker's mean daily log return over the training split
    (the long-run drift; all-ticker mean for unseen tickers), σ the trailing volatility (window
    chosen on validation). Point forecast: the mean path ``c0 · exp(h(μ + σ²/2))``."""

    name = "drift"

    def __init__(self, vol_window: int = 60) -> None:
        self.vol_window = vol_window
        self.mu: dict[str, float] = {}
        self.mu_all = 0.0

    def fit(self, train: TrainWindows, val: Windows | None = None) -> HistoricalDrift:
        rets = daily_close_returns(require_train(train, "HistoricalDrift.fit"))
        self.mu = {k: float(v.mean()) for k, v in rets.items()}
        self.mu_all = float(np.concatenate(list(rets.values())).mean()) if rets else 0.0
        self.vol_window = pick_vol_window(self, val)
        return self

    def predict(self, windows: Windows, n_samples: int = 100, seed: int = 0) -> Forecast:
        rng = np.random.default_rng(seed)
        s = windows.future.shape[1]
        sig = trailing_vol(windows, min(self.vol_window, windows.x.shape[2]))
        mu = np.array([self.mu.get(str(t), self.mu_all) for t in windows.ticker])
        cum = gaussian_paths(mu, sig, s, n_samples, rng)
        h = np.arange(1, s + 1)[None, :]
        point = windows.last_close[:, None] * np.exp(h * (mu[:, None] + 0.5 * sig[:, None] ** 2))
        return forecast_from_paths(windows, cum, rng, close_point=point)
