"""`stockr1 bench sft_recipe`: validation-only evaluation grid, per-variant overrides, resume."""

from __future__ import annotations

import json
from pathlib import Path

import torch
import yaml

from benchmarks.sft_recipe import main, run_variant, val_slice
from llm.qa.core import QAItem


def _item(i: int, family: str, split: str) -> QAItem:
    return QAItem(f"q{i}", family, "t", "q?", "yes", "yes_no", i, "T", "2010-01-01", split)


def test_val_slice_takes_families_round_robin_and_never_test() -> None:
    items = [_item(i, f, s) for i, (f, s) in enumerate(
        [("a", "val"), ("a", "val"), ("a", "val"), ("b", "val"), ("b", "test"), ("c", "val"), ("c", "train")])]
    got = val_slice(items, 4)
    assert [it.family for it in got] == ["a", "b", "c", "a"]
    assert all(it.split == "val" for it in val_slice(items, 10)) and len(val_slice(items, 10)) == 5


def _sft_config(tmp: Path) -> Path:
    cfg = {
        "data": {"source": "synthetic", "n_tickers": 2, "n_days": 260, "seed": 0, "lookback": 30, "horizon": 10},
        "qa": {"n_train": 12, "n_val": 6, "n_test": 0, "seed": 0},
        "traces": {"drop_trivial": False},
        "decoder": {"seed": 0, "warmup_steps": 0, "tool_samples": 4,
                    "ts": {"lookback": 30, "horizon": 10, "patch_len": 10, "d_model": 16, "n_layers": 1,
                           "n_heads": 2, "ffn_dim": 32, "dropout": 0.0, "d_llm": 16},
                    "action": {"cond_dim": 8, "emb_dim": 4, "hidden": 16}},
        "policy": {"name_or_path": "tiny", "tokenizer_path": str(tmp / "tok"), "tiny_hidden": 32, "tiny_layers": 1,
                   "tiny_heads": 2, "tiny_kv_heads": 1, "tiny_intermediate": 64, "lora_r": 0, "d_ts": 16},
        "tokenizer_vocab": 500,
        "train": {"lr": 1.0e-3, "max_steps": 4, "warmup_steps": 1, "batch_size": 2, "ckpt_every": 2, "log_every": 2,
                  "accelerator": "cpu"},
    }
    path = tmp / "sft.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_sweep_evaluates_each_variant_on_its_grid_and_resumes(tmp_path: Path) -> None:
    sweep = {"sft_config": str(_sft_config(tmp_path)), "eval_at": [2, 4], "n_eval": 3, "max_new_tokens": 8,
             "average_last": 2,
             "common": {"prepare_from": str(tmp_path / "shared")},
             "variants": {"base": {}, "fast": {"train": {"lr": "5e-2"}, "eval_at": [4]}}}  # YAML-1.1 float string
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(sweep))
    work, out = tmp_path / "work", tmp_path / "out"
    assert main(["--config", str(tmp_path / "sweep.yaml"), "--out", str(out), "--work", str(work), "--threads", "1"]) == 0
    res = json.loads((out / "metrics.json").read_text())["results"]
    # the shared folder was written once, first, and every variant trained on exactly its traces
    shared = (tmp_path / "shared" / "traces.jsonl").read_text()
    assert shared and all((work / v / "traces.jsonl").read_text() == shared for v in ("base", "fast"))
    assert set(res["base"]) == {"2", "4", "avg2-4"} and set(res["fast"]) == {"4"}  # fast: one state, no average
    for m in (res["base"]["4"], res["fast"]["4"]):
        assert m["n"] == 3 and 0 <= m["action_and_answer_rate"] <= 100 and m["tokens_per_answer"] <= 8
    assert res["base"]["4"]["l_sft"] != res["fast"]["4"]["l_sft"]  # the override reached the optimiser
    assert "| fast | 4 |" in (out / "table.md").read_text()
    # every evaluated state is kept for export, and step-2's is not the final one
    step2, step4 = (torch.load(work / "base" / f"step-{k}.ckpt", weights_only=False) for k in (2, 4))
    assert (step2["step"], step4["step"]) == (2, 4)
    # the averaged state: the mean of the two, graded like a step and listed after step 4
    avg = torch.load(work / "base" / "avg2-4.ckpt", weights_only=False)
    for k, v in avg["model"].items():
        if torch.is_floating_point(v):
            torch.testing.assert_close(v, (step2["model"][k] + step4["model"][k]) / 2)
    assert avg["step"] == 4 and res["base"]["avg2-4"]["n"] == 3
    rows = [r for r in (out / "table.md").read_text().splitlines() if r.startswith("| base")]
    assert [r.split(" | ")[1] for r in rows] == ["2", "4", "avg2-4"]
    assert any(not torch.equal(step2["model"][k], step4["model"][k]) for k in step2["model"])
    # rerun: every grid point is cached, nothing trains again (the checkpoint stays at the last step)
    before = (work / "base" / "last.ckpt").stat().st_mtime_ns
    assert run_variant(sweep, "base", work, "cpu") == res["base"]
    assert (work / "base" / "last.ckpt").stat().st_mtime_ns == before
