"""Trading-R1 decision evaluation: class -> side mapping through the shared simulator, table layout."""

import pandas as pd
import pytest

from rl.methods.trading_r1.evaluate import evaluate_decisions, table_md
from stockr1.backtest import BacktestConfig, simulate

IDX = pd.bdate_range("2020-01-01", periods=7)
P = pd.Series([100.0, 102, 99, 101, 105, 104, 107], IDX)
CFG = BacktestConfig(holding=2, allocation=0.5)


def test_classes_map_to_sides_of_the_shared_simulator():
    dec = pd.Series([4, -1, 0, 2, "BUY", None, "STRONG SELL"], IDX)  # SB, none, SS, HOLD, BUY, none, SS
    got = evaluate_decisions({"A": dec}, {"A": P}, CFG)["A"]
    ref = simulate(pd.Series([1, 0, -1, 0, 1, 0, -1], IDX), P, CFG).metrics
    assert got == pytest.approx({"CR": ref["cumulative_return"], "SR": ref["sharpe"], "HR": ref["hit_rate"],
                                 "MDD": ref["max_drawdown"]})
    assert got["HR"] == pytest.approx(1 / 3)  # long 100->99 miss, short 99->105 miss, long 105->107 hit
    flat = evaluate_decisions({"A": pd.Series([2] * 7, IDX)}, {"A": P}, CFG)["A"]
    assert flat["CR"] == 0.0 and flat["MDD"] == 0.0


def test_table_layout():
    r = {"m1": {"A": {"CR": 0.05, "SR": 1.234, "HR": 0.6, "MDD": 0.02}}, "m2": {}}
    t = table_md(r)
    assert "| m1 | 5.00 | 1.23 | 60.0 | 2.00 |" in t and "| m2 | - | - | - | - |" in t
