"""``stockr1 demo [--from-scratch [--release DIR]] [--out DIR] [--seed N] [--only STAGE] [--from STAGE]
[--fresh] [--config FILE]``.

The whole offline pipeline into one run directory: data -> TS encoder -> action-conditioned decoder ->
SFT policy -> u-GRPO -> benchmarks -> ``report.md``. By default (``configs/demo.yaml``) the SFT run is the
shipped pretrained small policy of ``release/smollm2-135m`` (LoRA on SmolLM2-135M-Instruct, its decoder,
fitted statistics and QA items; hashes checked) and the TS encoder that of ``release/tiny``, so the demo
trains only a few GRPO steps (``runs/demo-<seed>/``); ``--config configs/demo_tiny.yaml`` runs the same
pipeline on the random-init tiny policy. ``--from-scratch`` (default config ``configs/demo_tiny.yaml``)
trains the TS encoder, a standalone decoder, the tokenizer and the tiny SFT run too
(``runs/demo-scratch-<seed>/``), and with ``--release DIR`` packs the encoder and the SFT run as the new
release. docs/pipeline.md describes the stages, the run layout and resuming.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from stockr1.config import as_plain, parse_config_args, print_config
from stockr1.manifest import write_manifest
from stockr1.pipeline.demo_config import REPO, DemoConfig, resolve

__all__ = ["REPO", "DemoConfig", "main", "stage_configs"]
from stockr1.pipeline.runner import Stage, StageInputError, StageRunner, select, stage_timings

DEFAULT_CONFIG = "configs/demo.yaml"  # from the small pretrained release
SCRATCH_CONFIG = "configs/demo_tiny.yaml"  # the tiny policy: what --from-scratch trains in about an hour


def stage_configs(cfg: DemoConfig, stages: Sequence[Stage], from_scratch: bool = False) -> dict[str, dict[str, Any]]:
    """Each stage's section (unset keys left out) plus the shared ``threads`` / ``wandb`` / ``from_scratch``."""
    shared = {"threads": cfg.threads, "wandb": cfg.wandb, "from_scratch": from_scratch}
    sections = {k: {n: v for n, v in as_plain(s).items() if v is not None} for k, s in cfg.sections().items()}
    return {st.name: {**shared, **sections.get(st.name, {})} for st in stages}


def write_run_manifest(run_dir: Path, seed: int, cfg: dict[str, Any], config_path: str,
                       stages: Sequence[Stage], argv: Sequence[str]) -> dict[str, Any]:
    data = run_dir / "data" / "manifest.json"
    data_hash = json.loads(data.read_text()).get("content_hash") if data.exists() else None
    timings = stage_timings(run_dir, stages)
    return write_manifest(
        run_dir / "manifest.json", seed=seed, command=["stockr1", "demo", *argv], config_path=config_path,
        config=cfg, data_hash=data_hash, stages=timings,
        total_wall_s=round(sum(t["wall_s"] or 0 for t in timings.values()), 1),
        total_cpu_s=round(sum(t["cpu_s"] or 0 for t in timings.values()), 1))


def scratch_estimate(release: str) -> str:
    """What ``--from-scratch`` costs, from the SFT log of the release it would replace (measured there)."""
    log = (Path(release) if Path(release).is_absolute() else REPO / release) / "sft" / "metrics.jsonl"
    try:
        last = json.loads(log.read_text().splitlines()[-1])
        return (f"the shipped SFT run took {last['sec'] / 60:.0f} min for {last['step']} steps on the machine that "
                f"made it ({log}); the other stages add a few minutes")
    except (OSError, IndexError, KeyError, json.JSONDecodeError):
        return "the SFT stage alone takes about an hour on 2 CPU cores"


def main(argv: list[str] | None = None) -> int:
    from stockr1.pipeline.stages import DEMO_STAGES, SCRATCH_STAGES, TS_MODEL

    argv = sys.argv[1:] if argv is None else list(argv)
    scratch = "--from-scratch" in argv
    stages = SCRATCH_STAGES if scratch else DEMO_STAGES
    names = [s.name for s in stages]
    ap = argparse.ArgumentParser(prog="stockr1 demo", description=__doc__.split("\n")[0],
                                 epilog="stages: " + ", ".join(names))
    ap.add_argument("--out", default=None, help="run directory (default: runs/demo-<seed>)")
    ap.add_argument("--seed", type=int, default=None, help="overrides the config's seed")
    which = ap.add_mutually_exclusive_group()
    which.add_argument("--only", choices=names, default=None, help="run this one stage (its inputs must exist)")
    which.add_argument("--from", dest="start", choices=names, default=None, help="rerun this stage and all later ones")
    ap.add_argument("--fresh", action="store_true", help="rerun the selected stages from scratch (no resume)")
    ap.add_argument("--config", default=SCRATCH_CONFIG if scratch else DEFAULT_CONFIG,
                    help=f"pipeline config (default {DEFAULT_CONFIG}; with --from-scratch {SCRATCH_CONFIG})")
    ap.add_argument("--from-scratch", action="store_true",
                    help="train the TS encoder, decoder, tokenizer and the tiny SFT run too instead of starting from a release")
    ap.add_argument("--release", default=None, metavar="DIR",
                    help="with --from-scratch: afterwards, pack the run's TS encoder and SFT run as the release in DIR")
    ap.add_argument("--export", default=None, metavar="DIR",
                    help="afterwards, copy report.md and the small files it links to DIR (e.g. results/demo)")
    args, over = parse_config_args(ap, argv)
    if args.release and not scratch:
        ap.error("--release packs a run trained here: add --from-scratch")
    typed = DemoConfig.from_yaml(resolve(args.config), {**over, **({} if args.seed is None else {"seed": args.seed})})
    if args.print_config:
        print_config(typed)
        return 0
    seed, cfg = typed.seed, as_plain(typed)
    run_dir = Path(args.out or (f"runs/demo-scratch-{seed}" if scratch else f"runs/demo-{seed}"))
    if scratch:
        print(f"[demo] --from-scratch: {scratch_estimate(typed.release.dir)}")
    run_dir.mkdir(parents=True, exist_ok=True)
    # W&B: the demo config decides unless the user set WANDB_MODE
    os.environ.setdefault("WANDB_MODE", "offline" if typed.wandb else "disabled")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    def on_stage(_results) -> None:
        write_run_manifest(run_dir, seed, cfg, args.config, stages, argv)

    runner = StageRunner(stages, run_dir, seed, stage_configs(typed, stages, scratch), on_stage=on_stage)
    print(f"[demo] run dir {run_dir}; stages: {', '.join(s.name for s in select(stages, args.only, args.start))}")
    try:
        runner.run(only=args.only, start=args.start, fresh=args.fresh)
    except StageInputError as e:
        print(f"stockr1 demo: {e}", file=sys.stderr)
        return 2
    finally:
        man = write_run_manifest(run_dir, seed, cfg, args.config, stages, argv)
    print(f"[demo] total {man['total_wall_s']:.0f}s wall, {man['total_cpu_s']:.0f}s CPU over finished stages; "
          f"report: {run_dir / 'report.md'}")
    if args.export and (run_dir / "report.md").exists():
        from stockr1.pipeline.report import export_report

        print(f"[demo] exported {len(export_report(run_dir, args.export))} files to {args.export}")
    if args.release:
        from benchmarks.release_check import validation_metrics
        from stockr1.release import pack

        check = validation_metrics(run_dir / "sft")  # on validation questions, recorded in the manifest
        rel = pack(run_dir / "sft", args.release, "stockr1 demo " + " ".join(argv), check.pop("data_hash"), extra=check,
                   ts_dir=run_dir / TS_MODEL)
        print(f"[demo] packed the TS encoder and the SFT run as {args.release} ({rel['total_mb']} MB, "
              f"{len(rel['files'])} files)")
    return 0
