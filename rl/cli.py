"""``stockr1 grpo --config configs/grpo/tiny.yaml``: u-GRPO from the SFT checkpoint (parse, build, run;
the wiring is ``rl.setup``)."""

from __future__ import annotations

import argparse
import json

from rl.run_config import GRPORunConfig
from rl.setup import load_config, run_grpo
from rl.smoke import grpo_smoke
from stockr1.config import deep_update, parse_config_args, print_config


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="stockr1 grpo", description="uncertainty-aware GRPO (Stock-R1 §3.5)",
        epilog="Any config key can be overridden with its dotted path, e.g. --train.lr 3e-5 --rollout.temperature "
               "0.8 --train.devices 8 --train.strategy ddp (values are YAML; the typed config checks them).")
    ap.add_argument("--config", required=True, help="YAML config (configs/grpo/*.yaml)")
    ap.add_argument("--run", default=None, help="run name (default: the config's run)")
    ap.add_argument("--sft", default=None, help="SFT run directory with policy/ and decoder/ (overrides sft.run_dir)")
    ap.add_argument("--max-steps", type=int, default=None, help="override train.max_steps")
    ap.add_argument("--out", default=None, help="root of run directories (default checkpoints/grpo; with --smoke "
                                                "a temporary directory)")
    ap.add_argument("--resume", action="store_true", help="continue from <out>/<run>/last.ckpt (README, Resume)")
    ap.add_argument("--overwrite", action="store_true", help="delete <out>/<run> and start over")
    ap.add_argument("--no-weight", action="store_true", help="plain GRPO: w(U) = 1 (ablation)")
    ap.add_argument("--smoke", action="store_true", help="one step of the config's architecture at full width, "
                                                          "2 random layers, short rollouts (rl/smoke.py)")
    args, over = parse_config_args(ap, argv)
    if args.no_weight:
        over = deep_update(over, {"train": {"uncertainty": {"enabled": False}}})
    if args.print_config:
        print_config(GRPORunConfig.from_dict(load_config(args.config, over)))
        return 0
    if args.smoke:
        if over:
            ap.error("--smoke runs the config file as written; drop the overrides")
        grpo_smoke(args.config, args.out)
        return 0
    summary = run_grpo(args.config, run=args.run, max_steps=args.max_steps, out_root=args.out or "checkpoints/grpo",
                       resume=args.resume, sft_dir=args.sft, overrides=over or None,
                       overwrite=args.overwrite)
    if summary.get("rank", 0) == 0:
        print(json.dumps(summary, indent=1, default=str))
        print(f"wrote {summary['out_dir']} (policy/, decoder/, summary.json)")
    return 0
