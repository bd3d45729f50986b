"""AutoARIMA (statsforecast) and GARCH(1,1) (arch), each with its own predictive distribution."""

from __future__ import annotations

import numpy as np

from stockr1.baselines.base import forecast_from_paths
from stockr1.baselines.simple import daily_close_returns
from stockr1.types import CLOSE, Forecast, TrainWindows, Windows, require_train

Z80 = 1.2815515655446004  # standard normal 0.90 quantile: the 80% interval half-width in σ


class AutoARIMA:
    """statsforecast AutoARIMA fitted per window on the log close of its history (L points),
    non-seasonal (``season_length=1``: daily index data has no weekly season worth the cost),
    stepwise search, AICc. Its Gaussian prediction intervals give the marginal σ_h of the log price;
    sample paths use independent increments with variance ``σ_h² - σ_{h-1}²`` so each day's marginal
    is exactly ARIMA's. One fit costs ~50 ms on CPU, so the benchmark may score it on a subsample
    (``--max-windows``) - reported beside the table. Nothing is fitted on training windows.
    """

    name = "auto_arima"

    def fit(self, train: Windows, val: Windows | None = None) -> AutoARIMA:
        return self

    def predict(self, windows: Windows, n_samples: int = 100, seed: int = 0) -> Forecast:
        from statsforecast.models import AutoARIMA as _SFAutoARIMA

        rng = np.random.default_rng(seed)
        n, s = len(windows), windows.future.shape[1]
        mean, sd = np.empty((n, s)), np.empty((n, s))
        model = _SFAutoARIMA(season_length=1, seasonal=False)
        for i in range(n):
            y = np.log(windows.hist[i, :, CLOSE].astype(np.float64))
            out = model.forecast(y=y, h=s, level=[80])
            mean[i] = np.asarray(out["mean"])
            sd[i] = (np.asarray(out["hi-80"]) - np.asarray(out["lo-80"])) / (2 * Z80)
        c0 = np.log(windows.last_close.astype(np.float64))
        var = np.maximum.accumulate(np.maximum(sd, 1e-8) ** 2, axis=1)
        inc = np.sqrt(np.diff(var, axis=1, prepend=0.0))  # [N, S]
        noise = np.cumsum(inc[:, None, :] * rng.standard_normal((n, n_samples, s)), axis=2)
        cum = (mean - c0[:, None])[:, None, :] + noise
        return forecast_from_paths(windows, cum, rng)


class GARCH11:
    """Constant-mean GARCH(1,1) with Gaussian innovations on daily close log returns (in %).

    fit: one parameter set per ticker by maximum likelihood on the training return series (a 90-day
    window is too short to fit GARCH; the all-ticker pooled fit serves unseen tickers). predict:
    run the variance recursion over the window's own history (started at the unconditional
    variance; β^L makes the start irrelevant) and simulate ``n_samples`` paths S days ahead.
    """

    name = "garch11"

    def __init__(self) -> None:
        self.params: dict[str, tuple[float, float, float, float]] = {}

    @staticmethod
    def _fit(r: np.ndarray) -> tuple[float, float, float, float]:
        from arch import arch_model

        res = arch_model(100.0 * r, mean="Constant", vol="GARCH", p=1, q=1, dist="normal").fit(disp="off")
        p = res.params
        return float(p["mu"]), float(p["omega"]), float(p["alpha[1]"]), float(p["beta[1]"])

    def fit(self, train: TrainWindows, val: Windows | None = None) -> GARCH11:
        rets = daily_close_returns(require_train(train, "GARCH11.fit"))
        if not rets:
            raise ValueError("GARCH11.fit got no training windows")
        self.params = {k: self._fit(v) for k, v in rets.items() if len(v) >= 250}
        self.params["*"] = self._fit(np.concatenate(list(rets.values())))
        return self

    def predict(self, windows: Windows, n_samples: int = 100, seed: int = 0) -> Forecast:
        rng = np.random.default_rng(seed)
        n, s = len(windows), windows.future.shape[1]
        p = np.array([self.params.get(str(t), self.params["*"]) for t in windows.ticker])  # [N, 4]
        mu, om, al, be = (p[:, j] for j in range(4))
        r = 100.0 * windows.x[:, CLOSE, :].astype(np.float64)  # [N, L]
        var = om / np.maximum(1.0 - al - be, 1e-6)
        for t in range(r.shape[1]):
            var = om + al * (r[:, t] - mu) ** 2 + be * var
        var = np.repeat(var[:, None], n_samples, axis=1)  # [N, M], variance of day t+1
        daily = np.empty((n, n_samples, s))
        for h in range(s):
            eps = np.sqrt(var) * rng.standard_normal((n, n_samples))
            daily[:, :, h] = mu[:, None] + eps
            var = om[:, None] + al[:, None] * eps**2 + be[:, None] * var
        return forecast_from_paths(windows, np.cumsum(daily / 100.0, axis=2), rng)
