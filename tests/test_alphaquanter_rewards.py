"""AlphaQuanter outcome/process rewards and portfolio backtest against hand-computed values."""

import pandas as pd
import pytest

from rl.methods.alphaquanter import rewards as A
from rl.methods.alphaquanter.env import portfolio_backtest

CALL = '<tool_call>{"name": "get_indicator", "arguments": {"indicator": "rsi"}}</tool_call><tool_response>rsi 55</tool_response>'
CALL2 = '<tool_call>{"name": "get_news"}</tool_call><tool_response>news</tool_response>'
BAD = "<tool_call>{oops</tool_call><tool_response>error: not JSON</tool_response>"
THINK = "<think>" + " ".join(["reason"] * 30) + "</think>"


def test_smoothed_return_and_regimes():
    p = [100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110]
    assert A.smoothed_return(p, (3, 5, 10)) == pytest.approx((0.03 + 0.05 + 0.10) / 3)
    assert A.smoothed_return(p[:10], (3, 5, 10)) != A.smoothed_return(p[:10], (3, 5, 10))  # NaN: too short
    assert [A.regime(r, 0.01) for r in (0.02, -0.02, 0.005, 0.01)] == [1, -1, 0, 0]


@pytest.mark.parametrize("action,r,expected", [
    ("BUY", 0.03, 1.0), ("SELL", -0.03, 1.0), ("HOLD", 0.0, 1.0),
    ("SELL", 0.03, -1.0), ("BUY", -0.03, -1.0),  # opposite side of a strong trend
    ("HOLD", 0.03, -0.75), ("HOLD", -0.03, -0.75),  # missed opportunity
    ("BUY", 0.005, -0.5), (None, 0.03, -1.0),
])
def test_outcome_table(action, r, expected):
    assert A.outcome_score(action, r) == expected


def test_parse_episode_and_process_scores():
    text = THINK + CALL + "<think>rsi neutral, check news</think>" + CALL2 + THINK + "<answer>BUY</answer>"
    ep = A.parse_episode(text)
    assert ep.action == "BUY" and ep.has_think and len(ep.calls) == 2
    assert ep.gaps == (30, 4)  # tool responses are not counted as model words
    assert ep.reasoning_words == 30 + 4 + 30 + 1  # + the answer token "BUY"
    assert A.format_score(ep) == 1.0  # 65 words, inside [60, 400]
    assert A.tool_score(ep) == 1.0
    short = A.parse_episode("<think>buy</think><answer>BUY</answer>")  # 2 words: 1 - (60-2)/30 < 0 -> 0
    assert A.format_score(short) == 0.0 and A.tool_score(short) == pytest.approx(0.0)  # 0 calls: 1 - 0.5*2
    mid = A.parse_episode("<think>" + " ".join(["w"] * 44) + "</think><answer>HOLD</answer>")  # 45 words
    assert A.format_score(mid) == pytest.approx(1 - 15 / 30)
    assert A.format_score(A.parse_episode(THINK + "no answer")) == 0.0
    # duplicate + malformed + blind collection: 3 calls in range -> 1 - 0.25 - 0.5 - 0.5
    blind = A.parse_episode(THINK + CALL + CALL + BAD + "<answer>SELL</answer>")
    assert blind.calls[2] is None and A.tool_score(blind) == pytest.approx(-0.25)
    many = A.parse_episode(THINK + "".join(f"x{i} " + CALL.replace("rsi", f"sma{i}") for i in range(7)) + "<answer>BUY</answer>")
    assert A.tool_score(many) == pytest.approx(1 - 0.5 * (7 - 5))  # two calls over the interval


def test_total_and_trl_wrapper():
    text = THINK + CALL + "<think>rsi neutral, check news</think>" + CALL2 + THINK + "<answer>BUY</answer>"
    assert A.total_reward(text, 0.03) == pytest.approx(2 * 1.0 + 1.0 + 1.0)
    assert A.total_reward(text, -0.03) == pytest.approx(2 * -1.0 + 1.0 + 1.0)
    assert A.alphaquanter_rewards(None, [text, text], smoothed_return=[0.03, float("nan")]) == [4.0, None]


def test_portfolio_backtest_by_hand():
    idx = pd.bdate_range("2021-01-04", periods=5)
    prices = pd.Series([100.0, 110.0, 99.0, 121.0, 120.0], idx)
    acts = pd.Series(["BUY", "BUY", "SELL", "HOLD", "BUY"], idx)  # 2nd BUY keeps; last-day BUY ignored
    res = portfolio_backtest(acts, prices, cost_bps=10)
    c = 0.001
    eq = [1 - c, (1 - c) * 1.1, (1 - c) * 0.99 * (1 - c)]
    eq += [eq[2], eq[2]]
    assert res.equity.tolist() == pytest.approx(eq)
    assert res.n_trades == 1 and res.metrics["win_rate"] == 0.0 and res.metrics["hit_rate"] == 0.0
    assert res.metrics["cumulative_return"] == pytest.approx(eq[-1] - 1)
    hold = portfolio_backtest(pd.Series(["BUY"], idx[:1]), prices, cost_bps=0)
    assert hold.metrics["cumulative_return"] == pytest.approx(0.2) and hold.metrics["hit_rate"] == 1.0


def test_smoothed_return_column():
    import numpy as np

    from rl.methods.alphaquanter.env import smoothed_return_column

    idx = pd.bdate_range("2021-01-04", periods=12)
    frames = {"A": pd.DataFrame({"close": np.arange(100.0, 112.0)}, idx)}
    got = smoothed_return_column(frames, [("A", idx[0]), ("A", idx[5])])
    assert got[0] == pytest.approx((0.03 + 0.05 + 0.10) / 3) and np.isnan(got[1])
    with pytest.raises(KeyError, match="not a trading day"):
        smoothed_return_column(frames, [("A", "2021-01-09")])
