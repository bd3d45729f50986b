"""bench compare end to end with scripted policies: every method's prompts go through the ONE rollout
engine (AlphaQuanter's data tool, Stock-R1's ForecastTool), its text is mapped to a side, scored
by the triangular judge, and traded by the shared simulator."""

import math

import numpy as np
import pytest

from benchmarks.compare import TEXT_METHODS, CompareConfig, evaluate_stock_r1, evaluate_text_method
from benchmarks.compare_plots import method_metrics
from llm.scripted import ScriptedPolicy
from llm.special_tokens import EOS_TOKEN
from llm.tokenizer import chat_prompt, train_tokenizer
from rl.methods.env import DecisionEnv
from rl.methods.stock_r1.adapter import decision_samples as stock_r1_samples
from rl.soft_tokens import soft_tokens
from stockr1.data import load_source, synthetic_windows
from stockr1.data.context import synthetic_store
from stockr1.data.quality import check_frames

ACT = '<forecast_action>{"direction": "up", "volatility_level": "low"}</forecast_action>'
BAD = "<forecast_action>gibberish</forecast_action>"
CALL = '<think>Check prices.</think><tool_call>{"name": "get_price_data", "arguments": {"days": 3}}</tool_call>'
DECIDE = "<think>Prices rose, so go long.</think><answer>BUY</answer>"


@pytest.fixture(scope="module")
def env():
    frames, _ = check_frames(load_source("synthetic", n_tickers=2, n_days=400, seed=0))
    cfg = CompareConfig.from_dict({
        "decisions_per_ticker": 2, "n_train": 2, "max_context_chars": 500, "benchmark": None,
        "backtest": {"threshold": 0.5, "holding": 10, "cost_bps": 10.0, "vol_lookback": 20},
        "methods": {"stock_r1": {"max_new_tokens": 40}, "trading_r1": {"max_new_tokens": 60, "prompt_days": 3},
                    "trade_r1_fsr": {"max_new_tokens": 60}, "trade_r1_dsr": {"max_new_tokens": 60},
                    "alphaquanter": {"max_new_tokens": 60, "max_tool_calls": 2}}})
    return DecisionEnv.build(cfg, synthetic_windows(2, 400, 0, context=True), frames, synthetic_store(frames, seed=0))


@pytest.fixture(scope="module")
def tok(env, tmp_path_factory):
    corpus = [ACT, BAD, CALL, DECIDE, "DECISION: [[[BUY]]] <answer>SELL HOLD 1.0</answer> x x x"] * 20
    corpus += [env.context(int(i)) for i in env.rows]
    return train_tokenizer(corpus, 800, tmp_path_factory.mktemp("tok"))


def _prompts(env, name, tok):
    m = env.cfg.method(name)
    return [chat_prompt(tok, TEXT_METHODS[name].build(env, int(i), m)[0]) for i in env.rows]


def test_text_methods_scripted_through_the_engine(env, tok):
    assert len(env.rows) == 4
    tickers = [env.ref(int(i))[0] for i in env.rows]
    scripts = {
        "trading_r1": lambda k, tk: [f"<conclusion>\n## Conclusion\nbuy\n</conclusion>\nDECISION: [[[BUY]]]{EOS_TOKEN}"],
        "trade_r1_fsr": lambda k, tk: [f"<think>{env.context(int(env.rows[k])).splitlines()[0]}</think>"
                                       f"<answer>SELL {tk}</answer>"],
        "trade_r1_dsr": lambda k, tk: ([f"<think>nothing to decide</think>{EOS_TOKEN}"] if k == 0
                                       else [f"<think>unclear</think><answer>HOLD {tk}</answer>"]),
        "alphaquanter": lambda k, tk: [CALL, DECIDE],
    }
    expected = {"trading_r1": [1, 1, 1, 1], "trade_r1_fsr": [-1, -1, -1, -1], "trade_r1_dsr": [None, 0, 0, 0],
                "alphaquanter": [1, 1, 1, 1]}
    for name, script in scripts.items():
        prompts = _prompts(env, name, tok)
        pol = ScriptedPolicy(tok, {p: script(k, tickers[k]) for k, p in enumerate(prompts)})
        records, example = evaluate_text_method(pol, name, env, tokenizer=tok)
        assert [r.position for r in records] == expected[name], name
        assert [r.ticker for r in records] == tickers
        assert all(0.0 <= r.consistency <= 1.0 for r in records)
        m, _ = method_metrics(records, env.prices, env.bt)
        assert m["parse_failure_rate"] == pytest.approx(np.mean([p is None for p in expected[name]]))
        if name == "alphaquanter":  # the data tool ran inside the engine; its observation is not model text
            assert "<tool_response>" in example and "O=" in example
            n_model = len(tok(CALL, add_special_tokens=False).input_ids) + len(tok(DECIDE, add_special_tokens=False).input_ids)
            assert all(r.tokens == n_model for r in records)
        if name == "trade_r1_dsr":
            assert records[0].consistency == 0.0  # no decision -> s = 0
        if name == "trading_r1":
            assert m["n_trades"] >= 2  # every decision traded long
            assert math.isfinite(m["cumulative_return"])


def test_stock_r1_scripted_through_the_forecast_tool(env, tok):
    import torch

    from forecast_action.build import build_decoder
    from rl.setup import prepare_fresh_decoder

    torch.manual_seed(0)
    decoder = build_decoder({"ts": {"lookback": 90, "horizon": 10, "patch_len": 15, "d_model": 16, "n_layers": 1,
                                    "n_heads": 2, "ffn_dim": 32, "dropout": 0.0, "d_llm": 8},
                             "action": {"cond_dim": 8, "emb_dim": 4, "hidden": 16}}).eval()
    prepare_fresh_decoder(decoder, env.windows)  # a decoder is prepared (U normaliser on train) before use
    samples = stock_r1_samples(env, decoder, tok)
    assert soft_tokens(samples).shape[-1] == 8  # soft tokens from the decoder's encoder
    scripts = {s.prompt: (["Trend looks up. " + ACT, " <answer>1.0</answer>"] if k else ["Hmm. " + BAD, " <answer>0</answer>"])
               for k, s in enumerate(samples)}
    pol = ScriptedPolicy(tok, scripts)
    records, example = evaluate_stock_r1(pol, decoder, env, tokenizer=tok)
    assert "<forecast_ts>" in example
    assert records[0].position is None and records[0].consistency == 0.0  # unparseable action: not traded
    assert all(r.position in (-1, 0, 1) for r in records[1:])
    m, _ = method_metrics(records, env.prices, env.bt)
    assert m["parse_failure_rate"] == pytest.approx(0.25)
