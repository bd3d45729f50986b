"""Block-bootstrap intervals of the compare table (``stockr1.backtest.bootstrap_intervals``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from stockr1.backtest import (
    BacktestConfig,
    BacktestResult,
    Trade,
    bootstrap_intervals,
    buy_and_hold,
    simulate,
)

DAYS = pd.bdate_range("2020-01-01", periods=300)


def _result(returns: np.ndarray, trades: list[Trade] | None = None) -> BacktestResult:
    r = pd.Series(returns, DAYS[: len(returns)])
    return BacktestResult(r, (1 + r).cumprod(), trades or [], {})


def test_constant_returns_give_a_zero_width_interval():
    """Every resample draws exactly D days: constant daily returns compound to the same CR each time."""
    res = {"const": {tk: _result(np.full(300, 0.001)) for tk in ("A", "B")},
           "other": {tk: _result(np.full(300, -0.002)) for tk in ("A", "B")}}
    iv = bootstrap_intervals(res, [("const", "other")], holding=10, n_boot=200)
    cr = iv["metrics"]["const"]["cumulative_return"]
    assert cr["value"] == pytest.approx(1.001 ** 300 - 1)
    assert cr["lo"] == pytest.approx(cr["value"]) and cr["hi"] == pytest.approx(cr["value"])
    d = iv["differences"]["const - other"]["cumulative_return"]
    assert d["value"] == pytest.approx(1.001 ** 300 - 0.998 ** 300) and d["hi"] - d["lo"] == pytest.approx(0, abs=1e-12)
    assert np.isnan(iv["metrics"]["const"]["sharpe"]["value"])  # no spread: Sharpe undefined, as the simulator's
    assert iv["block"] == 10  # at least the holding period


def test_known_hit_rate_lies_in_its_interval_and_a_strategy_minus_itself_is_zero():
    rng = np.random.default_rng(1)
    p_hit = 0.6
    trades = [Trade(DAYS[i], DAYS[i + 1], 1, 0.01 if rng.random() < p_hit else -0.01, 0.0) for i in range(0, 299, 1)]
    res = {"a": {"A": _result(rng.normal(0.0005, 0.01, 300), trades)}}
    res["b"] = res["a"]
    iv = bootstrap_intervals(res, [("a", "b")], holding=5, n_boot=500)
    hr = iv["metrics"]["a"]["hit_rate"]
    assert hr["value"] == pytest.approx(np.mean([t.underlying_return > 0 for t in trades]))
    assert hr["lo"] < p_hit < hr["hi"] and hr["lo"] < hr["value"] < hr["hi"] and hr["hi"] - hr["lo"] < 0.2
    for c in iv["differences"]["a - b"].values():
        assert c["value"] == c["lo"] == c["hi"] == 0.0


def test_point_values_are_the_simulators_metrics():
    """The un-resampled statistic is exactly what the table shows (mean over tickers of the simulator's)."""
    rng = np.random.default_rng(0)
    cfg = BacktestConfig(holding=5, cost_bps=10.0)
    res = {"m": {}, "bh": {}}
    for tk in ("A", "B"):
        prices = pd.Series(100 * np.exp(np.cumsum(rng.normal(0, 0.01, 120))), DAYS[:120])
        days = prices.index[::5][:-1]
        res["m"][tk] = simulate(pd.Series(rng.choice([-1, 1], len(days)), days), prices, cfg)
        res["bh"][tk] = buy_and_hold(prices, cfg)
    iv = bootstrap_intervals(res, [("m", "bh")], holding=5, n_boot=50)
    for k in ("cumulative_return", "sharpe", "hit_rate"):
        want = np.mean([res["m"][tk].metrics[k] for tk in ("A", "B")])
        assert iv["metrics"]["m"][k]["value"] == pytest.approx(want)
        assert iv["metrics"]["m"][k]["lo"] <= iv["metrics"]["m"][k]["hi"]


def test_strategies_on_different_days_are_refused():
    with pytest.raises(ValueError, match="does not cover the tickers and days"):
        bootstrap_intervals({"a": {"A": _result(np.zeros(300))}, "b": {"A": _result(np.zeros(200))}}, [], holding=5)
