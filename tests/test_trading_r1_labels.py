"""Trading-R1 Algorithm 1 labels against an independent loop implementation and hand cases."""

import statistics

import numpy as np
import pandas as pd
import pytest

from rl.methods.trading_r1 import labels as L


def _prices(n=120, seed=0):
    rng = np.random.default_rng(seed)
    return pd.Series(100 * np.exp(np.cumsum(rng.normal(0.0005, 0.01, n))), index=pd.bdate_range("2020-01-01", periods=n))


def _ema_loop(p: list[float], span: int) -> list[float]:
    """pandas ewm(adjust=True): weighted mean with weights (1-a)^i, a = 2/(span+1)."""
    a = 2 / (span + 1)
    return [sum((1 - a) ** i * p[t - i] for i in range(t + 1)) / sum((1 - a) ** i for i in range(t + 1))
            for t in range(len(p))]


def test_literal_algorithm_matches_loop_implementation():
    p = _prices()
    ema = _ema_loop(p.tolist(), 3)
    w = L.weighted_signal(p, forward=False)
    for u in (40, 77, 119):
        total = 0.0
        for tau, wt in ((3, 0.3), (7, 0.5), (15, 0.2)):
            r = [(ema[k] - ema[k - tau]) / ema[k - tau] for k in range(u - 19, u + 1)]
            total += wt * r[-1] / statistics.stdev(r)
        assert w.iloc[u] == pytest.approx(total, rel=1e-10)
    # defined only once R_15 has 20 values: first valid index 15 + 19 = 34
    assert w.iloc[:34].isna().all() and not np.isnan(w.iloc[34])


def test_forward_alignment_uses_the_move_after_t():
    p = _prices()
    lit, fwd = L.weighted_signal(p, forward=False), L.weighted_signal(p, forward=True)
    t = 50
    # the forward value is the weighted sum of each literal S_tau read at t + tau
    ema = p.ewm(span=3).mean()
    expect = 0.0
    for tau, wt in ((3, 0.3), (7, 0.5), (15, 0.2)):
        r = (ema - ema.shift(tau)) / ema.shift(tau)
        expect += wt * (r / r.rolling(20).std()).iloc[t + tau]
    assert fwd.iloc[t] == pytest.approx(expect)
    assert fwd.iloc[t] != pytest.approx(lit.iloc[t])
    # causality of the label: prices after t+15 cannot change it, a price inside (t, t+15] does
    q = p.copy()
    q.iloc[t + 16:] *= 1.5
    assert L.weighted_signal(q).iloc[t] == pytest.approx(fwd.iloc[t])
    q = p.copy()
    q.iloc[t + 5] *= 1.05
    assert L.weighted_signal(q).iloc[t] != pytest.approx(fwd.iloc[t])
    assert fwd.iloc[-15:].isna().all()  # no 15-day future, no label


def test_class_assignment_boundaries():
    thr = np.array([-2.0, -1.0, 1.0, 2.0])
    x = pd.Series([-3.0, -2.0, -1.5, -1.0, 0.0, 1.0, 1.9, 2.0, 5.0, np.nan])
    got = L.assign_classes(x, thr).tolist()
    assert got == [0, 1, 1, 2, 2, 3, 3, 4, 4, -1]
    assert [L.ACTIONS[i] for i in got[:3]] == ["STRONG SELL", "SELL", "SELL"]


def test_thresholds_fit_on_train_only_and_match_quantiles():
    p = _prices(n=3000, seed=1)
    cut = p.index[2000]
    classes, thr = L.label_series(p, train_end=cut)
    w = L.weighted_signal(p)
    np.testing.assert_allclose(thr, w[w.index <= cut].dropna().quantile([0.03, 0.15, 0.53, 0.85]).to_numpy())
    dist = L.class_distribution(classes[classes.index <= cut])
    np.testing.assert_allclose(dist, L.PAPER_DISTRIBUTION, atol=0.005)
    q = p.copy()
    q.iloc[2100:] *= np.linspace(1, 3, len(q) - 2100)  # a test-period rally must not move thresholds
    _, thr2 = L.label_series(q, train_end=cut)
    np.testing.assert_allclose(thr2, thr)
    with pytest.raises(ValueError, match="no valid signal"):
        L.fit_thresholds(pd.Series([np.nan, np.nan]))
