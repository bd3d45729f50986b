"""AlphaQuanter tools: point-in-time (perturb the future), values by hand, malformed calls."""

import json

import numpy as np
import pandas as pd
import pytest

from rl.methods.alphaquanter.tools import TOOLS, AlphaQuanterTool, obv, parse_call
from stockr1.data.context import PointInTimeStore


def _store(scale_future=1.0, t_cut=None, future_news=False, n=260):
    rng = np.random.default_rng(0)
    c = 100 * np.exp(np.cumsum(rng.normal(0, 0.01, n)))
    idx = pd.bdate_range("2020-01-01", periods=n, name="date")
    df = pd.DataFrame({"open": c, "high": c * 1.01, "low": c * 0.99, "close": c,
                       "volume": rng.integers(1_000_000, 2_000_000, n).astype(float)}, index=idx)
    if t_cut is not None:
        df.loc[df.index > t_cut, ["open", "high", "low", "close"]] *= scale_future
        df.loc[df.index > t_cut, "volume"] *= 2
    times = ["2020-06-01 10:00", "2020-09-01 10:00"] + (["2020-12-01 09:00"] if future_news else [])
    news = pd.DataFrame({"ticker": ["AAA"] * len(times), "time": pd.to_datetime(times),
                         "title": [f"AAA item {i}" for i in range(len(times))], "summary": [""] * len(times),
                         "sentiment": ["positive"] * len(times)})
    return PointInTimeStore({"AAA": df}, news=news), df


CALLS = [{"name": "get_price_data", "arguments": {"days": 5}}, {"name": "get_news", "arguments": {"n": 5}},
         {"name": "get_macro"}, {"name": "get_fundamentals"}] + [
    {"name": "get_indicator", "arguments": {"indicator": k}} for k in
    ("sma", "ema", "macd", "macd_signal", "macd_hist", "rsi", "roc", "atr", "boll_upper", "boll_lower", "obv", "mfi", "vwma")]


def test_tools_are_point_in_time():
    base, df = _store()
    t = df.index[200]
    before = [AlphaQuanterTool(base)(("AAA", t), json.dumps(c)) for c in CALLS]
    assert all(r.error is None for r in before), [r.error for r in before if r.error]
    moved, _ = _store(scale_future=1.7, t_cut=t, future_news=True)
    after = [AlphaQuanterTool(moved)(("AAA", t), json.dumps(c)) for c in CALLS]
    assert [r.observation for r in after] == [r.observation for r in before]
    # and the tools do see the past: perturbing day t changes the price/indicator outputs
    past, _ = _store(scale_future=1.7, t_cut=df.index[199])
    assert AlphaQuanterTool(past)(("AAA", t), json.dumps(CALLS[0])).observation != before[0].observation


def test_indicator_values_by_hand():
    store, df = _store()
    t = df.index[100]
    obs = AlphaQuanterTool(store)(("AAA", t), '{"name": "get_indicator", "arguments": {"indicator": "sma", "window": 5, "days": 1}}')
    assert obs.observation == f"<tool_response>sma(5) [trend]: {df['close'].iloc[96:101].mean():.4g}</tool_response>"
    small = pd.DataFrame({"close": [10.0, 11.0, 10.5, 10.5, 12.0], "volume": [5.0, 3.0, 2.0, 7.0, 4.0]})
    assert obv(small).tolist() == [0.0, 3.0, 1.0, 1.0, 5.0]


@pytest.mark.parametrize("call,msg", [
    ("{not json", "not JSON"),
    ('{"arguments": {}}', "needs"),
    ('{"name": "get_weather"}', "unknown tool"),
    ('{"name": "get_indicator", "arguments": {"indicator": "rsi", "colour": 1}}', "unknown argument"),
    ('{"name": "get_price_data", "arguments": {"days": "many"}}', "must be int"),
    ('{"name": "get_indicator", "arguments": {"indicator": "astrology"}}', "unknown indicator"),
    ('{"name": "get_price_data", "arguments": {"days": 1000}}', "days must be"),
])
def test_malformed_calls_become_error_observations(call, msg):
    store, df = _store()
    r = AlphaQuanterTool(store)(("AAA", df.index[100]), call)
    assert r.error is not None and msg in r.error and r.observation.startswith("<tool_response>error:")
    assert r.payload == {"ok": False}


def test_parse_call_types_and_registry():
    assert parse_call('{"name": "get_news", "arguments": {"n": "3"}}') == ("get_news", {"n": 3})
    assert set(TOOLS) == {"get_price_data", "get_indicator", "get_fundamentals", "get_news", "get_macro"}
