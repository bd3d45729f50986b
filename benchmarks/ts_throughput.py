"""Training throughput of the TS encoder (windows / second) for the tiny and small configs.

    python -m benchmarks.ts_throughput --out results/ts_encoder/throughput.json [--threads 2]

One optimiser step = forward + L_TS + backward + AdamW on a batch of random [B, 5, 90] windows
(the cost does not depend on the values). Both configs are measured in the same run, side by side.
The machine is shared, so besides wall-clock throughput we record process CPU time: windows per
CPU-second x threads is what an otherwise idle machine would give, and the load average is saved.
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
    bs = batch_size or int(spec["data"]["batch_size"])
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
            "windows_per_s": n / wall, "windows_per_cpu_s": n / cpu,
            "windows_per_s_idle_estimate": n / cpu * torch.get_num_threads()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="results/ts_encoder/throughput.json")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--configs", nargs="+", default=["tiny", "small"])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=None, help="default: each config's data.batch_size")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    results = {name: measure(name, args.steps if name == "tiny" else max(3, args.steps // 4), args.warmup,
                             args.batch_size) for name in args.configs}
    report = {
        "what": "training windows/second (forward + L_TS + backward + AdamW), random [B,5,90] inputs",
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count(), "torch_threads": args.threads,
                    "torch": torch.__version__, "load_avg_after": os.getloadavg()},
        "results": results,
    }
    if "tiny" in results and "small" in results:
        report["small_over_tiny_cost"] = results["tiny"]["windows_per_cpu_s"] / results["small"]["windows_per_cpu_s"]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    for name, r in results.items():
        print(f"{name:6s} {r['params'] / 1e6:7.2f}M  bs={r['batch_size']:4d}  {r['windows_per_s']:8.1f} win/s wall  "
              f"{r['windows_per_s_idle_estimate']:8.1f} win/s idle-estimate")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
