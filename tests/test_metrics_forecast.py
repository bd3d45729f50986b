"""Stock-R1 App. C.1 metrics and the probabilistic scores, against hand-computed values."""

import math

import numpy as np
import properscoring as ps
import pytest
import scoringrules as sr

from stockr1.metrics.forecast import (
    METRICS,
    crps_ensemble,
    forecast_metrics,
    interval_coverage,
    per_window,
    pinball,
    pit,
    pit_values,
    realized_vol,
    znorm,
)
from stockr1.types import CLOSE, HIGH, LOW, VOLUME, Forecast, Windows


def make_windows(future_close, c0, future_volume=None, future_high=None, future_low=None):
    """Windows whose only meaningful fields are the ones the metrics read."""
    c = np.asarray(future_close, float)
    n, s = c.shape
    fut = np.zeros((n, s, 5))
    fut[:, :, CLOSE] = c
    fut[:, :, HIGH] = c * 1.01 if future_high is None else future_high
    fut[:, :, LOW] = c * 0.99 if future_low is None else future_low
    fut[:, :, VOLUME] = 1e6 * (1 + np.arange(s)) if future_volume is None else future_volume
    hist = np.ones((n, 4, 5))
    hist[:, -1, CLOSE] = c0
    return Windows(
        ticker=np.array(["T"] * n, dtype=object),
        date=np.arange(n).astype("datetime64[D]").astype("datetime64[ns]"),
        x=np.zeros((n, 5, 4), np.float32),
        y=np.zeros((n, 5, s), np.float32),
        hist=hist,
        future=fut,
        split=np.array(["test"] * n, dtype=object),
    )


def make_forecast(close, samples=None, high=None, low=None, volume=None):
    close = np.asarray(close, float)
    n, s = close.shape
    return Forecast(
        close=close,
        close_samples=np.repeat(close[:, None, :], 3, axis=1) if samples is None else samples,
        high=close * 1.02 if high is None else high,
        low=close * 0.98 if low is None else low,
        volume=np.ones((n, s)) * 1e6 if volume is None else volume,
    )


def test_price_mape_hand_value():
    w = make_windows([[100.0, 200.0, 50.0]], c0=100.0)
    f = make_forecast([[110.0, 180.0, 50.0]])
    assert forecast_metrics(f, w)["price_mape"] == pytest.approx((0.1 + 0.1 + 0.0) / 3)


def test_znorm_and_price_rmse_extremes():
    np.testing.assert_allclose(znorm(np.array([[1.0, 2.0, 3.0]])), [[-math.sqrt(1.5), 0, math.sqrt(1.5)]], atol=1e-6)
    w = make_windows([[101.0, 102.0, 103.0]], c0=100.0)
    # affine copy -> identical z -> 0; reversed -> z(ĉ) = -z(c) -> sqrt(mean(4 z²)) = 2; flat -> 1
    assert forecast_metrics(make_forecast([[5.0, 7.0, 9.0]]), w)["price_rmse"] == pytest.approx(0.0, abs=1e-6)
    assert forecast_metrics(make_forecast([[103.0, 102.0, 101.0]]), w)["price_rmse"] == pytest.approx(2.0, abs=1e-6)
    assert forecast_metrics(make_forecast([[100.0, 100.0, 100.0]]), w)["price_rmse"] == pytest.approx(1.0, abs=1e-6)


def test_return_rmse_hand_value():
    w = make_windows([[101.0, 99.0, 102.0]], c0=100.0)
    f = make_forecast([[100.0, 100.0, 100.0]])
    # r = (.01, -.01, .02), r̂ = 0 -> sqrt((1 + 1 + 4)e-4 / 3)
    assert forecast_metrics(f, w)["return_rmse"] == pytest.approx(math.sqrt(2e-4))


def test_directional_accuracy_uses_kth_cumulative_return():
    true = np.full((2, 10), 100.0)
    true[:, 2], true[:, 4], true[:, 9] = 101.0, 99.0, 101.0  # up at 3, down at 5, up at 10
    pred = np.full((2, 10), 100.0)
    pred[0, [2, 4, 9]] = [102.0, 98.0, 102.0]  # right, right, right
    pred[1, [2, 4, 9]] = [98.0, 98.0, 100.0]  # wrong, right, zero (never matches a nonzero move)
    m = forecast_metrics(make_forecast(pred), make_windows(true, c0=100.0))
    assert (m["da_3"], m["da_5"], m["da_10"]) == (0.5, 1.0, 0.5)


def test_realized_vol_mae_and_r2():
    assert realized_vol(np.array([100.0, 110.0, 99.0])) == pytest.approx(math.log(1.1) ** 2 + math.log(0.9) ** 2)
    true = np.array([[100.0, 110.0, 99.0], [100.0, 100.0, 100.0], [100.0, 105.0, 100.0]])
    pred = np.array([[100.0, 100.0, 100.0], [100.0, 110.0, 100.0], [100.0, 105.0, 100.0]])
    rv, rvh = realized_vol(true), realized_vol(pred)
    m = forecast_metrics(make_forecast(pred), make_windows(true, c0=100.0))
    assert m["rv_mae"] == pytest.approx(np.abs(rvh - rv).mean())
    assert m["rv_r2"] == pytest.approx(1 - ((rv - rvh) ** 2).sum() / ((rv - rv.mean()) ** 2).sum())
    # the c0 -> c1 step is not part of Eq. 7
    assert realized_vol(np.array([200.0, 100.0, 100.0])) == pytest.approx(math.log(0.5) ** 2)


def test_volume_metrics_on_flat_forecast():
    w = make_windows([[100.0, 100.0, 100.0]], c0=100.0, future_volume=np.array([[1.0, 2.0, 3.0]]))
    m = forecast_metrics(make_forecast([[100.0, 100.0, 100.0]], volume=np.full((1, 3), 7.0)), w)
    z = math.sqrt(1.5)  # z(v) = (-z, 0, z), z(v̂) = 0, ε_vol = 0.1
    assert m["vol_mape"] == pytest.approx((z / 0.1 + 0.0 / 0.1 + z / z) / 3, rel=1e-6)
    assert m["vol_rmse"] == pytest.approx(1.0, rel=1e-6)


def test_crps_hand_values_and_estimators():
    x = np.array([-1.0, 1.0])
    # E|X - 0| = 1, Σ|x - x'| over ordered pairs = 4: fair 1 - 4/(2·2·1) = 0, plain 1 - 4/(2·4) = .5
    assert crps_ensemble(np.array(0.0), x) == pytest.approx(0.0)
    assert crps_ensemble(np.array(0.0), x, fair=False) == pytest.approx(0.5)
    assert crps_ensemble(np.array(3.0), np.array([3.0, 3.0, 3.0])) == pytest.approx(0.0)


def test_crps_agrees_with_properscoring_and_scoringrules():
    rng = np.random.default_rng(0)
    y, x = rng.normal(size=50), rng.normal(0.3, 1.5, size=(50, 37))
    np.testing.assert_allclose(crps_ensemble(y, x, fair=False), ps.crps_ensemble(y, x), rtol=1e-10)
    np.testing.assert_allclose(crps_ensemble(y, x, fair=False), sr.crps_ensemble(y, x, estimator="nrg"), rtol=1e-8)
    np.testing.assert_allclose(crps_ensemble(y, x, fair=True), sr.crps_ensemble(y, x, estimator="fair"), rtol=1e-8)


def test_fair_crps_is_unbiased_for_small_ensembles():
    """Mean fair CRPS of 4-member Gaussian ensembles ≈ the closed-form Gaussian CRPS."""
    rng = np.random.default_rng(1)
    y = rng.normal(size=20000)
    x = rng.normal(size=(20000, 4))
    exact = float(np.mean(sr.crps_normal(y, 0.0, 1.0)))
    assert crps_ensemble(y, x).mean() == pytest.approx(exact, rel=0.02)
    assert crps_ensemble(y, x, fair=False).mean() > exact * 1.1  # the plug-in one is biased up


def test_crps_metric_is_on_cumulative_log_returns():
    w = make_windows([[110.0, 121.0]], c0=100.0)
    samples = np.array([[[100.0, 100.0], [121.0, 121.0]]])  # [1, 2, 2]
    f = make_forecast([[110.0, 110.0]], samples=samples)
    y = np.log([1.1, 1.21])
    xs = np.log(np.array([[1.0, 1.21], [1.0, 1.21]]))
    want = np.mean([crps_ensemble(y[h], xs[h]) for h in range(2)])
    assert forecast_metrics(f, w)["crps"] == pytest.approx(want)


def test_coverage_and_pinball_hand_values():
    c = np.array([[100.0, 100.0, 100.0, 100.0]])
    w = make_windows(c, c0=100.0, future_high=np.array([[101.0, 103.0, 101.0, 101.0]]),
                     future_low=np.array([[99.0, 99.0, 97.0, 97.0]]))
    samples = np.linspace(95, 105, 101)[None, :, None] * np.ones((1, 1, 4))
    samples[0, :, 3] += 10.0  # day 4: the 90% interval (105.5..114.5) misses 100
    f = make_forecast(c, samples=samples, high=np.full((1, 4), 102.0), low=np.full((1, 4), 98.0))
    m = forecast_metrics(f, w)
    assert m["cov_close90"] == pytest.approx(0.75)
    assert m["cal_err_close90"] == pytest.approx(0.15)
    assert m["cov_high95"] == pytest.approx(0.75)  # 103 > 102 once
    assert m["cov_low05"] == pytest.approx(0.5)  # 97 <= 98 twice
    # pinball on returns vs c0: high y - q = (-.01, .01, -.01, -.01)
    want_hi = np.mean([0.05 * 0.01, 0.95 * 0.01, 0.05 * 0.01, 0.05 * 0.01])
    want_lo = np.mean([0.95 * 0.01, 0.95 * 0.01, 0.05 * 0.01, 0.05 * 0.01])
    assert m["pinball_high95"] == pytest.approx(want_hi)
    assert m["pinball_low05"] == pytest.approx(want_lo)
    assert m["pinball"] == pytest.approx(0.5 * (want_hi + want_lo))
    assert pinball(np.array(1.0), np.array(0.0), 0.9) == pytest.approx(0.9)
    assert pinball(np.array(0.0), np.array(1.0), 0.9) == pytest.approx(0.1)


def test_coverage_levels_and_close_pinball_hand_values():
    # 11 samples 95..105 each day: central 50% = [97.5, 102.5], 80% = [96, 104], 90% = [95.5, 104.5],
    # 95% = [95.25, 104.75]; true closes 100, 103, 104.6, 105
    c = np.array([[100.0, 103.0, 104.6, 105.0]])
    samples = np.arange(95.0, 106.0)[None, :, None] * np.ones((1, 1, 4))
    m = forecast_metrics(make_forecast(c, samples=samples), make_windows(c, c0=100.0))
    assert (m["cov_close50"], m["cov_close80"], m["cov_close90"], m["cov_close95"]) == (0.25, 0.5, 0.5, 0.75)
    assert m["cal_err_max"] == pytest.approx(0.4)  # |0.5 - 0.9| at 90%
    r = np.array([0.0, 0.03, 0.046, 0.05])  # true simple returns; q05 = -0.045, q95 = +0.045
    assert m["pinball_close05"] == pytest.approx(np.mean(0.05 * (r + 0.045)))  # every y above q05
    assert m["pinball_close95"] == pytest.approx(np.mean([0.05 * 0.045, 0.05 * 0.015, 0.95 * 0.001, 0.95 * 0.005]))
    # pinball on 3 points: y = 1, 2, 3 against q = 2 at tau 0.05 -> 0.95, 0, 0.05
    np.testing.assert_allclose(pinball(np.array([1.0, 2.0, 3.0]), np.array(2.0), 0.05), [0.95, 0.0, 0.05])


def test_pit_hand_values_and_uniform_for_the_true_distribution():
    x = np.array([1.0, 2.0, 3.0, 4.0])
    assert pit(np.array(2.5), x) == 0.5 and pit(np.array(2.0), x) == 0.375 and pit(np.array(9.0), x) == 1.0
    rng = np.random.default_rng(4)
    n, m = 4000, 200
    samples = 100 * np.exp(rng.normal(0, 0.01, (n, m, 1)))
    truth = 100 * np.exp(rng.normal(0, 0.01, (n, 1)))
    u = pit_values(make_forecast(samples.mean(1), samples=samples), make_windows(truth, c0=100.0))
    hist = np.histogram(u, bins=10, range=(0, 1))[0] / u.size
    np.testing.assert_allclose(hist, 0.1, atol=0.02)
    # a forecaster half as wide as the truth piles PIT mass at both ends (a U shape)
    narrow = 100 * np.exp(rng.normal(0, 0.005, (n, m, 1)))
    u2 = pit_values(make_forecast(narrow.mean(1), samples=narrow), make_windows(truth, c0=100.0))
    ends = np.histogram(u2, bins=10, range=(0, 1))[0][[0, -1]] / u2.size
    assert np.all(ends > 0.2)


def test_perfect_forecast_and_metric_names():
    rng = np.random.default_rng(2)
    c = 100 * np.exp(np.cumsum(rng.normal(0, 0.01, (5, 10)), 1))
    w = make_windows(c, c0=100.0)
    f = make_forecast(c, samples=np.repeat(c[:, None], 4, 1), high=c * 1.01, low=c * 0.99,
                      volume=w.future[:, :, VOLUME])
    m = forecast_metrics(f, w)
    assert tuple(m) == METRICS
    for k in ("price_mape", "price_rmse", "return_rmse", "rv_mae", "crps", "vol_rmse", "vol_mape"):
        assert m[k] == pytest.approx(0.0, abs=1e-6), k
    assert m["da_3"] == m["da_5"] == m["da_10"] == 1.0
    assert m["rv_r2"] == pytest.approx(1.0)
    assert m["cov_close90"] == 1.0
    parts = per_window(f, w)
    assert all(len(v) == 5 for v in parts.values())


def test_interval_coverage_of_calibrated_samples():
    rng = np.random.default_rng(3)
    n, m, s = 400, 200, 2
    samples = 100 * np.exp(rng.normal(0, 0.01, (n, m, s)))
    truth = 100 * np.exp(rng.normal(0, 0.01, (n, s)))
    f = make_forecast(samples.mean(1), samples=samples)
    levels, cov = interval_coverage(f, make_windows(truth, c0=100.0))
    np.testing.assert_allclose(cov, levels, atol=0.05)


def test_shape_mismatch_is_a_clear_error():
    w = make_windows([[100.0, 101.0, 102.0]], c0=100.0)
    with pytest.raises(ValueError, match="forecast is"):
        forecast_metrics(make_forecast([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]), w)
    bad = make_forecast([[np.nan, 2.0, 3.0]])
    with pytest.raises(ValueError, match="non-finite"):
        forecast_metrics(bad, w)
