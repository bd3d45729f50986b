"""`stockr1 bench accelerator`: the tiny CPU run end to end, and the 4B architecture without allocating it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from benchmarks.accelerator.command import QWEN3_4B, TINY_QWEN3, main, qwen3_config, qwen3_param_count
from benchmarks.cli import BENCHMARKS
from stockr1.config import load_yaml


def test_qwen3_4b_config_numbers_and_param_count() -> None:
    cfg = qwen3_config(QWEN3_4B)
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads) == (2560, 36, 32, 8)
    assert (cfg.intermediate_size, cfg.vocab_size, cfg.head_dim) == (9728, 151936, 128)
    assert cfg.tie_word_embeddings and cfg.rope_parameters["rope_theta"] == 5_000_000.0
    assert cfg.max_position_embeddings == 262144 and cfg.rms_norm_eps == 1e-6
    # by hand: embedding 151936*2560; per layer q/o 2*2560*4096, k/v 2*2560*1024, MLP 3*2560*9728,
    # q/k norms 2*128, layer norms 2*2560; final norm 2560
    layer = 2 * 2560 * 4096 + 2 * 2560 * 1024 + 3 * 2560 * 9728 + 2 * 128 + 2 * 2560
    assert qwen3_param_count(cfg) == 151936 * 2560 + 36 * layer + 2560 == 4_022_468_096  # model card: 4.0B
    assert 36 * layer + 2560 == pytest.approx(3.6e9, rel=0.01)  # model card: 3.6B non-embedding
    with torch.device("meta"):  # the real HF module, no memory behind it
        model = AutoModelForCausalLM.from_config(cfg)
    assert sum(p.numel() for p in model.parameters()) == qwen3_param_count(cfg)


@pytest.mark.parametrize("tied", [True, False])
def test_param_count_matches_a_built_tiny_model(tied: bool) -> None:
    cfg = qwen3_config({**TINY_QWEN3, "tie_word_embeddings": tied}, vocab_size=300)
    model = AutoModelForCausalLM.from_config(cfg)
    assert sum(p.numel() for p in model.parameters()) == qwen3_param_count(cfg)


def test_tiny_cpu_run_end_to_end(tmp_path) -> None:
    assert "accelerator" in BENCHMARKS
    out = tmp_path / "acc"
    rc = main(["--out", str(out), "--device", "cpu", "--scale", "tiny", "--steps", "1", "--max-new-tokens", "8",
               "--threads", "1"])
    run = json.loads((out / "run.json").read_text())
    assert rc == 0, run["errors"]
    metrics = json.loads((out / "metrics.json").read_text())
    ts, pol = metrics["ts_encoder-tiny"], metrics["policy-qwen3-tiny-random"]
    assert all(math.isfinite(v) for m in metrics.values() for v in m.values())
    assert ts["ts_steps_per_s"] > 0 and ts["ts_params"] > 0
    # LoRA: a minority of parameters train; the SFT step moved every LoRA matrix
    assert 0 < pol["params_trainable"] < pol["params_total"]
    assert pol["sft_lora_changed_frac"] == 1.0 and pol["sft_trainable_max_abs_delta"] > 0
    assert pol["sft_tokens_per_step"] > 0 and pol["sft_step_s"] > 0
    g = load_yaml(Path(__file__).parents[1] / "configs" / "grpo" / "tiny.yaml")["train"]["group_size"]
    assert 0 < pol["gen_tokens"] <= g * 8 and pol["gen_rows"] == g and pol["gen_tokens_per_s"] > 0
    assert pol["logprob_keep"] <= 8 < pol["logprob_seq_len"]  # only the completion span was scored
    assert pol["logprob_keep_max_abs_diff"] < 1e-5
    assert pol["grpo_rollouts"] == g and pol["grpo_step_s"] > 0  # 1 query x the tiny recipe's G
    assert "peak_gpu" not in json.dumps(metrics)  # cpu: no device-memory numbers pretending to be GPU ones
    table = (out / "table.md").read_text()
    assert "### policy-qwen3-tiny-random" in table and "| sft_step_s |" in table
