"""benchmarks/gpu_check/command.py end to end on CPU at tiny width: steps.jsonl rows, the deadline guard, summary."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.gpu_check.command import start_time
from benchmarks.gpu_check.phase import Recorder, run_phase

ROOT = Path(__file__).resolve().parents[1]
# project dependencies the GPU image lacks (/work/.library/device/KINDS.md's package list): the check must not need them
NOT_ON_GPU_IMAGE = ("arch", "pydantic", "pydantic_core", "trl", "yfinance", "statsforecast", "wandb", "stockstats",
                    "rank_bm25", "jsonargparse")
BLOCKED_RUN = f"""
import importlib.machinery, runpy, sys
class Hidden:  # the path finder, blind to the packages the image lacks: as if they were not installed
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {set(NOT_ON_GPU_IMAGE)!r}:
            return None
        return importlib.machinery.PathFinder.find_spec(name, path, target)
    def __getattr__(self, name):
        return getattr(importlib.machinery.PathFinder, name)
sys.meta_path[:] = [Hidden() if f is importlib.machinery.PathFinder else f for f in sys.meta_path]
sys.argv = ["gpu_check", *sys.argv[1:]]
runpy.run_module("benchmarks.gpu_check.command", run_name="__main__")
"""
ROW_KEYS = {"phase", "step", "seconds", "tokens", "tokens_per_s", "peak_memory_gib", "model_flops", "mfu"}


class _Meter:
    def reset(self) -> None: ...
    def sync(self) -> None: ...
    def peak_gib(self) -> float:
        return 1.0


def test_the_budget_counts_from_the_shell_entrys_start() -> None:
    """gpu_check.sh exports GPU_CHECK_T0 (epoch seconds) before nvidia-smi and the interpreter start: the
    deadlines count from there, not from the interpreter's start."""
    now = time.monotonic()
    assert start_time({"GPU_CHECK_T0": str(time.time() - 100.0)}) == pytest.approx(now - 100.0, abs=1.0)
    assert start_time({}) == pytest.approx(now, abs=1.0)


def test_deadline_guard_stops_a_phase_when_the_next_step_would_not_fit(tmp_path) -> None:
    rec = Recorder(tmp_path, {})

    def step(_: int) -> dict:
        time.sleep(0.05)
        return {"tokens": 10.0, "model_flops": 1e9}

    out = run_phase("sft", 100, time.monotonic() + 0.5, step, _Meter(), rec, peak_tflops=1.0)
    assert out["stop_reason"] == "deadline" and 2 <= out["steps_done"] < 100
    rows = [json.loads(x) for x in (tmp_path / "steps.jsonl").read_text().splitlines()]
    assert len(rows) == out["steps_done"] and set(rows[0]) >= ROW_KEYS
    done = run_phase("grpo", 2, time.monotonic() + 60, step, _Meter(), rec, peak_tflops=None)
    assert done["stop_reason"] == "done" and done["steps_done"] == 2 and done["median_mfu"] != done["median_mfu"]


@pytest.mark.slow
def test_gpu_check_tiny_on_cpu(tmp_path) -> None:
    """The whole check at tiny width, with every package the GPU image lacks unimportable: SFT asked for
    1000 steps is stopped by its deadline share, GRPO runs its steps, and every output is written. The
    budget leaves room for a setup slowed by a busy machine (the CI runs the 8B smokes beside it)."""
    out = tmp_path / "acc"
    env = {**os.environ, "WANDB_MODE": "disabled", "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    env.pop("OUT", None)
    cmd = [sys.executable, "-c", BLOCKED_RUN, "--device", "cpu", "--scale", "tiny", "--out", str(out),
           "--budget-s", "90", "--reserve-s", "0", "--sft-steps", "1000", "--grpo-steps", "2", "--queries", "2",
           "--group", "2", "--new-tokens", "8", "--qa-items", "8", "--work", str(tmp_path)]
    res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "gpu_check found: " in res.stdout and "transformers" in res.stdout
    s = json.loads((out / "summary.json").read_text())
    assert s["environment"]["pydantic"].startswith("absent") and s["environment"]["arch"] is None
    assert s["status"] == "ok" and {"environment", "shapes", "params", "setup_s", "sft", "grpo", "total_s"} <= set(s)
    assert s["params"]["match"] and s["shapes"]["lora_r"] == 32 and s["shapes"]["layers"] == 2
    assert s["sft"]["stop_reason"] == "deadline" and 1 <= s["sft"]["steps_done"] < 1000
    assert s["grpo"]["steps_done"] >= 1 and s["grpo"]["kl_reference"]
    rows = [json.loads(x) for x in (out / "steps.jsonl").read_text().splitlines()]
    assert set(rows[0]) >= ROW_KEYS and {r["phase"] for r in rows} == {"sft", "grpo"}
    assert sum(r["phase"] == "sft" for r in rows) == s["sft"]["steps_done"]
    grpo = [r for r in rows if r["phase"] == "grpo"]
    assert all(r["rows"] == 4 and r["tokens"] > 0 and r["model_flops"] > 0 for r in grpo)
    assert s["total_s"] < 90 + 60  # bounded: the guard stops each phase within about one step of its deadline


def test_unfit_machine_stops_with_a_message(tmp_path) -> None:
    """--device cuda where there is none: exit 2, the reason printed and in summary.json."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    from benchmarks.gpu_check.command import main

    assert main(["--device", "cuda", "--out", str(tmp_path)]) == 2
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["status"] == "unfit" and "cuda" in s["error"]


@pytest.mark.slow
def test_gpu_check_bf16_path_on_cpu(tmp_path) -> None:
    """The GPU's dtype path (bf16 weights, bf16-mixed Fabric, fp32 adapter) runs at tiny width on CPU."""
    from benchmarks.gpu_check.command import main

    out = tmp_path / "acc"
    assert main(["--device", "cpu", "--scale", "tiny", "--precision", "bf16", "--out", str(out), "--sft-steps", "2",
                 "--grpo-steps", "1", "--queries", "2", "--group", "2", "--new-tokens", "8", "--qa-items", "8",
                 "--work", str(tmp_path)]) == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["precision"] == "bf16-mixed" and s["sft"]["steps_done"] == 2 and s["grpo"]["steps_done"] == 1
