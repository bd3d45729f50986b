"""`stockr1 bench gpu_check`: the one prepared GPU check (``benchmarks/gpu_check/gpu_check.sh`` runs it).

    bash benchmarks/gpu_check/gpu_check.sh                                    # on a fresh clone of a GPU machine
    python -m benchmarks.gpu_check.command --device cuda --scale 4b         # the same, without the shell entry
    python -m benchmarks.gpu_check.command --device cpu --scale tiny --sft-steps 3 --grpo-steps 1 --new-tokens 8

Needs nothing a fresh clone lacks: no weights, no wheel folder, no prepared recipe, no tokenizer, no
network. It (1) prints the versions it found and stops with a message when the machine is unfit
(transformers < 5, no CUDA or no bf16 on ``--device cuda``, a missing package, too little GPU memory
for the cost model's peak); (2) builds a RANDOM-INIT policy of the real shape (``--scale 4b``: the
architecture of Qwen/Qwen3-4B-Instruct-2507 from ``llm.arch`` at full depth, width and vocabulary,
LoRA and the rest of configs/sft/qwen3-4b.yaml's policy section) directly on the device (built under
``torch.device``: no CPU copy), with the offline tokenizer trained in-process on the run's traces; the
data are the synthetic source (the embedded sample needs ``arch``, which GPU images lack); (3) runs
``--sft-steps`` joint-SFT steps through ``SFTTrainer.train_step`` and ``--grpo-steps`` u-GRPO steps of
``--queries`` queries x G = ``--group`` rollouts x ``--new-tokens`` new tokens through
``GRPOTrainer.train_step`` (configs/grpo/qwen3-4b.yaml's train section), each phase stopped early by
a deadline guard when its share of ``--budget-s`` is used (the next step would not fit); (4) writes
under ``--out`` (default ``$OUT/accelerator`` when ``OUT`` is set, else results/accelerator)
``steps.jsonl`` (one row per step: phase, step, seconds, tokens/s, peak memory, model FLOPs, MFU) and
``summary.json`` (versions, shapes, parameter counts measured and predicted, per-phase medians, stop
reasons), rewritten after every step so a kill keeps what was measured.

MFU = the cost model's model FLOPs of the step (``benchmarks.accelerator.cost_model``; the decoder's and the
checkpoint recompute's FLOPs are not counted) / seconds / the chip's bf16 dense peak.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchmarks.gpu_check.env import Unfit, check_environment
from benchmarks.gpu_check.phase import SCALES, Meter, Recorder


def start_time(environ: Mapping[str, str] = os.environ) -> float:
    """``time.monotonic()`` of the run's start: the shell entry's (``GPU_CHECK_T0``, epoch seconds, so
    nvidia-smi and the interpreter's startup count against the budget), else now."""
    t0 = environ.get("GPU_CHECK_T0")
    return time.monotonic() - (max(0.0, time.time() - float(t0)) if t0 else 0.0)


def main(argv: list[str] | None = None) -> int:
    t_start = start_time()
    ap = argparse.ArgumentParser(prog="stockr1 bench gpu_check", description=__doc__.split("\n")[0])
    default_out = Path(os.environ["OUT"]) / "accelerator" if os.environ.get("OUT") else Path("results/accelerator")
    ap.add_argument("--out", type=Path, default=default_out)
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--scale", choices=tuple(SCALES), default="4b")
    ap.add_argument("--precision", choices=("auto", "bf16", "fp32"), default="auto",
                    help="auto: bf16 weights + bf16-mixed on cuda, fp32 on cpu; bf16 on cpu exercises the dtype path")
    ap.add_argument("--budget-s", type=float, default=525.0,
                    help="whole run, startup and setup included (gpu_check.sh's backstop ends it by 9 minutes)")
    ap.add_argument("--reserve-s", type=float, default=15.0, help="kept back from the budget for writing results")
    ap.add_argument("--sft-share", type=float, default=0.5, help="share of the time left after setup for SFT")
    ap.add_argument("--sft-steps", type=int, default=300)
    ap.add_argument("--grpo-steps", type=int, default=3)
    ap.add_argument("--queries", type=int, default=8, help="GRPO queries per step")
    ap.add_argument("--group", type=int, default=8, help="G: rollouts per query")
    ap.add_argument("--new-tokens", type=int, default=512, help="new tokens per rollout")
    ap.add_argument("--qa-items", type=int, default=64, help="QA train items -> SFT traces and GRPO queries")
    ap.add_argument("--max-context-chars", type=int, default=1000, help="context characters per prompt (sets tokens per step)")
    ap.add_argument("--tokenizer-vocab", type=int, default=2000)
    ap.add_argument("--work", type=Path, default=None, help="scratch dir (default: a temporary directory)")
    args = ap.parse_args(argv)
    for k, v in (("HF_HUB_OFFLINE", "1"), ("WANDB_MODE", "disabled"), ("TOKENIZERS_PARALLELISM", "false")):
        os.environ.setdefault(k, v)
    summary: dict[str, Any] = {"status": "starting", "args": {k: str(v) for k, v in vars(args).items()},
                               "gpu_check_has_run_on": args.device,
                               "memory_kind": "torch.cuda.max_memory_allocated per step" if args.device == "cuda"
                               else "process peak RSS (monotone)"}
    rec = Recorder(args.out, summary)
    try:
        summary["environment"] = check_environment(args.device)
    except Unfit as e:
        summary.update(status="unfit", error=str(e))
        rec.write()
        print(f"gpu_check: this machine is unfit: {e}", file=sys.stderr, flush=True)
        return 2
    rec.write()
    # lazy: torch and the model stack load only once the environment check passed
    from benchmarks.gpu_check.run import run_check

    try:
        with tempfile.TemporaryDirectory(dir=args.work, prefix="gpu_check-") as work:
            run_check(args, SCALES[args.scale], Path(work), rec, Meter(args.device), t_start)
        summary["status"] = "ok"
    except Unfit as e:
        summary.update(status="unfit", error=str(e))
        print(f"gpu_check: unfit: {e}", file=sys.stderr, flush=True)
    except Exception as e:  # keep what was measured
        summary.update(status="error", error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc(limit=12))
        print(summary["traceback"], file=sys.stderr, flush=True)
    summary["total_s"] = time.monotonic() - t_start
    gc.collect()
    rec.write()
    print(json.dumps({k: summary.get(k) for k in ("status", "total_s", "sft", "grpo", "error")}, indent=1, default=str))
    return {"ok": 0, "unfit": 2}.get(summary["status"], 1)


if __name__ == "__main__":
    raise SystemExit(main())

