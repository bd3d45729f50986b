"""rl/methods/<method>/adapter.py: each method's decision query, format teacher and side rule on
a `DecisionEnv` (`rl.methods.env`, as the compare benchmark builds it, over synthetic data). A format teacher must produce
the side its own method's labels / returns call for and parse back through the method's position
rule; Trading-R1's and AlphaQuanter's must outscore the opposite decision under their reward
(Trade-R1's gated reward takes r from the data, so the side only moves it through the judge)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchmarks.compare.command import CompareConfig
from rl.methods import reward_functions
from rl.methods.alphaquanter import adapter as alphaquanter
from rl.methods.alphaquanter.rewards import RewardConfig, regime
from rl.methods.alphaquanter.tools import AlphaQuanterTool
from rl.methods.env import DecisionEnv
from rl.methods.stock_r1 import adapter as stock_r1
from rl.methods.trade_r1 import adapter as trade_r1
from rl.methods.trading_r1 import adapter as trading_r1
from rl.methods.trading_r1.evaluate import SIDE
from rl.methods.trading_r1.labels import ACTIONS
from stockr1.data import load_source, synthetic_windows
from stockr1.data.context import synthetic_store
from stockr1.data.quality import check_frames
from stockr1.types import CLOSE

H = 10


@pytest.fixture(scope="module")
def env():
    frames, _ = check_frames(load_source("synthetic", n_tickers=2, n_days=400, seed=0))
    cfg = CompareConfig.from_dict({"decisions_per_ticker": 2, "n_train": 6, "max_context_chars": 500, "benchmark": None,
                                   "backtest": {"threshold": 0.5, "holding": H, "cost_bps": 10.0, "vol_lookback": 20}})
    return DecisionEnv.build(cfg, synthetic_windows(2, 400, 0, context=True), frames, synthetic_store(frames, seed=0))


def test_trading_r1_teacher_trades_the_days_label(env):
    m = {"prompt_days": 3, "sections": ["market_data", "technical", "conclusion"]}
    decision = reward_functions("trading_r1")["decision"]
    for i in map(int, env.train_rows):
        prompt, evidence, cols = trading_r1.build_query(env, i, m)
        label = int(env.labels[i])
        assert cols["label"] == (label if label >= 0 else None) and math.isfinite(cols["excess_return"])
        assert evidence and all(line in prompt for line in evidence.splitlines())  # shown = in the prompt
        teacher = trading_r1.format_teacher(env, i, m)
        assert trading_r1.position(teacher) == SIDE[ACTIONS[label if label >= 0 else 2]]
        if label >= 0:  # the teacher's decision is scored as the label, above the opposite extreme
            wrong = teacher.replace(f"[[[{ACTIONS[label]}]]]", f"[[[{ACTIONS[4 - label if label != 2 else 0]}]]]")
            r_ok, r_bad = decision([prompt] * 2, [teacher, wrong], label=[label] * 2)
            assert r_ok > r_bad


def test_trading_r1_short_thesis_keeps_sections_quotes_and_decision(env):
    """The short structured variant (``thesis: short``): same sections, one quoted bullet each, the same
    terminal decision, and several times fewer characters than the full thesis."""
    full_m = {"prompt_days": 3, "sections": ["news", "macro"]}
    short_m = {**full_m, "thesis": "short"}
    checked = 0
    for i in map(int, env.train_rows):
        full, short = trading_r1.format_teacher(env, i, full_m), trading_r1.format_teacher(env, i, short_m)
        assert trading_r1.position(short) == trading_r1.position(full)
        assert short.splitlines()[-1] == full.splitlines()[-1]  # DECISION: [[[...]]]
        for tag in ("news", "macro"):
            if f"<{tag}_analysis>" in full:
                block = short.split(f"<{tag}_analysis>")[1].split(f"</{tag}_analysis>")[0]
                bullets = [ln for ln in block.splitlines() if ln.startswith("- ")]
                assert len(bullets) == 1 and bullets[0].endswith(f"`{tag}`") and "*" in bullets[0]
                checked += 1
        assert 3 * len(short) < len(full)
    assert checked >= len(env.train_rows)


def test_trade_r1_teacher_quotes_the_context_and_follows_the_excess_return(env):
    for i in map(int, env.train_rows):
        prompt, evidence, cols = trade_r1.build_query(env, i, {})
        tk = cols["ticker"]
        assert prompt.startswith(evidence) and trade_r1.TASK.format(ticker=tk, h=H) in prompt
        teacher = trade_r1.format_teacher(env, i, {})
        think = teacher.split("<think>")[1].split("</think>")[0]
        assert all(s.strip().rstrip(".") in evidence for s in think.split(". ") if s.strip())
        assert trade_r1.position(teacher) == (1 if cols["excess_return"] > 0 else -1)
        assert 0.0 < trade_r1.consistency(evidence, teacher, tk, env.aliases) <= 1.0
        assert trade_r1.consistency(evidence, f"<think>{think}</think>", tk, env.aliases) == 0.0  # no decision


def test_alphaquanter_teacher_shows_the_real_tool_response_and_the_outcome_regime(env):
    total = reward_functions("alphaquanter")["total"]
    flip = {"BUY": "SELL", "SELL": "BUY", "HOLD": "BUY"}
    for i in map(int, env.train_rows):
        prompt, evidence, cols = alphaquanter.build_query(env, i, {"max_tool_calls": 2})
        assert evidence == ""  # its evidence comes from the data tools at rollout
        tk, t = env.ref(i)
        teacher = alphaquanter.format_teacher(env, i, {})
        call = '{"name": "get_indicator", "arguments": {"indicator": "rsi"}}'
        assert AlphaQuanterTool(env.store)((tk, t), call).observation in teacher
        r = cols["smoothed_return"]
        assert alphaquanter.position(teacher) == (regime(r, RewardConfig().theta) if np.isfinite(r) else 0)
        act = teacher.rsplit("<answer>", 1)[1].split("</answer>")[0]
        wrong = teacher.replace(f"<answer>{act}</answer>", f"<answer>{flip[act]}</answer>")
        r_ok, r_bad = total([prompt] * 2, [teacher, wrong], smoothed_return=[r] * 2)
        assert r_ok > r_bad


def test_stock_r1_decision_item_and_grpo_overrides(env):
    w = env.windows
    i = int(env.rows[0])
    item = stock_r1.decision_item(w, i, H)
    expected = 100.0 * (w.future[i, H - 1, CLOSE] / w.last_close[i] - 1.0)  # h-day close change, %
    assert float(item.answer) == pytest.approx(expected, abs=0.005)
    assert item.tolerance == round(0.35 * math.sqrt(H), 2) and item.split == "test" and item.answer_type == "numeric"
    over = stock_r1.grpo_overrides({"steps": 3, "lr": "2e-3", "accelerator": "cuda"}, 7, 500, 64)
    assert over["train"]["max_steps"] == over["train"]["ckpt_every"] == 3
    assert over["train"]["lr"] == 0.002 and over["train"]["accelerator"] == "cuda"
    assert over["train"]["group_size"] == 4 and over["train"]["queries_per_step"] == 2  # defaults
    assert over["seed"] == over["train"]["seed"] == 7 and over["rollout"]["max_new_tokens"] == 64
    assert over["sft"] == {"run_dir": None} and over["max_context_chars"] == 500
