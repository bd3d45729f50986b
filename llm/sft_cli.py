"""``stockr1 sft --config configs/sft/tiny.yaml``: joint SFT (parse, then ``llm.sft.run_sft``; or
``--smoke``, ``llm.smoke.sft_smoke``)."""

from __future__ import annotations

import argparse
import json

from llm.sft import load_sft_config, run_sft
from llm.sft_config import SFTRunConfig
from llm.smoke import sft_smoke
from stockr1.config import parse_config_args, print_config


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="stockr1 sft", description="Joint SFT (Stock-R1 §3.4): L_total = L_SFT + λ_ts · L_TS",
        epilog="Any config key can be overridden with its dotted path, e.g. --train.lr 1e-3 --train.devices 2 "
               "--train.strategy ddp (values are YAML; the typed config checks them).")
    ap.add_argument("--config", required=True, help="YAML config (configs/sft/*.yaml)")
    ap.add_argument("--run", default=None, help="run name (default: config's run)")
    ap.add_argument("--max-steps", type=int, default=None, help="override train.max_steps")
    ap.add_argument("--out", default=None, help="root of run directories (default checkpoints/sft; with --smoke "
                                                "a temporary directory)")
    ap.add_argument("--resume", action="store_true", help="continue from <out>/<run>/last.ckpt (README, Resume)")
    ap.add_argument("--overwrite", action="store_true", help="delete <out>/<run> and start over")
    ap.add_argument("--smoke", action="store_true", help="one step of the config's architecture at full width, "
                                                          "2 random layers, short sequences (llm/smoke.py)")
    args, overrides = parse_config_args(ap, argv)
    if args.print_config:
        print_config(SFTRunConfig.from_dict(load_sft_config(args.config, overrides)))
        return 0
    if args.smoke:
        if overrides:
            ap.error("--smoke runs the config file as written; drop the overrides")
        sft_smoke(args.config, args.out)
        return 0
    args.out = args.out or "checkpoints/sft"
    summary = run_sft(args.config, run=args.run, max_steps=args.max_steps, out_root=args.out, overrides=overrides,
                      resume=args.resume, overwrite=args.overwrite)
    if summary["rank"] == 0:
        print(json.dumps(summary, indent=1))
        print(f"wrote {summary['run_dir']} (policy/, decoder/, summary.json)")
    return 0
