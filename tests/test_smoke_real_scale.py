"""`stockr1 sft/grpo --config configs/{sft,grpo}/qwen3-{4b,8b}.yaml --smoke` on CPU: every real-scale
config's architecture at full width and vocabulary (random weights, 2 layers, LoRA as configured), one step
through SFTTrainer.train_step / GRPOTrainer.train_step, exit 0, the summary line. Run in a subprocess so the
exit code and peak RSS are the CLI's.

Each smoke builds a large model: 4B 608M parameters (~7 GiB peak RSS, ~1.5 min on one core), 8B 1.67B
(~13 GiB, ~4 min). CI runs `pytest -n 2` on a 24 GiB machine, so two of them at once could exhaust it: all
four share one xdist group, which `./run test` schedules with ``--dist loadgroup`` (one worker, one after
another)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROTOCOL_ROWS = 11  # train_protocol_tokens: the protocol tokens' embedding rows
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("real_scale_smoke")]


@dataclass(frozen=True)
class Scale:
    config: str  # configs/{sft,grpo}/<config>.yaml
    model: str
    hidden: int
    tied: bool  # tied input embedding and lm_head: the protocol rows are trained once, else in both


SCALES = {"4b": Scale("qwen3-4b", "Qwen/Qwen3-4B-Instruct-2507", 2560, True),
          "8b": Scale("qwen3-8b", "Qwen/Qwen3-8B", 4096, False)}


def _line(scale: Scale) -> re.Pattern[str]:
    return re.compile(rf"^smoke (sft|grpo) \S+: {re.escape(scale.model)} hidden {scale.hidden}, 2 layers, 151936 "
                      r"embedding rows, LoRA on 14 modules, \d+ tokens, \S+ on \S+: [\d.]+ s/step, peak memory "
                      r"[\d.]+ GiB \([^)]+\), data: (sample \(dataset data/sp500 not built\)|dataset data/sp500)$",
                      re.M)


def _smoke(stage: str, scale: Scale, out: Path) -> dict:
    env = {**os.environ, "WANDB_MODE": "disabled", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    proc = subprocess.run([sys.executable, "-m", "stockr1.cli", stage, "--config",
                           f"configs/{stage}/{scale.config}.yaml", "--smoke", "--out", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = _line(scale).search(proc.stdout)
    assert m and m.group(1) == stage, proc.stdout[-2000:]
    facts = json.loads((out / "smoke.json").read_text())
    assert facts["line"] == m.group(0)
    _check_model(facts, scale)
    return facts


def _check_model(f: dict, scale: Scale) -> None:
    h = scale.hidden
    assert (f["hidden"], f["layers"], f["embedding_rows"], f["d_ts"], f["decoder_d_llm"]) == (h, 2, 151936, h, h)
    assert f["lora_modules"] == 14 and f["lora_targets"] == sorted(
        ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    assert f["trainable_token_params"] == PROTOCOL_ROWS * h * (1 if scale.tied else 2)
    assert f["sec_per_step"] > 0 and f["peak_memory_gib"] > 0


@pytest.mark.parametrize("name", list(SCALES), ids=list(SCALES))
def test_sft_smoke_of_the_real_scale_config(name: str, tmp_path: Path) -> None:
    f = _smoke("sft", SCALES[name], tmp_path)
    assert f["tokens"] < 2000 and f["l_sft"] > 0
    assert f["l_ts_weighted"] == pytest.approx(0.1 * f["l_ts"], rel=1e-5)  # lambda_ts of the config
    assert {"grad_norm_policy", "grad_norm_decoder"} <= set(f)  # grad_clip_scope: per_model in both configs


@pytest.mark.parametrize("name", list(SCALES), ids=list(SCALES))
def test_grpo_smoke_of_the_real_scale_config(name: str, tmp_path: Path) -> None:
    f = _smoke("grpo", SCALES[name], tmp_path)
    assert f["rollouts"] == 2 and f["prompt_tokens"] < 1000

