"""`stockr1 bench grpo_ceiling --config configs/grpo_check/smollm2-135m-balanced.yaml --out DIR`: how fast the
check's own optimiser moves each training query's answer when its gradient is the gold answer's.

The training-query check (``bench grpo_check``) reads each query's answer log-odds on fixed start contexts
and found GRPO moving them toward their golds by ~0.03 nats a step. This trains the check's start with the
check's recipe (its trainable weights, AdamW, lr, clipping; training seed ``seeds[0]``) on an oracle's loss
instead of GRPO's: the cross-entropy of the gold among " Yes" / " No" at the decision point of half of each
query's contexts (``rl.ceiling``), and reads the other half after every step: how far, in how many of the
check's steps, an optimiser that is told the answer moves answers it did not train on, and whether they
cross to their gold's side. Beside it, the check's own move toward gold (``--observed``: finished
grpo_check folders of this start), descriptively.

The oracle's contexts are the check's (``work_dir/probe/answer-contexts-g<answer_contexts>.json``, reused
when the check drew them); its steps are checkpointed under ``work_dir/oracle`` (a rerun resumes, bit for
bit). Writes ``summary.json``, ``records.json`` (every step's log-odds per context), ``run_info.json`` and a
generated ``README.md``.
"""

from __future__ import annotations

import argparse
import datetime
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.cache import Timings
from benchmarks.grpo_check.ceiling_report import readme
from benchmarks.grpo_check.command import (
    GRPOCheckConfig,
    check_args,
    run_overrides,
    start_contexts,
    stratified_interval,
)
from rl.ceiling import gold_sign, run_oracle
from rl.setup import build_trainer, load_config
from stockr1.config import as_plain
from stockr1.manifest import git_commit
from stockr1.outdir import command_line, output_dir, refuse_existing


def run_ceiling(cfg: GRPOCheckConfig, steps: int, log=print) -> dict[str, Any]:
    """The check's contexts and the oracle's per-step records ({contexts, records, timings, seed})."""
    work = Path(cfg.work_dir)
    sft = Path(cfg.sft_run_dir) if cfg.sft_run_dir else None
    timings = Timings(work / "timings.json")
    contexts = start_contexts(cfg, work, sft, timings)
    seed = cfg.seeds[0]
    trainer, st = build_trainer(load_config(cfg.grpo.config, run_overrides(cfg, seed)), sft, work / "oracle")
    if trainer.resume():
        log(f"[grpo_ceiling] resumed {work / 'oracle'} at step {trainer.step}")
    if trainer.step > steps:
        raise ValueError(f"{work / 'oracle'} holds an oracle already {trainer.step} steps in; ask for --steps "
                         f">= {trainer.step} or delete that folder to start over")
    records = run_oracle(trainer, st.samples, contexts, steps, log=log)
    # the work dir's timings file is the check's: keep only the contexts' draw, the stage shared with it
    return {"contexts": contexts, "records": records, "seed": seed,
            "timings": {k: v for k, v in timings.items() if k.startswith("answer-contexts")}}


def _per_query(contexts: Sequence[Mapping[str, Any]], idx: Sequence[int], z: Sequence[float]) -> dict[int, np.ndarray]:
    """query -> [its contexts in ``idx``] z, in order."""
    out: dict[int, list[float]] = {}
    for i, v in zip(idx, z, strict=True):
        out.setdefault(int(contexts[i]["query"]), []).append(float(v))
    return {q: np.asarray(v) for q, v in sorted(out.items())}


def half_reading(contexts: Sequence[Mapping[str, Any]], idx: Sequence[int], z0: Sequence[float],
                 zk: Sequence[float], n_boot: int, level: float) -> dict[str, Any]:
    """One half's reading at a step against the start: the per-query mean log-odds change split into
    ``toward_gold`` and ``shared`` (golds weighted equally, queries resampled within each gold; one run, so
    the queries-only interval), ``p_gold`` (per query the mean over its contexts of σ(s_q z), the probability
    of the gold word among the two; golds weighted equally) and ``on_gold_side`` (queries whose mean z has
    their gold's sign, of ``n_queries``)."""
    start, now = _per_query(contexts, idx, z0), _per_query(contexts, idx, zk)
    sign = {q: gold_sign(next(contexts[i]["gold"] for i in idx if int(contexts[i]["query"]) == q)) for q in now}
    by_gold = {g: [q for q in now if sign[q] == s] for g, s in (("yes", 1.0), ("no", -1.0))}
    a = np.array([[now[q].mean() - start[q].mean() for q in by_gold["yes"]]])
    b = np.array([[now[q].mean() - start[q].mean() for q in by_gold["no"]]])
    p = {g: float(np.mean([(1.0 / (1.0 + np.exp(-sign[q] * now[q]))).mean() for q in qs])) for g, qs in by_gold.items()}
    return {"toward_gold": stratified_interval(a, b, 0.5, -0.5, n_boot, level),
            "shared": stratified_interval(a, b, 0.5, 0.5, n_boot, level),
            "p_gold": (p["yes"] + p["no"]) / 2, "p_gold_by_gold": p,
            "n_by_gold": {g: len(qs) for g, qs in by_gold.items()},
            "on_gold_side": int(sum(sign[q] * now[q].mean() > 0 for q in now)), "n_queries": len(now),
            "n_contexts": len(idx)}


def observed_move(path: str | Path) -> dict[str, Any]:
    """A finished grpo_check folder's move toward gold on its fixed contexts, over its steps."""
    s = json.loads((Path(path) / "summary.json").read_text())
    split = s.get("logodds_split") or {}
    if "toward_gold" not in split:
        raise ValueError(f"{path}/summary.json has no logodds_split (a check without answer_contexts, or one on "
                         "unbalanced golds): nothing to compare the oracle with")
    t = split["toward_gold"]
    return {"path": str(path), "steps": int(s["steps"]), "diff": t["diff"], "ci_low": t["ci_low"],
            "ci_high": t["ci_high"], "verdict": t["verdict"], "level": t.get("level")}


def summarise(res: Mapping[str, Any], cfg: GRPOCheckConfig, observed: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per step, each half's reading against the start; the first step at which the held-out half's move
    toward gold reaches each observed check's whole move, and the first at which every held-out query sits on
    its gold's side (None: not within the steps run; the table says whether it stays there)."""
    recs, ctx = res["records"], res["contexts"]
    train, read = recs[0]["train"], recs[0]["read"]
    rows = []
    for r in recs:
        row = {"step": r["step"], "loss": r.get("loss"), "grad_norm": r.get("grad_norm"), "time_s": r.get("time_s")}
        for half, idx in (("read", read), ("train", train)):
            row[half] = half_reading(ctx, idx, recs[0][f"{half}_logodds"], r[f"{half}_logodds"], cfg.n_boot, cfg.level)
        rows.append(row)
    first_turned = next((row["step"] for row in rows if row["read"]["on_gold_side"] == row["read"]["n_queries"]), None)
    obs = [dict(o, oracle_steps_to_match=next((row["step"] for row in rows[1:]
                                                if row["read"]["toward_gold"]["diff"] >= o["diff"]), None))
           for o in observed]
    return {"seed": res["seed"], "steps": rows[-1]["step"], "level": cfg.level, "n_boot": cfg.n_boot,
            "n_contexts": {"train": len(train), "read": len(read)}, "golds": rows[0]["read"]["n_by_gold"], "per_step": rows,
            "first_step_all_on_gold_side": first_turned, "observed": obs,
            "start_on_gold_side": rows[0]["read"]["on_gold_side"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="stockr1 bench grpo_ceiling", description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="configs/grpo_check/smollm2-135m-balanced.yaml",
                    help="a grpo_check config: its start, queries, recipe, first seed and answer contexts")
    ap.add_argument("--out", default=None, help="result directory; refused if it holds results, unless --overwrite")
    ap.add_argument("--overwrite", action="store_true", help="replace --out (the oracle's steps are reused)")
    ap.add_argument("--steps", type=int, default=10, help="oracle steps (the check's optimiser steps)")
    ap.add_argument("--observed", action="append", default=[],
                    help="a finished grpo_check folder of this start (its move toward gold); repeatable")
    parsed = check_args(ap, argv)
    if parsed is None:
        return 0
    args, cfg, argv = parsed
    if not cfg.answer_contexts:
        ap.error(f"{args.config} sets answer_contexts: 0; the oracle trains and reads on the check's fixed contexts")
    if args.steps < 1:
        ap.error("--steps must be >= 1")
    for o in args.observed:
        if not (Path(o) / "summary.json").is_file():
            ap.error(f"--observed {o}: no summary.json there (a finished `stockr1 bench grpo_check` folder)")
    observed = [observed_move(o) for o in args.observed]
    refuse_existing(args.out, args.overwrite, f" (the oracle's steps are cached in {cfg.work_dir}/oracle: a rerun reuses them)")
    torch.set_num_threads(cfg.threads)
    res = run_ceiling(cfg, args.steps)
    summary = summarise(res, cfg, observed)
    info = {"config_path": args.config, "config": as_plain(cfg), "observed": args.observed,
            "command": command_line("stockr1 bench grpo_ceiling", argv), "commit": git_commit(),
            "date": datetime.date.today().isoformat(), "timings_s": res["timings"],
            "oracle_s": float(sum(r.get("time_s") or 0.0 for r in res["records"]))}
    with output_dir(args.out, args.overwrite) as out:
        (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
        (out / "run_info.json").write_text(json.dumps(info, indent=1, default=str))
        (out / "records.json").write_text(json.dumps({  # the raw readings behind every row, contexts without ids
            "contexts": [{k: v for k, v in c.items() if k != "ids"} for c in res["contexts"]],
            "records": res["records"]}, indent=1))
        (out / "README.md").write_text(readme(summary, info))
    t = summary["per_step"][-1]["read"]["toward_gold"]
    print(f"oracle, {summary['steps']} steps: held-out move toward gold {t['diff']:+.3f} [{t['ci_low']:+.3f}, "
          f"{t['ci_high']:+.3f}] nats ({t['verdict']})")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
