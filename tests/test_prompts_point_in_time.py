"""Every method's decision prompt (Stock-R1's QA prompt, Trading-R1's snapshot, Trade-R1's context
query, AlphaQuanter's episode prompt) and every AlphaQuanter data-tool call, under the data layer's
invariance harness: replace the prices after t and every macro value, statement and news item a
decision at t may not see, rebuild windows, contexts and the compare ``DecisionEnv``, and require identical
text on the last decision days <= t. A store with a one-day look-ahead must fail the same check."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from benchmarks.compare.command import CompareConfig
from llm.qa.prompt import user_message
from rl.methods.alphaquanter import adapter as alphaquanter
from rl.methods.alphaquanter.tools import AlphaQuanterTool
from rl.methods.env import DecisionEnv
from rl.methods.stock_r1 import adapter as stock_r1
from rl.methods.trade_r1 import adapter as trade_r1
from rl.methods.trading_r1 import adapter as trading_r1
from stockr1.data import build_windows, load_source
from stockr1.data.context import PointInTimeStore
from stockr1.data.leakage import perturb_context_inputs
from stockr1.data.providers.synthetic import synthetic_context
from stockr1.data.quality import check_frames
from stockr1.data.splits import SplitSpec

H = 10
CFG = {"decisions_per_ticker": 2, "n_train": 4, "max_context_chars": 4000, "benchmark": None,
       "backtest": {"threshold": 0.5, "holding": H, "cost_bps": 10.0, "vol_lookback": 20}}
CALLS = [{"name": "get_price_data", "arguments": {"days": 5}}, {"name": "get_news", "arguments": {"n": 5}},
         {"name": "get_macro"}, {"name": "get_fundamentals"}, {"name": "get_indicator", "arguments": {"indicator": "rsi"}},
         {"name": "get_indicator", "arguments": {"indicator": "macd"}}]


def _env(frames, tables, profiles, leak: int = 0) -> DecisionEnv:
    store = PointInTimeStore(frames, profiles=profiles, leak_days=leak, **tables)
    w = build_windows(frames, lookback=60, horizon=H, split=SplitSpec(0.2, 0.2), context=store)
    return DecisionEnv.build(CompareConfig.from_dict(CFG), w, frames, store)


def _texts(env: DecisionEnv, t) -> list[str]:
    """All prompt and tool text of the last 3 decision days <= t per ticker."""
    w, out = env.windows, []
    for tk in sorted(set(w.ticker.tolist())):
        for i in map(int, np.flatnonzero((w.ticker == tk) & (w.date <= t.to_datetime64()))[-3:]):
            out.append(user_message(stock_r1.decision_item(w, i, H), env.context(i)))
            for build, m in ((trading_r1.build_query, {}), (trade_r1.build_query, {}),
                             (alphaquanter.build_query, {"max_tool_calls": 3})):
                prompt, evidence, _ = build(env, i, m)
                out += [prompt, evidence]
            tool = AlphaQuanterTool(env.store)
            out += [tool(env.ref(i), json.dumps(c)).observation for c in CALLS]
    return out


@pytest.fixture(scope="module")
def data():
    frames = check_frames(load_source("synthetic", n_tickers=2, n_days=400, seed=5))[0]
    macro, fundamentals, news, profiles = synthetic_context(frames, seed=5)
    return frames, {"macro": macro, "fundamentals": fundamentals, "news": news}, profiles


def _day(tables, cal, kind: str):
    """t = a day on which SYN00 gets a statement published / a headline stamped, so a look-ahead of
    a few days would reveal it."""
    if kind == "filing":
        f = tables["fundamentals"]
        return next(d for d in f.loc[f["ticker"] == "SYN00", "filed"] if d in cal and d > cal[280])
    n = tables["news"]
    stamps = pd.DatetimeIndex(n.loc[n["ticker"] == "SYN00", "time"]).normalize()
    return next(d for d in stamps if d in cal and d > cal[250])


@pytest.mark.parametrize("kind", ["filing", "news"])
def test_every_prompt_and_data_tool_is_point_in_time(data, kind):
    frames, tables, profiles = data
    t = _day(tables, frames["SYN00"].index, kind)
    pert_frames, pert_tables = perturb_context_inputs(frames, t, tables, prices_to_t=True)
    base = _texts(_env(frames, tables, profiles), t)
    assert len(base) == 2 * 3 * (1 + 6 + len(CALLS)) and not any("error" in x[:40].lower() for x in base)
    assert _texts(_env(pert_frames, pert_tables, profiles), t) == base
    leaky = _texts(_env(frames, tables, profiles, leak=1), t)
    leaky_pert = _texts(_env(pert_frames, pert_tables, profiles, leak=1), t)
    assert leaky != leaky_pert  # the same check catches a one-day look-ahead in the store
