"""Training throughput of the TS encoder (windows / second) for the tiny and small configs.

    python -m benchmarks.ts_throughput --out results/ts_encoder/throughput.json [--threads 1 2]

One optimiser step = forward + L_TS + backward + AdamW on a batch of random [B, 5, 90] windows
(the cost does not depend on the values). Both configs are measured in the same run, side by side.
The machine is shared, so besides wall-clock throughput we record process CPU time and the load
average. Windows per CPU-second is the idle-machine rate for one thread; with two threads on a
loaded machine it mostly measures OpenMP spin-waiting, which is why both thread counts are run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import torch
import yaml

from ts_encoder.config import LossWeights, TSEncoderConfig
from ts_encoder.loss import ts_loss
from ts_encoder.model import TSEncoder, count_parameters

CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "ts_encoder"


def measure(name: str, steps: int, warmup: int, batch_size: int | None) -> dict[str, float]:
    spec = yaml.safe_load((CONFIGS / f"{name}.yaml").read_text())
    cfg = TSEncoderConfig(**spec["model"]["encoder"])
    # tiny at its training batch; the large configs at 16 (a step of small at 256 is minutes on CPU)
    bs = batch_size or (int(spec["data"]["batch_size"]) if name == "tiny" else 16)
    torch.manual_seed(0)
    model = TSEncoder(cfg).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    x, y = torch.randn(bs, 5, cfg.lookback) * 0.01, torch.randn(bs, 5, cfg.horizon) * 0.01
    weights = LossWeights()

    def step() -> None:
        loss, _ = ts_loss(model(x), y, weights)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for _ in range(warmup):
        step()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    for _ in range(steps):
        step()
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    n = steps * bs
    return {"params": count_parameters(cfg), "batch_size": bs, "steps": steps, "wall_s": wall, "cpu_s": cpu,
            "windows_per_s": n / wall, "windows_per_cpu_s": n / cpu, "threads": torch.get_num_threads()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="results/ts_encoder/throughput.json")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--configs", nargs="+", default=["tiny", "small"])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=None, help="default: tiny's data.batch_size, 16 for the others")
    args = ap.parse_args(argv)
    results = {}
    for threads in args.threads:
        torch.set_num_threads(threads)
        for name in args.configs:
            steps, warmup = (args.steps, args.warmup) if name == "tiny" else (max(2, args.steps // 5), 1)
            results[f"{name}@{threads}thr"] = measure(name, steps, warmup, args.batch_size)
    report = {
        "what": "training windows/second (forward + L_TS + backward + AdamW), random [B,5,90] inputs",
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count(), "torch_threads": args.threads,
                    "torch": torch.__version__, "load_avg_after": os.getloadavg()},
        "results": results,
    }
    for threads in args.threads:
        tiny, small = results.get(f"tiny@{threads}thr"), results.get(f"small@{threads}thr")
        if tiny and small:
            report[f"small_over_tiny_cpu_cost@{threads}thr"] = tiny["windows_per_cpu_s"] / small["windows_per_cpu_s"]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    for name, r in results.items():
        print(f"{name:12s} {r['params'] / 1e6:7.2f}M  bs={r['batch_size']:4d}  {r['windows_per_s']:8.1f} win/s wall  "
              f"{r['windows_per_cpu_s']:8.1f} win/CPU-s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
