"""AutoARIMA (statsforecast), GARCH(1,1) and GJR-GARCH(1,1,1)-t (arch), each with its own predictive distribution."""

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


def per_ticker_fits(train: TrainWindows, fit, who: str) -> dict:
    """``fit(returns)`` per ticker with at least 250 training returns (a 90-day window is too short to
    fit a GARCH) and on all tickers' returns pooled (key ``"*"``, for unseen tickers)."""
    rets = daily_close_returns(require_train(train, who))
    if not rets:
        raise ValueError(f"{who} got no training windows")
    params = {k: fit(v) for k, v in rets.items() if len(v) >= 250}
    params["*"] = fit(np.concatenate(list(rets.values())))
    return params


def garch_paths(r: np.ndarray, p: np.ndarray, n_samples: int, s: int, rng: np.random.Generator) -> np.ndarray:
    """Daily returns ``[N, M, S]`` (same units as ``r``) of a GJR-GARCH(1,1,1) filtered over each
    window's own history ``r [N, L]`` and simulated S days ahead.

    p: [N, 6] (mu, omega, alpha, gamma, beta, nu) per window; gamma = 0 is GARCH(1,1); nu = inf (every window)
    draws Gaussian innovations, else Student-t scaled to unit variance. The recursion starts at the
    window's own mean squared residual (what ``arch``'s backcast does at the start of a series). Not at
    the unconditional variance ``ω / (1 - α - γ/2 - β)``: maximum likelihood puts the persistence of
    several stocks at 1.000 (BAC, JNJ, JPM, MSFT, PEP, WMT on the offline stocks' train split), where that
    variance does not exist, and the old start (ω / 1e-6) left a daily σ of ~8% after 90 days of β^L decay.
    """
    n = len(r)
    mu, om, al, ga, be, nu = (p[:, j] for j in range(6))
    var = np.mean((r - mu[:, None]) ** 2, axis=1)
    for t in range(r.shape[1]):
        e = r[:, t] - mu
        var = om + (al + ga * (e < 0)) * e**2 + be * var
    var = np.repeat(var[:, None], n_samples, axis=1)  # [N, M], variance of day t+1
    gaussian = bool(np.isinf(nu).all())
    if not gaussian and not (np.isfinite(nu) & (nu > 2.0)).all():
        raise ValueError("garch_paths: nu must be inf for every window or > 2 for every window")
    nu = nu[:, None]
    daily = np.empty((n, n_samples, s))
    for h in range(s):
        if gaussian:
            z = rng.standard_normal((n, n_samples))
        else:
            z = rng.standard_t(nu, size=(n, n_samples)) * np.sqrt((nu - 2.0) / nu)
        eps = np.sqrt(var) * z
        daily[:, :, h] = mu[:, None] + eps
        var = om[:, None] + (al[:, None] + ga[:, None] * (eps < 0)) * eps**2 + be[:, None] * var
    return daily


class GARCH11:
    """Constant-mean GARCH(1,1) with Gaussian innovations on daily close log returns (in %).

    fit: one parameter set per ticker by maximum likelihood on the training return series
    (``per_ticker_fits``). predict: run the variance recursion over the window's own history and
    simulate ``n_samples`` paths S days ahead (``garch_paths``).
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
        self.params = per_ticker_fits(train, self._fit, "GARCH11.fit")
        return self

    def predict(self, windows: Windows, n_samples: int = 100, seed: int = 0) -> Forecast:
        rng = np.random.default_rng(seed)
        mu, om, al, be = np.array([self.params.get(str(t), self.params["*"]) for t in windows.ticker]).T
        p = np.stack([mu, om, al, np.zeros_like(al), be, np.full_like(al, np.inf)], 1)
        daily = garch_paths(100.0 * windows.x[:, CLOSE, :].astype(np.float64), p, n_samples,
                            windows.future.shape[1], rng)
        return forecast_from_paths(windows, np.cumsum(daily / 100.0, axis=2), rng)


class GJRGARCH:
    """Zero-mean GJR-GARCH(1,1,1) with Student-t innovations on daily close log returns (in %):
    ``σ²_{d+1} = ω + (α + γ·1[r_d < 0]) r_d² + β σ²_d`` - volatility reacts more to falls (leverage)
    and the tails are fat. Zero mean: the drift of daily index returns is noise next to σ.

    fit and predict as ``GARCH11``: parameters (ω, α, γ, β, ν) by maximum likelihood on each ticker's
    training return series only, then filtered forward over each window's own history.
    """

    name = "gjr_garch_t"

    def __init__(self) -> None:
        self.params: dict[str, tuple[float, float, float, float, float]] = {}

    @staticmethod
    def _fit(r: np.ndarray) -> tuple[float, float, float, float, float]:
        from arch import arch_model

        res = arch_model(100.0 * r, mean="Zero", vol="GARCH", p=1, o=1, q=1, dist="t").fit(disp="off")
        p = res.params
        return (float(p["omega"]), float(p["alpha[1]"]), float(p["gamma[1]"]), float(p["beta[1]"]),
                float(p["nu"]))

    def fit(self, train: TrainWindows, val: Windows | None = None) -> GJRGARCH:
        self.params = per_ticker_fits(train, self._fit, "GJRGARCH.fit")
        return self

    def predict(self, windows: Windows, n_samples: int = 100, seed: int = 0) -> Forecast:
        rng = np.random.default_rng(seed)
        p = np.array([self.params.get(str(t), self.params["*"]) for t in windows.ticker])  # [N, 5]
        p = np.concatenate([np.zeros((len(p), 1)), p], 1)  # mu = 0
        daily = garch_paths(100.0 * windows.x[:, CLOSE, :].astype(np.float64), p, n_samples,
                            windows.future.shape[1], rng)
        return forecast_from_paths(windows, np.cumsum(daily / 100.0, axis=2), rng)
