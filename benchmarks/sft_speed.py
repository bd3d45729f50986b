"""``stockr1 bench sft_speed``: seconds per joint-SFT step of the tiny recipe, per way of using the cores.

Modes, each a real ``stockr1 sft`` subprocess on the same prepared run (QA items, decoder init and
traces shared through ``prepare_from``), the same global batch and the same steps:

    1x1   one process, 1 torch thread          (what the demo ran before)
    1x2   one process, 2 torch threads
    2x1   two DDP processes over gloo, 1 thread each (``--train.devices 2 --train.strategy ddp``;
          each rank trains on half of the global batch)

Rounds alternate the modes (1x1, 1x2, 2x1, 1x1, ...) so a change in machine load hits all of them;
the figure per mode is the median over rounds of the median step time after ``--skip`` warm-up steps,
read from the run's ``metrics.jsonl``. Writes ``--out``/metrics.json and a generated README.md with the
ratios to 1x1. Run it alone: two cores shared with anything else make every ratio meaningless.

    stockr1 bench sft_speed --prepared checkpoints/sft/tiny --out results/sft_speed --steps 40 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import yaml

from stockr1.outdir import command_line, generated_line, output_dir, refuse_existing

MODES = {"1x1": (1, 1), "1x2": (1, 2), "2x1": (2, 1)}  # name -> (processes, threads per process)


def step_seconds(metrics: Path, skip: int) -> list[float]:
    """Per-step wall seconds after the first ``skip`` steps, from the cumulative ``sec`` of each line."""
    sec = [json.loads(line)["sec"] for line in metrics.read_text().splitlines() if line.strip()]
    return list(np.diff(sec)[skip:])


def run_mode(name: str, config: Path, work: Path, steps: int) -> Path:
    procs, threads = MODES[name]
    out = work / name
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
           "WANDB_MODE": "disabled", "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "stockr1.cli", "sft", "--config", str(config), "--out", str(work), "--run", name,
           "--max-steps", str(steps), "--train.ckpt_every", str(10 * steps)]
    if procs > 1:
        cmd += ["--train.devices", str(procs), "--train.strategy", "ddp"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{name}: stockr1 sft failed:\n{proc.stderr[-3000:]}")
    return out / "metrics.jsonl"


def readme(res: dict, args: argparse.Namespace, argv: list[str]) -> str:
    lines = ["# Joint SFT step time by way of using 2 CPU cores (`stockr1 bench sft_speed`)", "",
             generated_line(command_line("stockr1 bench sft_speed", argv)), "",
             f"The tiny recipe (`{res['config']}`, global batch {res['batch_size']}), {args.steps} steps per run, the "
             f"first {args.skip} skipped, {args.rounds} alternating rounds; median over rounds of each run's median "
             f"step time. Machine: {os.cpu_count()} cores.", "",
             "| mode | processes x threads | s / step (per round) | median s / step | speed-up vs 1x1 |", "|---|---|---|---|---|"]
    base = res["modes"]["1x1"]["median"]
    for name, m in res["modes"].items():
        p, t = MODES[name]
        lines.append(f"| {name} | {p} x {t} | {', '.join(f'{v:.3f}' for v in m['rounds'])} | {m['median']:.3f} | "
                     f"{base / m['median']:.2f}x |")
    best = min(res["modes"], key=lambda k: res["modes"][k]["median"])
    lines += ["", f"Fastest here: **{best}** ({base / res['modes'][best]['median']:.2f}x of one thread). DDP halves "
              "each rank's batch and adds one gradient all-reduce per step; two threads split each matmul.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="stockr1 bench sft_speed", description=__doc__.splitlines()[0])
    ap.add_argument("--prepared", required=True, help="an SFT run dir with qa.jsonl, decoder_init/, traces.jsonl")
    ap.add_argument("--config", default="configs/sft/tiny.yaml")
    ap.add_argument("--out", required=True, help="output directory (refused if it holds results, unless --overwrite)")
    ap.add_argument("--overwrite", action="store_true", help="replace an --out that holds results")
    ap.add_argument("--work", default="checkpoints/sft_speed")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--skip", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    args = ap.parse_args(argv)
    if args.steps <= args.skip + 1:
        ap.error("--steps must exceed --skip + 1")
    if "1x1" not in args.modes:
        ap.error("--modes must include 1x1 (the reference of every ratio)")
    refuse_existing(args.out, args.overwrite)  # before any timing run
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    cfg = yaml.safe_load(Path(args.config).read_text())
    cfg["prepare_from"] = str(Path(args.prepared).resolve())
    cfg.setdefault("wandb", {})["mode"] = "disabled"
    config = work / "config.yaml"
    config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    per: dict[str, list[float]] = {m: [] for m in args.modes}
    for r in range(args.rounds):
        for name in args.modes:
            secs = step_seconds(run_mode(name, config, work, args.steps), args.skip)
            per[name].append(float(np.median(secs)))
            print(f"round {r + 1} {name}: {per[name][-1]:.3f} s/step", flush=True)
    res = {"config": args.config, "batch_size": int(cfg["train"]["batch_size"]), "steps": args.steps,
           "modes": {k: {"rounds": v, "median": float(np.median(v))} for k, v in per.items()}}
    text = readme(res, args, argv)
    with output_dir(args.out, args.overwrite) as out:
        (out / "metrics.json").write_text(json.dumps(res, indent=1))
        (out / "README.md").write_text(text)
    print(text)
    print(f"wrote {args.out}")
    return 0
