"""`stockr1 bench rollout_batch` on a tiny random-init GRPO setup: both modes decode the same training
queries, greedy rows agree token for token, and the generated README reports what was measured."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from benchmarks.rollout_batch import main
from tests.tiny_runs import DATA, DECODER_TS, tiny_sft_config


def _write_config(tmp_path: Path, lora_r: int) -> None:
    """grpo.yaml of a tiny random-init GRPO setup (full fine-tuning at lora_r 0, else a LoRA policy)."""
    base = tiny_sft_config(tmp_path, {"n_train": 12, "n_val": 4, "n_test": 4}, {}, {})
    grpo = {"run": "g", "seed": 0, "data": DATA, "max_context_chars": 200, "qa": base["qa"],
            "decoder": {"seed": 0, "ts": DECODER_TS, "action": {"cond_dim": 8, "emb_dim": 2, "hidden": 16}},
            "policy": {**base["policy"], "lora_r": lora_r}, "rollout": {"max_new_tokens": 12},
            "train": {"group_size": 2}, "wandb": {"mode": "disabled"}}
    (tmp_path / "grpo.yaml").write_text(yaml.safe_dump(grpo))


def test_rollout_batch_compares_the_same_queries_with_and_without_compaction(tmp_path: Path) -> None:
    _write_config(tmp_path, lora_r=0)
    out = tmp_path / "out"
    assert main(["--config", str(tmp_path / "grpo.yaml"), "--queries", "3", "--group", "2", "--temperatures", "0",
                 "1.0", "--max-new-tokens", "12", "--threads", "1", "--out", str(out)]) == 0
    res = json.loads((out / "results.json").read_text())
    assert [(r["temperature"], r["compact"]) for r in res["runs"]] == [(0.0, False), (0.0, True), (1.0, False),
                                                                        (1.0, True)]
    assert all(r["rollouts"] == 6 and 0 < r["generated_tokens"] <= 6 * 12 for r in res["runs"])
    assert res["ratios"]["0.0"]["same_tokens"]  # greedy: compaction changes no row
    assert res["ratios"]["0.0"]["wall"] == res["runs"][1]["wall_s"] / res["runs"][0]["wall_s"]
    text = (out / "README.md").read_text()
    assert "| 0.0 | on |" in text and "| 1.0 | off |" in text and "temperature 0.0: wall time x" in text


def test_rollout_batch_compares_a_lora_policy_with_and_without_its_merged_twin(tmp_path: Path) -> None:
    _write_config(tmp_path, lora_r=4)
    out = tmp_path / "out"
    assert main(["--config", str(tmp_path / "grpo.yaml"), "--queries", "3", "--group", "2", "--temperatures", "0",
                 "--max-new-tokens", "12", "--threads", "1", "--compare", "merge_lora", "--out", str(out)]) == 0
    res = json.loads((out / "results.json").read_text())
    assert [(r["merge_lora"], r["compact"]) for r in res["runs"]] == [(False, True), (True, True)]  # compaction on in both
    assert res["ratios"]["0.0"]["same_tokens"]  # greedy: the merged twin decodes the policy's own rows
    for r in res["runs"]:  # the sampler's log-probs are the policy's own, up to rounding, with or without the twin
        assert r["sampler_gap"]["tokens"] == r["generated_tokens"] and r["sampler_gap"]["mean"] < 1e-4
    text = (out / "README.md").read_text()
    assert text.startswith("# Decoding a LoRA policy with and without a merged twin")
    assert "| 0.0 | off |" in text and "| 0.0 | on |" in text and "decoding through a twin with the LoRA adapter merged" in text


def test_a_bf16_twin_samples_with_log_probs_away_from_the_policys(tmp_path: Path) -> None:
    _write_config(tmp_path, lora_r=4)
    out = tmp_path / "out"
    assert main(["--config", str(tmp_path / "grpo.yaml"), "--queries", "3", "--group", "2", "--temperatures", "1.0",
                 "--max-new-tokens", "12", "--threads", "1", "--compare", "twin_bf16", "--out", str(out)]) == 0
    res = json.loads((out / "results.json").read_text())
    off, on = res["runs"]
    assert (off["twin_bf16"], off["merge_lora"], on["twin_bf16"], on["merge_lora"]) == (False, False, True, True)
    assert on["twin_dtype"] == "torch.bfloat16" and off["twin_dtype"] is None
    assert off["sampler_gap"]["mean"] < 1e-4 < on["sampler_gap"]["mean"]  # the rounded twin's draws are not the policy's
    text = (out / "README.md").read_text()
    assert f"temperature 1.0, bf16 merged twin on: mean {on['sampler_gap']['mean']:.4f}" in text
