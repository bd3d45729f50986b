"""The C.5 backtest on a hand-built price path and signal series, checked against hand arithmetic."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from benchmarks import backtest as bench
from stockr1 import backtest as bt
from stockr1.types import Forecast, Windows

DATES = pd.bdate_range("2020-01-01", periods=7)
PRICES = pd.Series([100.0, 102.0, 99.0, 101.0, 105.0, 104.0, 107.0], index=DATES)
CFG = bt.BacktestConfig(threshold=1.0, holding=2, allocation=0.5, cost_bps=10.0)
# day0 long; day1 ignored (in position); day2 flip to short; day3 below threshold;
# day4 flip to long; day5 no signal; day6 last day (no entry).
Z = pd.Series([1.5, -2.0, -1.2, 0.5, 3.0, np.nan, -5.0], index=DATES)


def _hand_equity() -> list[float]:
    c = 0.001
    e0 = 1 - c * 0.5  # long 0.5 @100, entry cost
    e1 = e0 + 0.5 * (102 / 100 - 1)
    cash2 = e0 + 0.5 * (99 / 100 - 1) - c * 0.5 * 99 / 100  # close long @99
    n2 = 0.5 * cash2
    e2 = cash2 - c * n2  # open short @99
    e3 = e2 - n2 * (101 / 99 - 1)
    cash4 = e2 - n2 * (105 / 99 - 1) - c * n2 * 105 / 99  # close short @105
    n4 = 0.5 * cash4
    e4 = cash4 - c * n4  # open long @105
    e5 = e4 + n4 * (104 / 105 - 1)
    e6 = e4 + n4 * (107 / 105 - 1) - c * n4 * 107 / 105  # forced exit at holding end (day 6)
    return [e0, e1, e2, e3, e4, e5, e6], cash2, cash4


def test_simulation_matches_hand_computation():
    res = bt.backtest(Z, PRICES, CFG)
    eq, cash2, cash4 = _hand_equity()
    np.testing.assert_allclose(res.equity.to_numpy(), eq, rtol=1e-12)
    assert [t.direction for t in res.trades] == [1, -1, 1]
    assert [t.entry for t in res.trades] == [DATES[0], DATES[2], DATES[4]]
    assert [t.exit for t in res.trades] == [DATES[2], DATES[4], DATES[6]]
    np.testing.assert_allclose([t.net_return for t in res.trades], [cash2 - 1, cash4 / cash2 - 1, eq[6] / cash4 - 1])
    m = res.metrics
    assert m["n_trades"] == 3
    assert m["win_rate"] == pytest.approx(1 / 3)  # only the last long makes money
    assert m["hit_rate"] == pytest.approx(1 / 3)  # 99<100 (long miss), 105>99 (short miss), 107>105 (hit)
    assert m["cumulative_return"] == pytest.approx(eq[6] - 1)
    rets = np.array(eq) / np.array([1.0] + eq[:-1]) - 1
    np.testing.assert_allclose(res.returns.to_numpy(), rets, rtol=1e-12)
    v = np.array([1.0] + eq)
    assert m["max_drawdown"] == pytest.approx(np.max(1 - v / np.maximum.accumulate(v)))


def test_buy_and_hold_one_round_trip():
    res = bt.buy_and_hold(PRICES, CFG)
    c = 0.001
    assert res.equity.iloc[-1] == pytest.approx(1 - c * 0.5 + 0.5 * (107 / 100 - 1) - c * 0.5 * 1.07)
    assert len(res.trades) == 1 and res.metrics["hit_rate"] == 1.0
    assert res.metrics["beta"] == pytest.approx(0.5, rel=0.05)  # half the capital in the asset


def test_threshold_and_no_signal_means_flat():
    res = bt.backtest(Z * 0.1, PRICES, CFG)  # every |z| < 1
    assert res.trades == [] and (res.equity == 1.0).all()
    assert math.isnan(res.metrics["sharpe"]) and res.metrics["max_drawdown"] == 0.0


def _windows(closes: np.ndarray, n_win: int, lookback: int, horizon: int, days: pd.DatetimeIndex | None = None,
             ) -> Windows:
    """Consecutive windows over one close path (OHLC all equal the close), on weekdays or on ``days``."""
    hist = np.stack([np.repeat(closes[i:i + lookback, None], 5, 1) for i in range(n_win)])
    fut = np.stack([np.repeat(closes[i + lookback:i + lookback + horizon, None], 5, 1) for i in range(n_win)])
    days = pd.bdate_range("2021-01-01", periods=len(closes)) if days is None else days
    dates = days[lookback - 1:lookback - 1 + n_win]
    z = np.zeros((n_win, 5, 1), np.float32)
    return Windows(np.array(["A"] * n_win), dates.to_numpy(), z, z, hist, fut, np.array(["test"] * n_win))


def test_zscore_by_hand():
    # today's close is 100 and the first future close 102.02: a base or a volatility window that
    # slipped to t+1 would change z
    closes = 100 * np.exp(np.cumsum([0.0, 0.01, -0.01, 0.01, -0.01, 0.02, 0.0, 0.0]))
    w = _windows(closes, 1, lookback=5, horizon=3)
    assert w.last_close[0] == pytest.approx(100.0) and w.future[0, 0, 3] != pytest.approx(w.last_close[0])
    fc_close = np.array([[1.0, 1.0, 1.05]]) * w.last_close[:, None]
    fc = Forecast(fc_close, fc_close[:, None, :], fc_close, fc_close, fc_close)
    z = bt.zscore_signals(fc, w, bt.BacktestConfig(vol_lookback=4, holding=10))
    sd = math.sqrt(4 * 0.01**2 / 3)  # log returns +-0.01, mean 0, ddof 1
    assert z[0] == pytest.approx(0.05 / (sd * math.sqrt(3)))


def test_zscore_ignores_the_future():
    """The signal of day t reads the forecast and history only: any labels put in ``future``/``y``
    leave it bit-identical."""
    rng = np.random.default_rng(1)
    closes = 100 * np.exp(np.cumsum(rng.normal(0, 0.01, 60)))
    w = _windows(closes, n_win=20, lookback=30, horizon=10)
    fc_close = w.last_close[:, None] * np.exp(rng.normal(0, 0.02, (20, 10)))
    fc = Forecast(fc_close, fc_close[:, None, :], fc_close, fc_close, fc_close)
    other = Windows(w.ticker, w.date, w.x, w.y + 1.0, w.hist, w.future * rng.uniform(0.5, 2.0, w.future.shape), w.split)
    cfg = bt.BacktestConfig(vol_lookback=20, holding=5)
    z = bt.zscore_signals(fc, w, cfg)
    assert np.isfinite(z).all()
    np.testing.assert_array_equal(z, bt.zscore_signals(fc, other, cfg))


def test_prices_from_windows_and_run_models(tmp_path):
    rng = np.random.default_rng(0)
    closes = 100 * np.exp(np.cumsum(rng.normal(0, 0.01, 80)))
    w = _windows(closes, n_win=40, lookback=30, horizon=10)
    p = bt.prices_from_windows(w, "A", holding=10)
    np.testing.assert_allclose(p.to_numpy(), closes[29:29 + 50])
    gap = w.select(np.r_[0:10, 11:40])
    with pytest.raises(ValueError, match="not consecutive"):
        bt.prices_from_windows(gap, "A", holding=10)
    mean, per, curves, results = bench.run_models({"oracle": bench._oracle(w)}, w, bt.BacktestConfig(threshold=0.25))
    assert set(mean) == {"buy_and_hold", "oracle"}
    assert mean["oracle"]["hit_rate"] == 1.0  # perfect foresight never calls the wrong side
    assert mean["oracle"]["win_rate"] > 0.8
    assert len(curves["oracle"]) == 50
    table = bench.table_md(mean)
    assert table.count("\n") == 4 and "| oracle |" in table
    assert json.loads(json.dumps(bench.json_clean(mean)))
    # the simulator's results feed the README's intervals; at the full sample they are the table's numbers
    iv = bt.bootstrap_intervals(results, bench.interval_pairs(list(results)), holding=10, n_boot=50)
    assert iv["metrics"]["oracle"]["hit_rate"]["value"] == pytest.approx(mean["oracle"]["hit_rate"])
    assert iv["metrics"]["oracle"]["cumulative_return"]["value"] == pytest.approx(mean["oracle"]["cumulative_return"])
    assert set(iv["differences"]) == {"oracle - buy_and_hold"}


def test_interval_pairs_put_the_encoder_against_every_other_strategy_but_the_oracle():
    names = ["buy_and_hold", "drift", bench.TS_ENCODER, bench.ORACLE]
    assert bench.interval_pairs(names) == [(bench.TS_ENCODER, "buy_and_hold"), (bench.TS_ENCODER, "drift")]
    assert bench.interval_pairs(["buy_and_hold", "a", "b"]) == [("a", "buy_and_hold"), ("a", "b"), ("b", "buy_and_hold"),
                                                              ("b", "a")]


def test_days_past_the_last_decision_day_are_the_exchanges_realised_sessions():
    """Decision days on the NYSE's 2011-2012 sessions, the last one Friday 2012-10-26: the 20 closes after it
    are labelled with the days the NYSE traded (inferred from the decision days): not Hurricane Sandy's
    10-29/30, not Thanksgiving 11-22, the half day 11-23 included."""
    from stockr1.data.calendar import sessions

    days = sessions("XNYS", pd.Timestamp("2010-12-01"), pd.Timestamp("2012-12-31"))
    lookback, horizon = 5, 20
    n_win = int(days.get_loc(pd.Timestamp("2012-10-26"))) - lookback + 2
    closes = 100 * np.exp(np.cumsum(np.random.default_rng(2).normal(0, 0.01, n_win + lookback + horizon)))
    w = _windows(closes, n_win, lookback, horizon, days)
    assert pd.Timestamp(w.date[-1]) == pd.Timestamp("2012-10-26")
    p = bt.prices_from_windows(w, "A", holding=horizon)
    after = p.index[n_win:]
    assert list(after[:3]) == [pd.Timestamp(d) for d in ("2012-10-31", "2012-11-01", "2012-11-02")]
    assert pd.Timestamp("2012-11-22") not in after and pd.Timestamp("2012-11-23") in after
    assert after[-1] == pd.Timestamp("2012-11-28") and len(after) == horizon
    np.testing.assert_allclose(p.to_numpy(), closes[lookback - 1:lookback - 1 + n_win + horizon])
    weekdays = bt.prices_from_windows(w, "A", holding=horizon, exchange="weekdays").index[n_win:]
    assert weekdays[0] == pd.Timestamp("2012-10-29")  # what the old business-day labels said


def test_rebased_windows_give_the_same_daily_returns_and_backtest():
    """A rebased source (each window in its own frame, 100 = its decision day's close) is chained into one
    series whose returns, and so every backtest metric, equal the as-of-t levels'; a gap is still refused."""
    rng = np.random.default_rng(1)
    closes = 100 * np.exp(np.cumsum(rng.normal(0, 0.01, 80)))
    w = _windows(closes, n_win=40, lookback=30, horizon=10)
    scale = 100.0 / w.hist[:, -1, 3]
    rebased = Windows(w.ticker, w.date, w.x, w.y, w.hist * scale[:, None, None], w.future * scale[:, None, None],
                      w.split)
    p, q = bt.prices_from_windows(w, "A", holding=10), bt.prices_from_windows(rebased, "A", holding=10)
    assert q.iloc[0] == pytest.approx(100.0) and (q.index == p.index).all()
    np.testing.assert_allclose(q.pct_change().to_numpy()[1:], p.pct_change().to_numpy()[1:], rtol=1e-9)
    fc = bench._oracle(w)
    mine = bench.run_models({"oracle": fc}, w, bt.BacktestConfig(threshold=0.25))[0]
    theirs = bench.run_models({"oracle": bench._oracle(rebased)}, rebased, bt.BacktestConfig(threshold=0.25))[0]
    for k in ("cumulative_return", "sharpe", "hit_rate", "max_drawdown"):
        assert theirs["oracle"][k] == pytest.approx(mine["oracle"][k], rel=1e-9), k
    with pytest.raises(ValueError, match="not consecutive"):
        bt.prices_from_windows(rebased.select(np.r_[0:10, 11:40]), "A", holding=10)
