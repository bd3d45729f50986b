"""Trading metrics against hand-computed values and empyrical-reloaded."""

import math

import empyrical
import numpy as np
import pytest

from stockr1.metrics import trading as tm

R = np.array([0.01, -0.02, 0.03, 0.0, -0.01])


def test_cumulative_and_annual_by_hand():
    growth = 1.01 * 0.98 * 1.03 * 1.0 * 0.99
    assert tm.cumulative_return(R) == pytest.approx(growth - 1)
    assert tm.annual_return(R) == pytest.approx(growth ** (252 / 5) - 1)
    assert tm.annual_return(R) == pytest.approx(empyrical.annual_return(R))
    assert tm.cumulative_return(R) == pytest.approx(empyrical.cum_returns_final(R))


def test_sharpe_by_hand_and_vs_empyrical():
    rf = 1.04 ** (1 / 252) - 1
    x = R - rf
    mean = x.sum() / 5
    sd = math.sqrt(((x - mean) ** 2).sum() / 4)
    assert tm.sharpe_ratio(R) == pytest.approx(math.sqrt(252) * mean / sd)
    assert tm.sharpe_ratio(R) == pytest.approx(empyrical.sharpe_ratio(R, risk_free=rf))
    rng = np.random.default_rng(0)
    r = rng.normal(0.0005, 0.01, 500)
    assert tm.sharpe_ratio(r) == pytest.approx(empyrical.sharpe_ratio(r, risk_free=rf))
    assert math.isnan(tm.sharpe_ratio(np.zeros(10)))  # never traded: no spread


def test_max_drawdown_by_hand_and_vs_empyrical():
    # V: 1 -> 1.01 -> 0.9898 -> 1.019494 -> 1.019494 -> 1.00929906; peak 1.019494 at end
    v = np.cumprod(1 + R)
    expected = max(1 - v[1] / v[0], 1 - v[4] / v[2])
    assert tm.max_drawdown(R) == pytest.approx(expected)
    assert tm.max_drawdown(R) == pytest.approx(-empyrical.max_drawdown(R))
    # a first-day loss counts against the starting value
    assert tm.max_drawdown(np.array([-0.1, 0.05])) == pytest.approx(0.1)


def test_beta_by_hand_and_vs_empyrical():
    b = np.array([0.02, -0.01, 0.01, 0.0, -0.02])
    r = 2 * b + 0.001
    assert tm.beta(r, b) == pytest.approx(2.0)
    rng = np.random.default_rng(1)
    b2 = rng.normal(0, 0.01, 300)
    r2 = 0.5 * b2 + rng.normal(0, 0.01, 300)
    assert tm.beta(r2, b2) == pytest.approx(empyrical.beta(r2, b2))


def test_win_and_hit_rate():
    net = np.array([0.02, -0.001, 0.0, 0.05])
    assert tm.win_rate(net) == pytest.approx(0.5)
    # long on +1%, short on +2% (miss), short on -3% (hit), flat skipped
    assert tm.hit_rate(np.array([1, -1, -1, 0]), np.array([0.01, 0.02, -0.03, 0.5])) == pytest.approx(2 / 3)


def test_trading_metrics_keys_and_errors():
    m = tm.trading_metrics(R, benchmark=R, trade_net_returns=np.array([0.1]), trade_directions=np.array([1]),
                           trade_underlying=np.array([0.2]))
    assert tuple(m) == tm.TRADING_METRICS
    assert m["beta"] == pytest.approx(1.0) and m["n_trades"] == 1 and m["hit_rate"] == 1.0
    with pytest.raises(ValueError, match="NaN"):
        tm.sharpe_ratio(np.array([0.1, np.nan]))
    with pytest.raises(ValueError, match="aligned"):
        tm.beta(R, R[:3])
