"""Summarise a pretraining run: checkpoint metrics on val and test beside the random walk, and the
training curve / cost. (The full comparison with every baseline and bootstrap intervals is
``stockr1 bench forecast``.)

    python -m ts_encoder.report --checkpoint checkpoints/ts_encoder/tiny/best.ckpt \
        --metrics-csv runs/ts_encoder/tiny/version_0/metrics.csv --time-log time.txt \
        --out results/ts_encoder/tiny_training.json
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np

from stockr1.baselines.simple import RandomWalk
from stockr1.metrics.forecast import forecast_metrics
from stockr1.types import Windows, train_only
from ts_encoder.datamodule import load_split_windows

KEYS = ("cov_close90", "width_close90", "crps", "return_rmse", "rv_mae_dist", "rv_r2_dist", "cov_high95",
        "cov_low05", "pinball", "da_3", "da_5", "da_10", "price_mape")


def _daily_diagnostics(module, windows: Windows) -> dict[str, float]:
    """Return-space calibration of the daily heads (what the loss trains directly)."""
    import torch

    with torch.no_grad():
        out = module.eval().model(torch.as_tensor(windows.x, dtype=torch.float32))
    y = torch.as_tensor(windows.y, dtype=torch.float32)
    z = ((y[:, 3] - out.mu[:, 1]) / out.sigma[:, 1]).abs()
    return {"daily_cov90_close_ret": float((z <= 1.6448536).float().mean()),
            "daily_cov_high95_ret": float((y[:, 1] <= out.q_high).float().mean()),
            "daily_cov_low05_ret": float((y[:, 2] <= out.q_low).float().mean())}


def time_log(path: str | None) -> dict[str, float]:
    """user / system CPU seconds and wall seconds from a ``/usr/bin/time -v`` log."""
    if not path or not Path(path).exists():
        return {}
    text = Path(path).read_text()
    out = {}
    for key, pat in (("user_s", r"User time \(seconds\): ([\d.]+)"), ("sys_s", r"System time \(seconds\): ([\d.]+)")):
        m = re.search(pat, text)
        if m:
            out[key] = float(m.group(1))
    m = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):([\d.]+)", text)
    if m:
        h, mnt, sec = m.groups()
        out["wall_s"] = int(h or 0) * 3600 + int(mnt) * 60 + float(sec)
    if "user_s" in out:
        out["cpu_s"] = out["user_s"] + out.get("sys_s", 0.0)
    return out


def curve(metrics_csv: str | None) -> list[dict[str, float]]:
    if not metrics_csv or not Path(metrics_csv).exists():
        return []
    import pandas as pd

    df = pd.read_csv(metrics_csv)
    cols = [c for c in ("val/loss", "val/cov_close90", "val/crps", "val/diag_cov90_close_ret") if c in df]
    val = df.dropna(subset=["val/loss"]).groupby("epoch")[cols].last().reset_index()
    return [{k: float(v) for k, v in row.items()} for row in val.to_dict("records")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--source", default="sample")
    ap.add_argument("--path", default=None)
    ap.add_argument("--metrics-csv", default=None)
    ap.add_argument("--time-log", default=None)
    ap.add_argument("--n-samples", type=int, default=200)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)

    from ts_encoder.module import TSForecastModule

    module = TSForecastModule.load_from_checkpoint(args.checkpoint, map_location="cpu").eval()
    cfg = module.cfg
    windows = load_split_windows(args.source, args.path, cfg.lookback, cfg.horizon)
    rw = RandomWalk().fit(train_only(windows), windows.split_of("val"))
    report: dict = {"checkpoint": args.checkpoint, "encoder": cfg.to_dict(),
                    "params": int(sum(p.numel() for p in module.model.parameters())),
                    "random_walk_vol_window": rw.vol_window, "splits": {}}
    for split in ("val", "test"):
        w = windows.split_of(split)
        m = forecast_metrics(module.forecast(w, n_samples=args.n_samples, seed=0), w)
        b = forecast_metrics(rw.predict(w, n_samples=args.n_samples, seed=0), w)
        report["splits"][split] = {"n_windows": len(w),
                                   "model": {k: m[k] for k in KEYS if k in m} | _daily_diagnostics(module, w),
                                   "random_walk": {k: b[k] for k in KEYS if k in b}}
    report["training"] = time_log(args.time_log)
    report["val_curve"] = curve(args.metrics_csv)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, default=lambda o: o.item() if isinstance(o, np.generic) else str(o)) + "\n")
    for split, r in report["splits"].items():
        print(split, {k: round(v, 4) for k, v in r["model"].items()})
        print(split, "rw", {k: round(v, 4) for k, v in r["random_walk"].items()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
