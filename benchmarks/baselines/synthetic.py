"""Synthetic OHLCV windows with a known data-generating process, to check baselines are calibrated.

A geometric random walk (optionally GARCH(1,1) volatility) gives a known answer: the 90% interval
of a correct forecaster covers 90% of outcomes and the zero-return forecast is optimal.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from stockr1.data.splits import SplitSpec
from stockr1.data.windows import build_windows
from stockr1.types import CHANNELS, Windows


def random_walk_windows(
    n_tickers: int = 2,
    n_days: int = 700,
    lookback: int = 90,
    horizon: int = 10,
    sigma: float = 0.01,
    garch: tuple[float, float, float] | None = None,
    seed: int = 0,
) -> Windows:
    """Stride-1 windows over ``n_tickers`` simulated series, split 60/20/20 by date with an embargo
    of ``horizon`` days before each boundary (``stockr1.data.build_windows``, as every real source).

    garch: (omega, alpha, beta) of daily log-return variance; None = constant ``sigma``.
    """
    rng = np.random.default_rng(seed)
    dates = pd.date_range("2001-01-01", periods=n_days + 1, freq="D")
    frames = {f"SYN{k}": pd.DataFrame(_ohlcv(rng, n_days + 1, sigma, garch), index=dates, columns=list(CHANNELS))
              for k in range(n_tickers)}
    return build_windows(frames, lookback=lookback, horizon=horizon, split=SplitSpec(val_frac=0.2, test_frac=0.2))


def _ohlcv(rng: np.random.Generator, n: int, sigma: float, garch: tuple[float, float, float] | None) -> np.ndarray:
    """[n, 5] daily OHLCV of one geometric random walk (log-volume AR(1) around 15)."""
    z = rng.standard_normal(n)
    if garch is None:
        vol = np.full(n, sigma)
    else:
        om, al, be = garch
        var = np.empty(n)
        var[0] = om / (1 - al - be)
        for t in range(1, n):
            var[t] = om + al * var[t - 1] * z[t - 1] ** 2 + be * var[t - 1]
        vol = np.sqrt(var)
    r = vol * z - 0.5 * vol**2
    close = 100.0 * np.exp(np.cumsum(r))
    prev = np.concatenate([[100.0], close[:-1]])
    open_ = prev * np.exp(0.1 * vol * rng.standard_normal(n))
    high = np.maximum(open_, close) * np.exp(np.abs(0.5 * vol * rng.standard_normal(n)))
    low = np.minimum(open_, close) * np.exp(-np.abs(0.5 * vol * rng.standard_normal(n)))
    logv = np.empty(n)
    logv[0] = 15.0
    for t in range(1, n):
        logv[t] = 15.0 + 0.7 * (logv[t - 1] - 15.0) + 0.2 * rng.standard_normal()
    return np.stack([open_, high, low, close, np.exp(logv)], 1)
