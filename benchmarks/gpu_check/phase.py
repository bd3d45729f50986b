"""What ``benchmarks.gpu_check.command`` (the command) and ``benchmarks.gpu_check.run`` (its body) share: the
scales, the step recorder, the device meter and ``run_phase``."""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.accelerator import cost_model as cm
from benchmarks.gpu_check.env import read_yaml

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
TINY_POLICY = {"name_or_path": "tiny", "tiny_hidden": 64, "tiny_layers": 2, "tiny_heads": 4, "tiny_kv_heads": 2,
               "tiny_intermediate": 128}
TINY_DECODER = read_yaml(CONFIGS / "sft" / "tiny.yaml")["decoder"]


@dataclass(frozen=True)
class Scale:
    sft_config: str
    grpo_config: str
    tiny: bool = False  # the tiny random Qwen3 and the tiny decoder (what the CPU test runs)


SCALES = {"4b": Scale("sft/qwen3-4b.yaml", "grpo/qwen3-4b.yaml"), "8b": Scale("sft/qwen3-8b.yaml", "grpo/qwen3-8b.yaml"),
          "tiny": Scale("sft/qwen3-4b.yaml", "grpo/qwen3-4b.yaml", tiny=True)}


def finite(x: Any) -> Any:
    """``x`` with NaN / inf floats as None (strict JSON; MFU is NaN where the chip's peak is unknown)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [finite(v) for v in x]
    return x


class Recorder:
    """steps.jsonl + summary.json under ``out``, rewritten as the run goes."""

    def __init__(self, out: Path, summary: dict[str, Any]):
        self.out, self.summary = out, summary
        out.mkdir(parents=True, exist_ok=True)
        (out / "steps.jsonl").write_text("")

    def step(self, row: dict[str, Any]) -> None:
        with (self.out / "steps.jsonl").open("a") as f:
            f.write(json.dumps(finite(row)) + "\n")
        print(f"[{row['phase']} {row['step']}] {row['seconds']:.2f} s, {row['tokens_per_s']:.0f} tok/s, "
              f"peak {row['peak_memory_gib']:.2f} GiB, MFU {row['mfu']:.3f}", flush=True)

    def write(self) -> None:
        (self.out / "summary.json").write_text(json.dumps(finite(self.summary), indent=1, default=str))


class Meter:
    def __init__(self, device: str):
        import torch  # lazy: only once the environment check passed

        self.torch, self.cuda = torch, device == "cuda"

    def reset(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()
            self.torch.cuda.reset_peak_memory_stats()

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def peak_gib(self) -> float:
        from llm.smoke import peak_memory_gib

        return peak_memory_gib("cuda" if self.cuda else "cpu")[0]


def run_phase(name: str, steps: int, deadline: float, step_fn: Callable[[int], dict[str, Any]], meter: Meter,
              rec: Recorder, peak_tflops: float | None) -> dict[str, Any]:
    """Up to ``steps`` calls of ``step_fn`` (-> tokens, model_flops, extra metrics); stops when the
    next step, as long as the last one, would pass ``deadline``."""
    times: list[float] = []
    rows: list[dict[str, Any]] = []
    reason = "done"
    for k in range(steps):
        now = time.monotonic()
        if (times and now + times[-1] > deadline) or now > deadline:
            reason = "deadline"
            break
        meter.reset()
        t0 = time.perf_counter()
        m = step_fn(k)
        meter.sync()
        dt = time.perf_counter() - t0
        times.append(dt)
        row = {"phase": name, "step": k + 1, "seconds": dt, "tokens": m.pop("tokens"),
               "model_flops": m.pop("model_flops"), "peak_memory_gib": meter.peak_gib(), **m}
        row["tokens_per_s"] = row["tokens"] / dt
        row["mfu"] = cm.mfu(row["model_flops"], dt, peak_tflops)
        rows.append(row)
        rec.step(row)
    later = rows[1:] or rows
    out = {"steps_requested": steps, "steps_done": len(rows), "stop_reason": reason if rows else "no time"}
    if rows:
        out.update({"first_step_s": rows[0]["seconds"], "median_step_s": statistics.median(r["seconds"] for r in later),
                    "median_tokens_per_s": statistics.median(r["tokens_per_s"] for r in later),
                    "median_mfu": statistics.median(r["mfu"] for r in later),
                    "peak_memory_gib": max(r["peak_memory_gib"] for r in rows), "total_s": sum(times)})
    return out
