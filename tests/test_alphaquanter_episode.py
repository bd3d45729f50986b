"""A scripted AlphaQuanter agent episode through the shared rollout engine: tool calls run one at
a time on point-in-time data, observations are not model tokens, the call cap holds, rewards score it."""

import numpy as np
import pandas as pd
import pytest
from tokenizers import AddedToken

from llm.scripted import ScriptedPolicy
from llm.tokenizer import train_tokenizer
from rl.methods.alphaquanter import rewards as A
from rl.methods.alphaquanter.env import episode_prompt, make_engine, run_episodes, tokens_per_decision
from rl.methods.alphaquanter.tools import (
    TOOL_CALL_CLOSE,
    TOOL_CALL_OPEN,
    TOOL_RESPONSE_CLOSE,
    TOOL_RESPONSE_OPEN,
)
from stockr1.data.context import PointInTimeStore

RSI = '<tool_call>{"name": "get_indicator", "arguments": {"indicator": "rsi"}}</tool_call>'
NEWS = '<tool_call>{"name": "get_news", "arguments": {"n": 2}}</tool_call>'
SEG0 = "<think>Plan: momentum first, then news.</think>" + RSI
SEG1 = "<think>RSI is mid-range, so check the headlines.</think>" + NEWS
SEG2 = "<think>Momentum neutral and news positive, a modest long.</think><answer>BUY</answer>"


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    corpus = [SEG0, SEG1, SEG2, episode_prompt("AAA", "2020-10-01", 2), "rsi(14) [momentum]: 50.1 AAA item", "x x x x x"] * 20
    t = train_tokenizer(corpus, 600, tmp_path_factory.mktemp("tok"))
    t.add_tokens([AddedToken(x, special=False, normalized=False)
                  for x in (TOOL_CALL_OPEN, TOOL_CALL_CLOSE, TOOL_RESPONSE_OPEN, TOOL_RESPONSE_CLOSE)])
    return t


@pytest.fixture(scope="module")
def store():
    rng = np.random.default_rng(0)
    n = 220
    c = 100 * np.exp(np.cumsum(rng.normal(0, 0.01, n)))
    idx = pd.bdate_range("2020-01-01", periods=n, name="date")
    df = pd.DataFrame({"open": c, "high": c * 1.01, "low": c * 0.99, "close": c, "volume": np.full(n, 1e6)}, index=idx)
    news = pd.DataFrame({"ticker": ["AAA"] * 2, "time": pd.to_datetime(["2020-06-01 10:00", "2021-01-05 10:00"]),
                         "title": ["AAA item past", "AAA item future"], "summary": ["", ""], "sentiment": [0.5, 0.9]})
    return PointInTimeStore({"AAA": df}, news=news)


def _engine(tok, store, max_calls):
    prompt = episode_prompt("AAA", "2020-10-01", max_calls)
    policy = ScriptedPolicy(tok, {prompt: [SEG0, SEG1, SEG2]})
    return make_engine(policy, tok, store, max_calls=max_calls, max_new_tokens=200, temperature=0.0)


def test_scripted_episode_two_calls(tok, store):
    (ep,) = run_episodes(_engine(tok, store, 2), [("AAA", "2020-10-01")], max_calls=2)
    text = ep["completion"]
    assert ep["action"] == "BUY" and ep["n_calls"] == 2
    assert "rsi(14) [momentum]" in text and "AAA item past" in text and "AAA item future" not in text
    assert text.count(TOOL_RESPONSE_OPEN) == 2
    # observations are not counted as generated tokens
    model_only = SEG0 + SEG1 + SEG2
    assert ep["tokens"] == len(tok(model_only, add_special_tokens=False).input_ids)
    assert tokens_per_decision([ep]) == ep["tokens"]
    parsed = A.parse_episode(text)
    assert len(parsed.calls) == 2 and all(c is not None for c in parsed.calls) and parsed.gaps[1] > 0
    assert A.outcome_score(parsed.action, 0.05) == 1.0


def test_call_cap_is_enforced(tok, store):
    (ep,) = run_episodes(_engine(tok, store, 1), [("AAA", "2020-10-01")], max_calls=1)
    assert ep["n_calls"] == 1  # the second </tool_call> is an ordinary token once the cap is reached
    assert ep["completion"].count(TOOL_RESPONSE_OPEN) == 1
