"""Baselines: valid Forecasts, calibration on data with a known answer, no look-ahead."""

import dataclasses

import numpy as np
import pytest
import torch

from benchmarks.baselines import (
    BASELINES,
    GARCH11,
    GJRGARCH,
    AutoARIMA,
    DLinear,
    EWMAVol,
    HistoricalDrift,
    PatchTST,
    RandomWalk,
)
from benchmarks.baselines.neural import DLinearNet, PatchTSTNet
from benchmarks.baselines.synthetic import random_walk_windows
from stockr1.baselines.ewma import ewma_variance
from stockr1.metrics.forecast import forecast_metrics
from stockr1.types import CLOSE, Forecast, train_only

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def rw():
    return random_walk_windows(n_tickers=4, n_days=1000, sigma=0.01, seed=11)


def _valid(f: Forecast, w, m: int) -> None:
    n, s = len(w), w.future.shape[1]
    assert f.close.shape == (n, s) and f.close_samples.shape == (n, m, s)
    for name in ("close", "close_samples", "high", "low", "volume"):
        assert np.all(np.isfinite(getattr(f, name))), name
    assert np.all(f.close_samples > 0)
    med = np.median(f.close_samples, axis=1)
    assert np.all(f.high >= med) and np.all(f.low <= med)


def _no_lookahead(b, w) -> None:
    """Changing every label (future, y) must leave the forecast unchanged."""
    rng = np.random.default_rng(0)
    w2 = dataclasses.replace(w, future=w.future * rng.uniform(0.5, 2.0, w.future.shape), y=w.y + 1.0)
    f1, f2 = b.predict(w, n_samples=16, seed=3), b.predict(w2, n_samples=16, seed=3)
    np.testing.assert_array_equal(f1.close_samples, f2.close_samples)
    np.testing.assert_array_equal(f1.high, f2.high)


def test_registry_names_match():
    assert set(BASELINES) == {"random_walk", "drift", "auto_arima", "garch11", "gjr_garch_t", "ewma", "dlinear",
                              "patchtst"}


@pytest.mark.parametrize("name", ["drift", "garch11", "gjr_garch_t", "dlinear"])
def test_a_baseline_that_estimates_from_train_refuses_anything_but_train_only(rw, name):
    with pytest.raises(TypeError, match="fits on the train split only"):
        BASELINES[name]().fit(rw.split_of("train"), rw.split_of("val"))  # a plain Windows, even of train rows


@pytest.mark.parametrize("cls", [RandomWalk, HistoricalDrift, EWMAVol])
def test_simple_baselines_calibrated_on_random_walk(rw, cls):
    b = cls().fit(train_only(rw), rw.split_of("val"))
    te = rw.split_of("test")
    f = b.predict(te, n_samples=200, seed=0)
    _valid(f, te, 200)
    m = forecast_metrics(f, te)
    assert 0.85 <= m["cov_close90"] <= 0.95
    assert 0.91 <= m["cov_high95"] <= 0.985
    assert 0.015 <= m["cov_low05"] <= 0.09
    _no_lookahead(b, te)


def test_random_walk_is_a_martingale_and_flat(rw):
    te = rw.split_of("test").select(np.arange(0, 680, 10))
    f = RandomWalk(90).predict(te, n_samples=4000, seed=1)
    np.testing.assert_allclose(f.close, np.repeat(te.last_close[:, None], 10, 1))
    # E[C_{t+10}] = C_t: the sample mean ratio is 1 up to Monte Carlo error
    ratio = f.close_samples[:, :, -1].mean(1) / te.last_close
    assert abs(ratio.mean() - 1.0) < 1e-3
    # trailing vol picks up the true σ = 1%
    logret = np.log(f.close_samples[:, :, 0] / te.last_close[:, None])
    assert logret.std(1).mean() == pytest.approx(0.01, rel=0.1)


def test_drift_uses_training_mean_only(rw):
    tr = train_only(rw)
    shifted = dataclasses.replace(tr, x=tr.x + np.float32(0.002))
    d0 = HistoricalDrift().fit(tr)
    d1 = HistoricalDrift().fit(shifted)
    assert d1.mu["SYN0"] - d0.mu["SYN0"] == pytest.approx(0.002, rel=1e-4)
    te = rw.split_of("test")
    assert np.all(d1.predict(te, 8).close[:, -1] > d0.predict(te, 8).close[:, -1])


def test_garch_recovers_persistence_and_is_calibrated():
    w = random_walk_windows(n_tickers=2, n_days=2500, garch=(2e-6, 0.08, 0.9), seed=5)
    g = GARCH11().fit(train_only(w))
    _, _, al, be = g.params["*"]
    assert 0.9 < al + be < 1.0
    te = w.split_of("test")
    f = g.predict(te, n_samples=200)
    _valid(f, te, 200)
    assert 0.85 <= forecast_metrics(f, te)["cov_close90"] <= 0.95
    _no_lookahead(g, te.select(np.arange(20)))


def test_garch_spread_tracks_recent_volatility(rw):
    g = GARCH11().fit(train_only(random_walk_windows(n_tickers=1, n_days=2500, garch=(2e-6, 0.08, 0.9), seed=2)))
    te = rw.split_of("test").select(np.arange(40))
    calm = g.predict(te, 200)
    loud = g.predict(dataclasses.replace(te, x=te.x * np.float32(3.0)), 200)
    spread = lambda f: np.log(f.close_samples[:, :, 0]).std(1).mean()  # noqa: E731
    assert spread(loud) > 2.0 * spread(calm)


def test_ewma_variance_three_steps_by_hand():
    # σ²_2 = .94e-4 + .06·1e-4 = 1e-4; σ²_3 = .94e-4 + .06·4e-4 = 1.18e-4; σ²_4 = .94·1.18e-4 + .06·9e-4
    r = np.array([[0.01, -0.02, 0.03]])
    assert ewma_variance(r, 0.94, np.array([1e-4]))[0] == pytest.approx(0.94 * 1.18e-4 + 0.06 * 9e-4, rel=1e-12)
    # default start: the mean squared return of the window
    v0 = np.mean(r**2)
    want = ((v0 * 0.94 + 0.06e-4) * 0.94 + 0.06 * 4e-4) * 0.94 + 0.06 * 9e-4
    assert ewma_variance(r)[0] == pytest.approx(want, rel=1e-12)


def test_ewma_spread_follows_recent_shocks(rw):
    te = rw.split_of("test").select(np.arange(40))
    x = te.x.copy()
    x[:, CLOSE, -5:] *= 4.0  # a burst in the last 5 days: EWMA reacts, a 60-day std barely
    loud = dataclasses.replace(te, x=x)
    spread = lambda f: np.log(f.close_samples[:, :, 0] / te.last_close[:, None]).std(1).mean()  # noqa: E731
    e_calm, e_loud = EWMAVol().predict(te, 400), EWMAVol().predict(loud, 400)
    r_calm, r_loud = RandomWalk(60).predict(te, 400), RandomWalk(60).predict(loud, 400)
    assert spread(e_loud) / spread(e_calm) > 1.5 > spread(r_loud) / spread(r_calm)


def _garch_data():
    return random_walk_windows(n_tickers=2, n_days=2500, garch=(2e-6, 0.08, 0.9), seed=5)


def test_gjr_fit_ignores_val_and_test_values():
    """No look-ahead in the fit: perturbing every val/test row leaves the fitted parameters unchanged."""
    w = _garch_data()
    rng = np.random.default_rng(1)
    held = w.split != "train"
    x = w.x.copy()
    x[held] = x[held] * rng.uniform(0.2, 5.0, x[held].shape).astype(np.float32)
    w2 = dataclasses.replace(w, x=x, future=w.future * np.where(held, 1.5, 1.0)[:, None, None])
    g1, g2 = GJRGARCH().fit(train_only(w)), GJRGARCH().fit(train_only(w2))
    assert g1.params == g2.params and set(g1.params) == {"SYN0", "SYN1", "*"}
    om, al, ga, be, nu = g1.params["*"]
    assert 0.9 < al + 0.5 * ga + be < 1.0 and nu > 2.0
    te = w.split_of("test")
    f = g1.predict(te, n_samples=200)
    _valid(f, te, 200)
    assert 0.85 <= forecast_metrics(f, te)["cov_close90"] <= 0.95
    _no_lookahead(g1, te.select(np.arange(20)))


def test_auto_arima_intervals_match_random_walk_scale(rw):
    te = rw.split_of("test").select(np.arange(0, 400, 25))  # 16 windows: ~1-2 s
    a = AutoARIMA().fit(train_only(rw))
    f = a.predict(te, n_samples=100)
    _valid(f, te, 100)
    sd10 = np.log(f.close_samples[:, :, -1] / te.last_close[:, None]).std(1)
    # a random walk's 10-day log-return sd is 0.01·√10; ARIMA's interval should be of that order
    assert 0.5 * 0.0316 < np.median(sd10) < 2.0 * 0.0316


def test_dlinear_learns_and_is_calibrated(rw):
    tr, va, te = train_only(rw), rw.split_of("val"), rw.split_of("test")
    b = DLinear(max_epochs=8, patience=2).fit(tr, va)
    assert b.epochs_trained >= 1 and np.all(np.diff(b.g) >= 0)
    f = b.predict(te, n_samples=200)
    _valid(f, te, 200)
    m = forecast_metrics(f, te)
    assert 0.85 <= m["cov_close90"] <= 0.95
    _no_lookahead(b, te.select(np.arange(20)))


def test_neural_nets_shapes_and_dlinear_fits_linear_signal():
    x = torch.randn(4, 5, 90)
    assert DLinearNet(90, 10)(x).shape == (4, 5, 10)
    assert PatchTSTNet(90, 10, d_model=16, n_layers=1, n_heads=2)(x).shape == (4, 5, 10)
    # a learnable linear map: y = mean of the last 5 inputs; DLinear must get near-zero error
    torch.manual_seed(0)
    net = DLinearNet(90, 10)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    xs = torch.randn(512, 1, 90)
    ys = xs[..., -5:].mean(-1, keepdim=True).expand(512, 1, 10)
    first = None
    for _ in range(300):
        loss = torch.nn.functional.mse_loss(net(xs), ys)
        first = float(loss.detach()) if first is None else first
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert float(loss.detach()) < 0.05 * first


def test_patchtst_baseline_runs(rw):
    sub = rw.select(np.arange(0, len(rw), 3))
    b = PatchTST(max_epochs=1).fit(train_only(sub), sub.split_of("val"))
    te = sub.split_of("test")
    f = b.predict(te, n_samples=32)
    _valid(f, te, 32)
    assert f.volume.shape == te.future[:, :, CLOSE].shape


def test_predict_before_fit_is_a_clear_error(rw):
    with pytest.raises(RuntimeError, match="fit"):
        DLinear().predict(rw.split_of("test"))


def test_garch_paths_start_from_the_window_not_an_infinite_unconditional_variance():
    """A maximum-likelihood fit may be integrated (α + γ/2 + β = 1, as six offline stocks are): the first
    simulated day's variance is then ω + (α + γ·1[r<0]) r_L² + β v_L with v_L filtered from the window's
    own mean squared residual, by hand; not ω / 1e-6 decayed by β^L (a daily σ of ~8%)."""
    from benchmarks.baselines.classical import garch_paths

    rng = np.random.default_rng(0)
    r = rng.normal(0.0, 1.0, (1, 90))  # daily returns in %, σ = 1
    p = np.array([[0.0, 0.006, 0.03, 0.0, 0.97, np.inf]])  # integrated: α + β = 1
    v = np.mean(r[0] ** 2)
    for x in r[0]:
        v = 0.006 + 0.03 * x ** 2 + 0.97 * v
    daily = garch_paths(r, p, 20000, 1, np.random.default_rng(1))
    assert np.var(daily[0, :, 0]) == pytest.approx(v, rel=0.05)
    assert 0.5 < v < 2.0  # the window's scale, not the old start's ~60
