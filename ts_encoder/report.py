"""Summarise a pretraining run: checkpoint metrics on val and test beside the random walk, and the
training curve / cost. (The full comparison with every baseline and bootstrap intervals is
``stockr1 bench forecast``.)

    python -m ts_encoder.report --checkpoint checkpoints/ts_encoder/tiny/best.ckpt \
        --metrics-csv runs/ts_encoder/tiny/version_0/metrics.csv --time-log time.txt \
        --out results/ts_encoder/tiny_training.json
    python -m ts_encoder.report --readme results/ts_encoder   # README.md again from the saved JSON

Writing the summary also writes ``README.md`` beside it, generated from the summary (and the
``throughput.json`` of ``benchmarks.ts_throughput`` when present); nothing in it is typed by hand.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np

from stockr1.baselines.simple import RandomWalk
from stockr1.data.run_data import source_windows
from stockr1.metrics.forecast import forecast_metrics
from stockr1.outdir import atomic_write, command_line, generated_line
from stockr1.types import Windows, train_only

KEYS = ("cov_close90", "width_close90", "crps", "return_rmse", "rv_mae_dist", "rv_r2_dist", "cov_high95",
        "cov_low05", "pinball", "da_3", "da_5", "da_10", "price_mape")


def _daily_diagnostics(module, windows: Windows) -> dict[str, float]:
    """Return-space calibration of the daily heads (what the loss trains directly)."""
    import torch

    with torch.no_grad():
        out = module.eval().model(torch.as_tensor(windows.x, dtype=torch.float32), channels=torch.as_tensor(windows.channels))
    y = torch.as_tensor(windows.y, dtype=torch.float32)
    z = ((y[:, 3] - out.mu[:, 1]) / out.sigma[:, 1]).abs()
    has = torch.as_tensor(windows.channels)  # high / low coverage over the windows that have them (NaN if none)
    return {"daily_cov90_close_ret": float((z <= 1.6448536).float().mean()),
            "daily_cov_high95_ret": float((y[:, 1] <= out.q_high).float()[has[:, 1]].mean()),
            "daily_cov_low05_ret": float((y[:, 2] <= out.q_low).float()[has[:, 2]].mean())}


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


ROWS = (("cov_close90", "cov_close90 (nominal 0.90)"), ("crps", "crps (cum. log return)"),
        ("return_rmse", "return_rmse"), ("rv_mae_dist", "rv_mae_dist"), ("cov_high95", "cov_high95 (nominal 0.95)"),
        ("cov_low05", "cov_low05 (nominal 0.05)"), ("pinball", "pinball (H/L)"), ("da_3", "da_3"), ("da_5", "da_5"),
        ("da_10", "da_10"), ("price_mape", "price_mape"))


def readme(report: dict, command: str, throughput: dict | None = None) -> str:
    """README.md of a results folder from a pretraining summary (``report``, as ``main`` writes it)."""
    sp, tr = report["splits"], report.get("training") or {}
    lines = ["# TS encoder: pretraining summary (`python -m ts_encoder.report`)", "", generated_line(command), "",
             f"Checkpoint `{report['checkpoint']}`: {report['params']:,} parameters "
             f"(d_model {report['encoder']['d_model']}, {report['encoder']['n_layers']} layers, look-back "
             f"{report['encoder']['lookback']}, horizon {report['encoder']['horizon']})."]
    if tr:
        lines += [f"Training: {tr.get('cpu_s', float('nan')):.1f} CPU-seconds, {tr.get('wall_s', float('nan')):.0f} s wall."]
    lines += ["", f"## Held-out metrics beside the random walk (vol window {report['random_walk_vol_window']}, "
              "chosen on val)", "",
              "| metric | " + " | ".join(f"{s} model | {s} RW" for s in sp) + " |", "|---|" + "---|---|" * len(sp)]
    for key, label in ROWS:
        cells = [f"{sp[s][who].get(key, float('nan')):.4g}" for s in sp for who in ("model", "random_walk")]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", "Windows: " + ", ".join(f"{s} {sp[s]['n_windows']}" for s in sp) + ". Daily-return diagnostics "
              "of the model (what L_TS trains): " + "; ".join(
                  f"{s} " + ", ".join(f"{k} {v:.3f}" for k, v in sp[s]["model"].items() if k.startswith("daily_"))
                  for s in sp) + ".", ""]
    if report.get("val_curve"):
        cols = [c for c in report["val_curve"][0] if c != "epoch"]
        lines += ["## Validation by epoch", "", "| epoch | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
        lines += [f"| {r['epoch']:.0f} | " + " | ".join(f"{r[c]:.4g}" for c in cols) + " |" for r in report["val_curve"]]
        lines.append("")
    if throughput:
        lines += ["## Training throughput (`throughput.json`, `python -m benchmarks.ts_throughput`)", "",
                  "| run | params | batch | windows/s | windows per CPU-second |", "|---|---|---|---|---|"]
        lines += [f"| {k} | {r['params']:,} | {r['batch_size']} | {r['windows_per_s']:.1f} | {r['windows_per_cpu_s']:.1f} |"
                  for k, r in throughput["results"].items()]
        lines += ["", f"Machine: {throughput['machine'].get('cpu_count')} cores, load average after "
                  f"{throughput['machine'].get('load_avg_after')}.", ""]
    lines += ["The comparison with every baseline and bootstrap intervals is `stockr1 bench forecast` (results/forecast); "
              "how the tiny configuration was chosen: docs/ts_encoder.md.", ""]
    return "\n".join(lines)


def write_readme(folder: Path, summary: str, command: str) -> Path:
    """``folder/README.md`` from ``folder/summary`` (and ``folder/throughput.json``)."""
    report = json.loads((folder / summary).read_text())
    tp = folder / "throughput.json"
    text = readme(report, command, json.loads(tp.read_text()) if tp.is_file() else None)
    atomic_write(folder / "README.md", lambda p: p.write_text(text))
    return folder / "README.md"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--readme", default=None, metavar="DIR",
                    help="only write DIR/README.md from the summary saved there (--summary)")
    ap.add_argument("--summary", default="tiny_training.json", help="summary file name inside --readme DIR")
    ap.add_argument("--checkpoint")
    ap.add_argument("--source", default="sample")
    ap.add_argument("--path", default=None)
    ap.add_argument("--metrics-csv", default=None)
    ap.add_argument("--time-log", default=None)
    ap.add_argument("--n-samples", type=int, default=200)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    command = command_line("python -m ts_encoder.report", argv)
    if args.readme:
        print(f"wrote {write_readme(Path(args.readme), args.summary, command)}")
        return 0
    if not args.checkpoint or not args.out:
        ap.error("--checkpoint and --out are required (or --readme DIR)")

    from ts_encoder.module import TSForecastModule

    module = TSForecastModule.load_from_checkpoint(args.checkpoint, map_location="cpu").eval()
    cfg = module.cfg
    windows = source_windows(args.source, args.path, cfg.lookback, cfg.horizon)
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
    print(f"wrote {out} and {write_readme(out.parent, out.name, command)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
