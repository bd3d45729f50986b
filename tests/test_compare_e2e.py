"""bench compare end to end with scripted policies: every method's prompts go through the ONE rollout
engine (AlphaQuanter's data tool, Stock-R1's ForecastTool), its text is mapped to a side, scored
by the triangular judge, and traded by the shared simulator."""

import math

import numpy as np
import pytest

from benchmarks.compare.command import TEXT_METHODS, CompareConfig, evaluate_stock_r1, evaluate_text_method
from benchmarks.compare.plots import method_metrics
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
            assert all(r.tool_calls == 1 for r in records) and m["tool_calls_per_decision"] == 1.0
        else:
            assert all(r.tool_calls == 0 for r in records)
        if name == "trade_r1_dsr":
            assert records[0].consistency == 0.0  # no decision -> s = 0
        if name == "trading_r1":
            assert m["n_trades"] >= 2  # every decision traded long
            assert math.isfinite(m["cumulative_return"])


def test_stock_r1_scripted_through_the_forecast_tool(env, tok, tiny_decoder):
    from rl.setup import prepare_fresh_decoder

    decoder = tiny_decoder(seed=0).eval()
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


def test_compare_refuses_a_pretrained_policy_before_its_cutoff_and_the_flag_overrides(env, tmp_path):
    import dataclasses

    from benchmarks.compare.command import compare, cutoff_lines

    pre = dataclasses.replace(env.cfg, policy={"name_or_path": "Qwen/Qwen3-8B", "knowledge_cutoff": "2100-01"})
    env2 = dataclasses.replace(env, cfg=pre)
    with pytest.raises(ValueError, match="on or before Qwen/Qwen3-8B's knowledge cutoff 2100-01"):
        compare(pre, tmp_path / "out", env=env2, methods=["trading_r1"])  # refused before any training
    assert not (tmp_path / "out").exists()
    line = cutoff_lines(pre, env2, ["trading_r1", "alphaquanter"], allow=True)
    assert len(line) == 1 and line[0].startswith(f"**{len(env.rows)} of {len(env.rows)} decision dates are on or before")
    after = dataclasses.replace(pre, policy={"name_or_path": "Qwen/Qwen3-8B", "knowledge_cutoff": "1990-01"})
    assert cutoff_lines(after, env2, ["trading_r1"], allow=False)[0].startswith("Knowledge cutoff 1990-01")
    assert "not applicable" in cutoff_lines(env.cfg, env, ["trading_r1"], allow=False)[0]  # tiny random init


def test_anonymised_env_keeps_every_reward_and_hides_names_and_dates(env):
    """Every method's query on the anonymised decision days: same reward columns, no ticker, company
    name or original date in the prompt; the records map back onto the plain days."""
    import re

    import pandas as pd

    from benchmarks.compare.command import deanonymised
    from benchmarks.compare.plots import DecisionRecord
    from rl.methods.alphaquanter.tools import AlphaQuanterTool

    an = env.anonymiser()
    aenv = env.anonymised(an)
    hidden = [*env.frames, *(n for ns in env.aliases.values() for n in ns if len(n) > 3)]
    np.testing.assert_array_equal(aenv.labels, env.labels)
    for name, spec in TEXT_METHODS.items():
        m = env.cfg.method(name)
        for i in [*env.rows, *env.train_rows]:
            prompt, evidence, cols = spec.build(env, int(i), m)
            aprompt, aevidence, acols = spec.build(aenv, int(i), m)
            for k, v in cols.items():
                if k not in ("context", "ticker", "aliases"):
                    assert acols[k] == pytest.approx(v, rel=1e-9), (name, k)
            for text in (aprompt, aevidence):
                assert not any(h.lower() in text.lower() for h in hidden), name
                assert str(env.ref(int(i))[1].date()) not in text
                assert not re.search(r"\b(19|20[0-5])\d-\d{2}-\d{2}\b", text)
    call = '{"name": "get_price_data", "arguments": {"days": 3}}'
    i = int(env.rows[0])
    obs = AlphaQuanterTool(aenv.store)(aenv.ref(i), call).observation
    plain = AlphaQuanterTool(env.store)(env.ref(i), call).observation
    assert obs != plain and not any(h.lower() in obs.lower() for h in hidden)
    assert not re.search(r"\b(19|20[0-5])\d-\d{2}-\d{2}\b", obs) and str(env.ref(i)[1].date()) not in obs
    rec = [DecisionRecord(aenv.ref(i)[0], str(aenv.ref(i)[1].date()), 1, 3, 0.5, 1)]
    assert deanonymised(rec, an)[0].ticker == env.ref(i)[0]
    assert pd.Timestamp(deanonymised(rec, an)[0].date) == env.ref(i)[1]


def test_compare_anonymise_end_to_end_with_a_saved_policy(env, tok, tmp_path, capsys):
    """A checkpointed tiny policy is evaluated on the plain and the anonymised decision days; the report
    has both rows, the paired gap and says so (the cutoff line first)."""
    import dataclasses
    import json

    import torch

    from benchmarks.compare.command import compare, write_readme
    from llm.policy import Policy, PolicyConfig

    torch.manual_seed(0)
    Policy(PolicyConfig(tiny_hidden=32, tiny_layers=1, tiny_heads=2, tiny_kv_heads=1, tiny_intermediate=64, lora_r=0,
                        d_ts=16), tokenizer=tok).save(tmp_path / "ckpt")
    cfg = dataclasses.replace(env.cfg, work_dir=str(tmp_path / "work"),
                              methods={**env.cfg.methods, "trading_r1": dataclasses.replace(
                                  env.cfg.methods["trading_r1"], checkpoint=str(tmp_path / "ckpt"), max_new_tokens=6)})
    out = tmp_path / "out"
    metrics = compare(cfg, out, env=dataclasses.replace(env, cfg=cfg), methods=["trading_r1"], anonymise=True,
                      run_meta={"command": "test", "commit": None, "date": "today"})
    assert {"trading_r1", "trading_r1 (anonymised)"} <= set(metrics)
    iv = json.loads((out / "intervals.json").read_text())
    assert {"trading_r1 - buy_and_hold", "trading_r1 - trading_r1 (anonymised)"} <= set(iv["differences"])
    rec = json.loads((tmp_path / "work" / "trading_r1" / "records.json").read_text())
    assert len(rec["anonymised_records"]) == len(rec["records"]) == len(env.rows)
    assert rec["anonymised_records"][0]["ticker"].startswith("TKR")
    assert rec["anonymiser"] == {"weeks": 2609, "scale": 0.37, "rebased": []}  # what made its prompts
    # records of another anonymisation (as before the rebased-frame rule) are evaluated again, not reused
    cache = tmp_path / "work" / "trading_r1" / "records.json"
    cache.write_text(json.dumps({**rec, "anonymiser": {"weeks": 2609, "scale": 0.37}}))
    capsys.readouterr()
    compare(cfg, tmp_path / "out2", env=dataclasses.replace(env, cfg=cfg), methods=["trading_r1"], anonymise=True,
            run_meta={"command": "test", "commit": None, "date": "today"})
    assert "trading_r1: training + evaluating" in capsys.readouterr().out
    assert json.loads(cache.read_text())["anonymiser"] == rec["anonymiser"]
    readme = write_readme(out, "header").read_text()
    assert readme.splitlines()[2].startswith("Knowledge cutoff: not applicable") and "Memorisation probe (`--anonymise`)" in readme
    assert "| trading_r1 - trading_r1 (anonymised) |" in readme
