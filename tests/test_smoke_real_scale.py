"""`stockr1 sft/grpo --config configs/{sft,grpo}/qwen3-4b.yaml --smoke` on CPU: the real Qwen3-4B-Instruct-2507
architecture at full width and vocabulary (random weights, 2 layers, LoRA as configured), one step through
SFTTrainer.train_step / GRPOTrainer.train_step, exit 0, the summary line. Each builds a 608M-parameter model
(~7 GiB peak RSS, ~1.5 min on one shared core); run in a subprocess so the exit code and peak RSS are the CLI's."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINE = re.compile(r"^smoke (sft|grpo) \S+: Qwen/Qwen3-4B-Instruct-2507 hidden 2560, 2 layers, 151936 embedding rows, "
                  r"LoRA on 14 modules, \d+ tokens, \S+ on \S+: [\d.]+ s/step, peak memory [\d.]+ GiB \([^)]+\), "
                  r"data: (sample \(dataset data/sp500 not built\)|dataset data/sp500)$", re.M)


def _smoke(stage: str, out: Path) -> dict:
    env = {**os.environ, "WANDB_MODE": "disabled", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    proc = subprocess.run([sys.executable, "-m", "stockr1.cli", stage, "--config", f"configs/{stage}/qwen3-4b.yaml",
                           "--smoke", "--out", str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = LINE.search(proc.stdout)
    assert m and m.group(1) == stage, proc.stdout[-2000:]
    facts = json.loads((out / "smoke.json").read_text())
    assert facts["line"] == m.group(0)
    return facts


def _check_model(f: dict) -> None:
    assert (f["hidden"], f["layers"], f["embedding_rows"], f["d_ts"], f["decoder_d_llm"]) == (2560, 2, 151936, 2560, 2560)
    assert f["lora_modules"] == 14 and f["lora_targets"] == sorted(
        ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    assert f["trainable_token_params"] == 11 * 2560  # train_protocol_tokens: the 11 protocol rows (tied head)
    assert f["sec_per_step"] > 0 and f["peak_memory_gib"] > 0


@pytest.mark.slow
def test_sft_smoke_of_the_4b_config(tmp_path: Path) -> None:
    f = _smoke("sft", tmp_path)
    _check_model(f)
    assert f["tokens"] < 2000 and f["l_sft"] > 0
    assert f["l_ts_weighted"] == pytest.approx(0.1 * f["l_ts"], rel=1e-5)  # lambda_ts of the config
    assert {"grad_norm_policy", "grad_norm_decoder"} <= set(f)  # grad_clip_scope: per_model in the 4B config


@pytest.mark.slow
def test_grpo_smoke_of_the_4b_config(tmp_path: Path) -> None:
    f = _smoke("grpo", tmp_path)
    _check_model(f)
    assert f["rollouts"] == 2 and f["prompt_tokens"] < 1000
