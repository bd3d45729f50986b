"""Forecasting baselines, each with its natural predictive distribution and the same interface:
``fit(train, val=None) -> self`` and ``predict(windows, n_samples, seed) -> stockr1.types.Forecast``.
The interface and the simple ones (random walk, drift) live in ``stockr1.baselines``; the classical
and neural ones here.
"""

from benchmarks.baselines.classical import GARCH11, GJRGARCH, AutoARIMA
from benchmarks.baselines.neural import DLinear, PatchTST
from stockr1.baselines.base import Baseline
from stockr1.baselines.ewma import EWMAVol
from stockr1.baselines.simple import HistoricalDrift, RandomWalk

BASELINES = {
    "random_walk": RandomWalk,
    "drift": HistoricalDrift,
    "auto_arima": AutoARIMA,
    "garch11": GARCH11,
    "gjr_garch_t": GJRGARCH,
    "ewma": EWMAVol,
    "dlinear": DLinear,
    "patchtst": PatchTST,
}

__all__ = ["BASELINES", "Baseline", "AutoARIMA", "DLinear", "EWMAVol", "GARCH11", "GJRGARCH", "HistoricalDrift", "PatchTST", "RandomWalk"]
