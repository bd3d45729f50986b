"""Forecast metrics: Stock-R1 App. C.1 (Eqs. 3-8) plus the scores a probabilistic forecaster owes.

Every benchmark and reward scores a ``Forecast`` against ``Windows`` with this module, so metric
names are the same everywhere (``METRICS``).

Notation: ``N`` windows, horizon ``S`` (the paper's H = 10), ``M`` sample paths; ``c0`` the close at
the decision day t, ``c [N, S]`` the true future close, ``ĉ [N, S]`` the point forecast.

Choices where App. C.1 is ambiguous (each is tested in tests/test_metrics_forecast.py):

* ``z(·)`` (Eqs. 3, 8) z-scores each series by its OWN mean and population std across the horizon
  (``(x - mean_h x) / (std_h x + 1e-8)``). Then ``price_rmse² = 2(1 - ρ)`` with ρ the per-window
  correlation, so a no-skill forecaster scores ≈ √2 = 1.414, exactly the centre of the paper's
  Table 2 column (1.30-1.48) - the evidence for this reading. A flat forecast (random walk) has
  ``z = 0`` and scores exactly 1.0: the metric rewards flatness and says nothing about level.
* ``vol_mape`` (Eq. 8) divides by ``max(z(v), ε_vol)`` with ``ε_vol = 0.1``: with a tiny ε the
  value explodes whenever ``z(v) ≤ 0`` (half the points); 0.1 puts an unskilled forecaster at ≈ 6.7,
  the scale of the paper's column (5.3-8.4). A flat volume forecast scores ≈ 4.6 on this metric.
* ``da_k`` (Eq. 6) uses ``sign`` literally, so a zero predicted return (random walk point forecast)
  never matches and scores ≈ 0. The drift baseline is the "always up" reference.
* ``rv_mae`` / ``rv_r2`` (Eq. 7) use the point path ĉ, as the paper does; a smooth mean path has
  RV ≈ 0. ``rv_mae_dist`` / ``rv_r2_dist`` use the median over sample paths of each path's RV (the
  MAE-optimal point of the predictive RV distribution) - what a probabilistic model should be
  judged on. Note Eq. 7 sums h = 1..S-1 (the c0→c1 step is excluded); we follow it.
* ``crps`` is the CRPS of the cumulative log return ``ln(C_{t+h}/C_t)`` averaged over h, estimated
  from ``close_samples`` with the FAIR (unbiased) ensemble estimator
  ``(1/M) Σ|x_m - y| - 1/(2M(M-1)) Σ_{m,m'} |x_m - x_m'|``, whose expectation is the CRPS of the
  distribution the samples come from, for any M (the plain estimator, ``fair=False``, is biased
  up by ``E|X-X'|/(2M)`` and favours large ensembles). Values are in log-return units.
* ``cov_high95 = P(H ≤ q̂_high)`` (nominal 0.95), ``cov_low05 = P(L ≤ q̂_low)`` (nominal 0.05) per
  day; ``cov_closeK`` (K = 50, 80, 90, 95) is the share of true closes inside the central K% sample
  interval (quantiles ``(1-K/100)/2`` and ``(1+K/100)/2``, linear interpolation, ends included);
  ``cal_err_close90 = |cov_close90 - 0.9|``; ``cal_err_max`` is the largest ``|cov_closeK - K/100|``
  over the four levels. Pinball losses are on simple returns relative to ``c0``: ``pinball_high95``
  / ``pinball_low05`` of the High / Low quantile forecasts, ``pinball_close05`` / ``pinball_close95``
  of the close's 5% / 95% sample quantiles.
* ``pit_values`` (the PIT histogram): ``F̂(c) = #{x_m < c}/M + #{x_m = c}/(2M)`` per window and day,
  uniform on [0, 1] for a calibrated forecaster (up to the 1/M grid).
* Absent channels (``Windows.channels``, e.g. close-only stocks) are never scored: a window without
  volume has NaN ``vol_*`` ingredients, one without high (low) NaN ``cov_high95`` / ``pinball_high95``
  (``cov_low05`` / ``pinball_low05``) and ``pinball``, and those metrics reduce over the windows that
  have the channel (NaN when none has). The forecast may hold NaN exactly there.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from stockr1.types import CLOSE, HIGH, LOW, VOLUME, Forecast, Windows

EPS = 1e-8
EPS_VOL = 0.1
DA_HORIZONS = (3, 5, 10)

# metric -> True when higher is better (everything else: lower is better)
HIGHER_IS_BETTER: dict[str, bool] = {"da_3": True, "da_5": True, "da_10": True, "rv_r2": True, "rv_r2_dist": True}
# metric -> nominal value; these are reported, and compared through cal_err_close90
COVERAGE_LEVELS: tuple[float, ...] = (0.50, 0.80, 0.90, 0.95)
NOMINAL: dict[str, float] = {
    **{f"cov_close{round(100 * k)}": k for k in COVERAGE_LEVELS}, "cov_high95": 0.95, "cov_low05": 0.05,
}


def znorm(x: np.ndarray) -> np.ndarray:
    """Instance normalisation across the last axis: [N, S] -> [N, S] (see module docstring)."""
    x = np.asarray(x, dtype=np.float64)
    return (x - x.mean(-1, keepdims=True)) / (x.std(-1, keepdims=True) + EPS)


def simple_returns(c: np.ndarray, c0: np.ndarray) -> np.ndarray:
    """Eq. 4: ``c [N, S] / max(c0 [N], ε) - 1``."""
    return np.asarray(c, np.float64) / np.maximum(np.asarray(c0, np.float64), EPS)[:, None] - 1.0


def realized_vol(c: np.ndarray) -> np.ndarray:
    """Eq. 7: sum of squared log returns of the close path over h = 1..S-1. [..., S] -> [...]."""
    lc = np.log(np.maximum(np.asarray(c, np.float64), EPS))
    return (np.diff(lc, axis=-1) ** 2).sum(-1)


def crps_ensemble(y: np.ndarray, x: np.ndarray, fair: bool = True) -> np.ndarray:
    """Ensemble CRPS. ``y [...]``, ``x [..., M]`` -> ``[...]``.

    Uses the sorted-sample identity ``Σ_{m,m'}|x_m - x_m'| = 2 Σ_i (2i - M - 1) x_(i)`` (1-based i),
    O(M log M). ``fair=True``: unbiased estimator (denominator ``2M(M-1)``); ``fair=False``: the
    plug-in estimator of the empirical distribution (denominator ``2M²``), as properscoring computes.
    """
    x = np.sort(np.asarray(x, np.float64), axis=-1)
    y = np.asarray(y, np.float64)
    m = x.shape[-1]
    if fair and m < 2:
        raise ValueError("the fair CRPS estimator needs at least 2 samples")
    abs_err = np.abs(x - y[..., None]).mean(-1)
    w = 2.0 * np.arange(1, m + 1) - m - 1
    spread = 2.0 * (x * w).sum(-1)  # Σ_{m,m'} |x_m - x_m'|
    return abs_err - spread / (2.0 * m * (m - 1) if fair else 2.0 * m * m)


def pinball(y: np.ndarray, q: np.ndarray, tau: float) -> np.ndarray:
    """Quantile (pinball) loss ``max(τ(y-q), (τ-1)(y-q))``, elementwise."""
    d = np.asarray(y, np.float64) - np.asarray(q, np.float64)
    return np.maximum(tau * d, (tau - 1.0) * d)


def inside_central(y: np.ndarray, x: np.ndarray, level: float) -> np.ndarray:
    """Is ``y [...]`` inside the central ``level`` interval of the samples ``x [..., M]`` (ends included)?"""
    lo, hi = np.quantile(np.asarray(x, np.float64), [0.5 - level / 2, 0.5 + level / 2], axis=-1)
    y = np.asarray(y, np.float64)
    return (y >= lo) & (y <= hi)


def pit(y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Probability integral transform of ``y [...]`` under the samples ``x [..., M]`` (ties count half)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)[..., None]
    return (x < y).mean(-1) + 0.5 * (x == y).mean(-1)


CHANNEL_OF = {"high": HIGH, "low": LOW, "volume": VOLUME}  # forecast field -> the channel it needs


def _check(forecast: Forecast, windows: Windows) -> None:
    n, s = forecast.close.shape
    if len(windows) != n or windows.future.shape[1] != s:
        raise ValueError(
            f"forecast is [N={n}, S={s}] but windows have N={len(windows)}, S={windows.future.shape[1]}"
        )
    for name in ("close", "close_samples", "high", "low", "volume"):
        a = np.asarray(getattr(forecast, name))
        if name in CHANNEL_OF:  # NaN allowed where the window lacks the channel
            a = a[windows.channels[:, CHANNEL_OF[name]]]
        if not np.all(np.isfinite(a)):
            raise ValueError(f"forecast.{name} has non-finite values")


def _where_observed(ok: np.ndarray, values: np.ndarray) -> np.ndarray:
    """values [N, ...] with the rows where ``ok [N]`` is False set to NaN (an absent channel: not scored)."""
    return values if ok.all() else np.where(ok.reshape((-1,) + (1,) * (values.ndim - 1)), values, np.nan)


def per_window(forecast: Forecast, windows: Windows) -> dict[str, np.ndarray]:
    """Per-window ingredients, ``[N]`` or ``[N, k]``; ``REDUCERS[name]`` turns one into the metric.

    Kept separate so a paired bootstrap can resample windows and recompute every metric exactly.
    """
    _check(forecast, windows)
    c = windows.future[:, :, CLOSE].astype(np.float64)
    c0 = windows.last_close.astype(np.float64)
    ch = np.asarray(forecast.close, np.float64)
    s = c.shape[1]
    out: dict[str, np.ndarray] = {}
    out["price_mape"] = np.abs((ch - c) / c).mean(1)
    out["price_rmse"] = ((znorm(ch) - znorm(c)) ** 2).mean(1)
    r, rh = simple_returns(c, c0), simple_returns(ch, c0)
    out["return_rmse"] = ((rh - r) ** 2).mean(1)
    for k in DA_HORIZONS:
        if k <= s:
            out[f"da_{k}"] = (np.sign(rh[:, k - 1]) == np.sign(r[:, k - 1])).astype(np.float64)
    rv = realized_vol(c)
    rv_pt = realized_vol(ch)
    rv_dist = np.median(realized_vol(forecast.close_samples), axis=1)
    out["rv_mae"] = np.abs(rv_pt - rv)
    out["rv_r2"] = np.stack([rv, rv_pt], 1)
    out["rv_mae_dist"] = np.abs(rv_dist - rv)
    out["rv_r2_dist"] = np.stack([rv, rv_dist], 1)
    has = {k: windows.channels[:, c] for k, c in CHANNEL_OF.items()}  # [N] bool per channel
    v, vh = windows.future[:, :, VOLUME].astype(np.float64), np.asarray(forecast.volume, np.float64)
    v, vh = np.where(has["volume"][:, None], v, 1.0), np.where(has["volume"][:, None], vh, 1.0)  # absent: not used
    zv, zvh = znorm(v), znorm(vh)
    out["vol_mape"] = _where_observed(has["volume"], (np.abs(zvh - zv) / np.maximum(zv, EPS_VOL)).mean(1))
    out["vol_rmse"] = _where_observed(has["volume"], ((zvh - zv) ** 2).mean(1))
    # probabilistic: cumulative log returns of the close from c0
    lr_true = np.log(c / c0[:, None])
    lr_samp = np.log(np.maximum(forecast.close_samples, EPS) / c0[:, None, None])  # [N, M, S]
    out["crps"] = crps_ensemble(lr_true, np.moveaxis(lr_samp, 1, -1)).mean(1)
    samples = np.moveaxis(np.asarray(forecast.close_samples, np.float64), 1, -1)  # [N, S, M]
    inside = {k: inside_central(c, samples, k).mean(1) for k in COVERAGE_LEVELS}
    for k in COVERAGE_LEVELS:
        out[f"cov_close{round(100 * k)}"] = inside[k]
    lo, hi = np.quantile(samples, [0.05, 0.95], axis=-1)
    out["width_close90"] = ((hi - lo) / c0[:, None]).mean(1)
    out["cal_err_close90"] = out["cov_close90"]
    out["cal_err_max"] = np.stack([inside[k] for k in COVERAGE_LEVELS], 1)
    out["pinball_close05"] = pinball(r, simple_returns(lo, c0), 0.05).mean(1)
    out["pinball_close95"] = pinball(r, simple_returns(hi, c0), 0.95).mean(1)
    hi_true, hi_pred = (np.where(has["high"][:, None], a, c0[:, None]) for a in (windows.future[:, :, HIGH], forecast.high))
    lo_true, lo_pred = (np.where(has["low"][:, None], a, c0[:, None]) for a in (windows.future[:, :, LOW], forecast.low))
    out["cov_high95"] = _where_observed(has["high"], (hi_true <= hi_pred).mean(1))
    out["cov_low05"] = _where_observed(has["low"], (lo_true <= lo_pred).mean(1))
    p_hi = pinball(simple_returns(hi_true, c0), simple_returns(hi_pred, c0), 0.95)
    p_lo = pinball(simple_returns(lo_true, c0), simple_returns(lo_pred, c0), 0.05)
    out["pinball_high95"] = _where_observed(has["high"], p_hi.mean(1))
    out["pinball_low05"] = _where_observed(has["low"], p_lo.mean(1))
    out["pinball"] = _where_observed(has["high"] & has["low"], 0.5 * (p_hi + p_lo).mean(1))
    return out


def _rmse(a: np.ndarray) -> float:
    return float(np.sqrt(np.mean(a)))


def _mean(a: np.ndarray) -> float:
    return float(np.mean(a))


def _over_observed(reducer: Callable[[np.ndarray], float]) -> Callable[[np.ndarray], float]:
    """``reducer`` over the windows that have the channel (NaN rows: absent, not scored); NaN if none has."""
    def reduce_observed(a: np.ndarray) -> float:
        a = a[~np.isnan(a)]
        return reducer(a) if a.size else float("nan")
    return reduce_observed


def _r2(pairs: np.ndarray) -> float:
    """``pairs [N, 2]`` = (true, predicted): ``1 - SS_res / SS_tot``."""
    y, p = pairs[:, 0], pairs[:, 1]
    ss_tot = float(((y - y.mean()) ** 2).sum())
    return 1.0 - float(((y - p) ** 2).sum()) / max(ss_tot, 1e-300)


def _cal_err_90(a: np.ndarray) -> float:
    return abs(float(np.mean(a)) - 0.9)


def _cal_err_max(a: np.ndarray) -> float:
    """``a [N, K]``: per-window coverage at ``COVERAGE_LEVELS`` -> the worst ``|coverage - level|``."""
    return float(np.max(np.abs(a.mean(0) - np.asarray(COVERAGE_LEVELS))))


REDUCERS: dict[str, Callable[[np.ndarray], float]] = {
    "price_mape": _mean,
    "price_rmse": _rmse,
    "vol_mape": _over_observed(_mean),
    "vol_rmse": _over_observed(_rmse),
    "return_rmse": _rmse,
    **{f"da_{k}": _mean for k in DA_HORIZONS},
    "rv_mae": _mean,
    "rv_r2": _r2,
    "rv_mae_dist": _mean,
    "rv_r2_dist": _r2,
    "crps": _mean,
    **{f"cov_close{round(100 * k)}": _mean for k in COVERAGE_LEVELS},
    "cal_err_close90": _cal_err_90,
    "cal_err_max": _cal_err_max,
    "width_close90": _mean,
    "cov_high95": _over_observed(_mean),
    "cov_low05": _over_observed(_mean),
    "pinball_high95": _over_observed(_mean),
    "pinball_low05": _over_observed(_mean),
    "pinball": _over_observed(_mean),
    "pinball_close05": _mean,
    "pinball_close95": _mean,
}
METRICS: tuple[str, ...] = tuple(REDUCERS)


def reduce(parts: dict[str, np.ndarray]) -> dict[str, float]:
    """Aggregate ``per_window`` output into ``{metric: value}`` (order of ``METRICS``)."""
    return {k: REDUCERS[k](parts[k]) for k in METRICS if k in parts}


def forecast_metrics(forecast: Forecast, windows: Windows) -> dict[str, float]:
    """All metrics of ``forecast`` against the true futures of ``windows``; names in ``METRICS``."""
    return reduce(per_window(forecast, windows))


def interval_coverage(
    forecast: Forecast, windows: Windows, levels: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Reliability curve of the close: empirical coverage of central sample intervals.

    Returns ``(levels [K], coverage [K])``; a calibrated forecaster lies on the diagonal.
    """
    levels = np.linspace(0.1, 0.9, 9) if levels is None else np.asarray(levels, np.float64)
    c, samples = windows.future[:, :, CLOSE], np.moveaxis(forecast.close_samples, 1, -1)
    return levels, np.array([float(inside_central(c, samples, lev).mean()) for lev in levels])


def pit_values(forecast: Forecast, windows: Windows) -> np.ndarray:
    """``[N, S]`` PIT of each true close under the sampled close paths (for the PIT histogram)."""
    return pit(windows.future[:, :, CLOSE], np.moveaxis(forecast.close_samples, 1, -1))
