"""One home for every score: forecast metrics (Stock-R1 App. C.1 + probabilistic), paired bootstrap."""

from stockr1.metrics import trading  # noqa: F401  (Sharpe, returns, MDD, beta, win/hit rate)
from stockr1.metrics.forecast import METRICS, forecast_metrics, per_window
from stockr1.metrics.stats import paired_bootstrap

__all__ = ["METRICS", "forecast_metrics", "per_window", "paired_bootstrap"]
