"""`stockr1 bench sft_recipe --config configs/sft_recipe/tiny.yaml --out DIR`: which tiny SFT recipe
learns the protocol, and after how many steps.

The QA target of the llm issue (>= 95% of held-out rollouts with a complete parseable action and a
parseable answer after the tiny CPU SFT) depends on the policy size, tokenizer, learning rate and the
number of steps. This sweep trains each variant (overrides merged into one SFT config, all sharing
the same QA items, decoder init and traces through ``prepare_from``) with ``llm.sft`` and, at each
``eval_at`` step, runs greedy rollouts through the one rollout engine on a family-balanced slice of
the **validation** questions (never test: this is model selection) and grades them with the QA
benchmark's grader. Variants run in parallel processes (``--jobs``), each on ``--device``.

Writes ``metrics.json`` (variant -> step -> metrics, and ``export``: each variant's step chosen on
validation by ``export_step``), ``table.md`` (action+answer parse rate and
accuracy by step) and ``curves.png``; every variant's run dir under ``--work`` resumes when rerun.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from benchmarks.ablation.command import balanced_slice
from llm.qa.evaluate import grade_rollouts, rollout_items
from llm.sft import TrainConfig, average_checkpoints, build_sft, from_dict, prepare
from llm.sft_config import SFTRunConfig
from stockr1.config import (
    YamlConfig,
    as_plain,
    check_merged,
    config_from_dict,
    deep_update,
    load_yaml,
    parse_config_args,
    print_config,
)
from stockr1.manifest import git_commit
from stockr1.outdir import command_line, generated_line, output_dir, refuse_existing

COLS = ("action_and_answer_rate", "action_success_rate", "answer_parse_rate", "overall", "tokens_per_answer")



@dataclass(frozen=True)
class RecipeConfig(YamlConfig):
    """configs/sft_recipe/*.yaml. Every variant = ``sft_config`` + ``common`` + its overrides (and its own
    ``eval_at``); each merge is checked through ``SFTRunConfig`` at load time, so a typo anywhere fails now."""

    sft_config: str = "configs/sft/tiny.yaml"
    eval_at: tuple[int, ...] = (500, 1000)
    average_last: int = 0
    n_eval: int = 40
    max_new_tokens: int = 640
    common: Mapping[str, Any] = field(default_factory=dict)
    variants: Mapping[str, Mapping[str, Any] | None] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RecipeConfig:
        cfg = config_from_dict(cls, d, "sft_recipe config")
        if not cfg.variants or not cfg.eval_at or min(cfg.eval_at) < 1 or cfg.n_eval < 1 or cfg.average_last < 0:
            raise ValueError(f"sft_recipe config: variants and eval_at (steps >= 1) must be non-empty, n_eval >= 1 and "
                             f"average_last >= 0, got {list(cfg.variants)}, {cfg.eval_at}, {cfg.n_eval}, {cfg.average_last}")
        for name, over in cfg.variants.items():
            over = dict(over or {})
            if any(int(s) < 1 for s in over.pop("eval_at", cfg.eval_at)):
                raise ValueError(f"sft_recipe config variants.{name}.eval_at: steps must be >= 1")
            check_merged(SFTRunConfig, cfg.sft_config, deep_update(cfg.common, over), f"sft_recipe config variants.{name}")
        return cfg


def val_slice(items, n: int) -> list:
    """n validation items, families round-robin (``benchmarks.ablation.command.balanced_slice``); never test."""
    return balanced_slice([it for it in items if it.split == "val"], n)


def prepare_shared(cfg: dict[str, Any]) -> None:
    """Write ``common.prepare_from`` (QA items, decoder init, traces of ``sft_config``) once, before the
    variants copy it, so parallel variants never race to write their own (identical) copies."""
    shared = cfg.get("common", {}).get("prepare_from")
    if shared and not (Path(shared) / "traces.jsonl").exists():
        prepare(load_yaml(cfg["sft_config"]), Path(shared))


def run_variant(cfg: dict[str, Any], name: str, work: Path, device: str) -> dict[str, dict[str, float]]:
    """Train variant ``name`` step-block by step-block, evaluating on validation after each block."""
    over = dict(cfg["variants"][name] or {})
    eval_at = over.pop("eval_at", cfg["eval_at"])  # a variant may evaluate on its own step grid
    vcfg = deep_update(deep_update(load_yaml(cfg["sft_config"]), cfg.get("common", {})), over)
    run_dir = work / name
    tcfg = from_dict(TrainConfig, {**vcfg.get("train", {}), "accelerator": device})
    s = build_sft(vcfg, run_dir, tcfg)
    windows, items, decoder, policy, data, trainer = s.windows, s.items, s.decoder, s.policy, s.data, s.trainer
    trainer.maybe_resume()
    val = val_slice(items, int(cfg.get("n_eval", 40)))
    res_path = run_dir / "recipe_eval.json"
    res = json.loads(res_path.read_text()) if res_path.exists() else {}
    mnt = int(cfg.get("max_new_tokens", 640))

    def grade(key: str, l_sft: float, train_s: float) -> None:
        policy.eval()
        decoder.cpu()
        pairs = rollout_items(policy, decoder, windows, val, max_new_tokens=mnt,
                              max_context_chars=vcfg.get("max_context_chars"))
        decoder.to(trainer.fabric.device)
        m = grade_rollouts(pairs)
        m.update(l_sft=l_sft, train_s=train_s, sample=pairs[0][1].completion[:1200])
        res[key] = m
        res_path.write_text(json.dumps(res, indent=1))
        print(f"[{name}] {key}: parse {m['action_and_answer_rate']:.0f}% acc {m['overall']:.1f}% "
              f"L_SFT {m['l_sft']:.3f}", flush=True)

    for stop in eval_at:
        if str(stop) in res:
            continue
        trainer.cfg = dataclasses.replace(tcfg, max_steps=int(stop))  # the LR schedule keeps tcfg's horizon
        t0 = time.time()
        hist = trainer.fit(data)
        # keep every evaluated state: validation picks the step to export (see results/sft_recipe)
        shutil.copyfile(trainer.ckpt_path, run_dir / f"step-{stop}.ckpt")
        grade(str(stop), float(hist[-1]["l_sft"]), time.time() - t0)
    k = int(cfg.get("average_last", 0))  # also grade the average of the last k evaluated states
    if k > 1 and len(eval_at) >= k:
        steps = [int(s) for s in eval_at[-k:]]
        key = f"avg{steps[0]}-{steps[-1]}"
        if key not in res:
            path = average_checkpoints([run_dir / f"step-{s}.ckpt" for s in steps], run_dir / f"{key}.ckpt")
            trainer.fabric.load(path, trainer.state())
            grade(key, float("nan"), 0.0)
            trainer.maybe_resume()  # back to last.ckpt, should eval_at grow later
    return res


def export_step(by_step: Mapping[str, Mapping[str, float]]) -> str | None:
    """The evaluated step to export, by the rule fixed before the test run (results/sft_recipe): the
    highest validation action + answer parse rate, ties broken by validation accuracy, then by the
    later step. ``by_step`` is what ``run_variant`` graded, on validation questions only, so test
    labels cannot move the choice; averaged states ("avg...") are not candidates."""

    def rank(step: str) -> tuple[float, float, int]:
        parse, acc = (float(by_step[step][k]) for k in ("action_and_answer_rate", "overall"))
        return (-math.inf if math.isnan(parse) else parse, -math.inf if math.isnan(acc) else acc, int(step))

    steps = [k for k in by_step if k.isdigit()]
    return max(steps, key=rank) if steps else None


def _order(key: str) -> tuple[int, str]:
    """Steps in order, an averaged state ("avg2250-3000") after the last step it averages."""
    return int(key.rsplit("-", 1)[-1].removeprefix("avg")), key


def table(results: dict[str, dict[str, dict[str, float]]]) -> str:
    lines = ["| variant | step | L_SFT | " + " | ".join(COLS) + " |", "|---" * (len(COLS) + 3) + "|"]
    for name, by_step in results.items():
        for step, m in sorted(by_step.items(), key=lambda kv: _order(kv[0])):
            vals = " | ".join(f"{m.get(c, float('nan')):.1f}" for c in COLS)
            lines.append(f"| {name} | {step} | {m.get('l_sft', float('nan')):.3f} | {vals} |")
    return "\n".join(lines) + "\n"


def plot(results: dict[str, dict[str, dict[str, float]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 2, figsize=(10, 3.5))
    for name, by_step in results.items():
        steps = sorted(int(s) for s in by_step if s.isdigit())  # not the averaged states ("avg2250-3000")
        ax[0].plot(steps, [by_step[str(s)]["action_and_answer_rate"] for s in steps], marker="o", label=name)
        ax[1].plot(steps, [by_step[str(s)]["l_sft"] for s in steps], marker="o", label=name)
    ax[0].set(xlabel="SFT step", ylabel="% action + answer parseable (val)")
    ax[1].set(xlabel="SFT step", ylabel="L_SFT (train batch)")
    ax[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def gradient_summary(run_dir: Path) -> dict[str, float]:
    """Median pre-clip gradient norms and mean L_SFT / lambda*L_TS of a variant's training log
    (``metrics.jsonl`` of ``SFTTrainer``): what one shared clip does to the policy's step."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    out: dict[str, float] = {"steps": float(len(rows))}
    for key in ("grad_norm", "grad_norm_policy", "grad_norm_decoder", "l_sft", "l_ts_weighted"):
        vals = [float(r[key]) for r in rows if key in r and math.isfinite(float(r[key]))]
        if vals:
            out[key] = float(np.median(vals)) if key.startswith("grad") else float(np.mean(vals))
    return out


def readme(cfg: Mapping[str, Any], results: Mapping[str, Mapping[str, Mapping[str, float]]],
           export: Mapping[str, str | None], grads: Mapping[str, Mapping[str, float]], run: Mapping[str, str]) -> str:
    """results/sft_recipe/README.md from this sweep's numbers (never edited by hand)."""
    lines = ["# Tiny SFT recipe sweep (`stockr1 bench sft_recipe`)", "",
             generated_line(run["command"], run["commit"], run["date"]),
             "", f"Every variant is `{cfg['sft_config']}` + `common` + its overrides ({run['config']}); all share the QA "
             "items, the decoder init and the traces (`prepare_from`). At each evaluated step, greedy rollouts "
             f"(up to {cfg.get('max_new_tokens', 640)} new tokens) on {cfg.get('n_eval', 40)} **validation** questions "
             "(family-balanced; test is never seen here) are graded by the QA benchmark's grader.", "",
             "| variant | overrides |", "|---|---|"]
    lines += [f"| {n} | `{json.dumps(v or {})}` |" for n, v in cfg["variants"].items() if n in results]
    lines += ["", "## Validation by step (%)", "",
              "| variant | step | action + answer | complete action | answer parses | val acc. | L_SFT (train batch) |",
              "|---|---|---|---|---|---|---|"]
    for name, by_step in results.items():
        for step, m in sorted(by_step.items(), key=lambda kv: _order(kv[0])):
            mark = " **(exported)**" if export.get(name) == step else ""
            lines.append(f"| {name} | {step}{mark} | {m['action_and_answer_rate']:.1f} | {m['action_success_rate']:.1f} | "
                         f"{m['answer_parse_rate']:.1f} | {m['overall']:.1f} | {m.get('l_sft', float('nan')):.3f} |")
    lines += ["", "Export rule (`export_step`, fixed before any test run): the highest validation action + answer, "
              "ties broken by validation accuracy, then by the later step. With "
              f"{cfg.get('n_eval', 40)} questions one question is {100 / max(int(cfg.get('n_eval', 40)), 1):.1f} points.", "",
              "## Gradients during training (medians of the pre-clip norms; means of the loss terms)", "",
              "| variant | steps | shared norm | policy norm | decoder norm | mean L_SFT | mean λ·L_TS |", "|---|---|---|---|---|---|---|"]
    for name, g in grads.items():
        cells = [f"{g[k]:.3g}" if k in g else "–" for k in ("grad_norm", "grad_norm_policy", "grad_norm_decoder",
                                                           "l_sft", "l_ts_weighted")]
        lines.append(f"| {name} | {g['steps']:.0f} | " + " | ".join(cells) + " |")
    lines += ["", "Under one shared clip (`grad_clip_scope: all`) the whole step is rescaled by "
              "`grad_clip / shared norm`, so when the decoder's λ·L_TS gradient dominates the norm the policy's "
              "step shrinks by that factor; `per_model` clips the policy and the decoder each to `grad_clip`.", "",
              "Files: [metrics.json](metrics.json) (every graded point, one sample completion each), "
              "[table.md](table.md), [curves.png](curves.png).", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="stockr1 bench sft_recipe", description=__doc__.split("\n")[0])
    ap.add_argument("--config", required=True, help="sweep YAML (configs/sft_recipe/*.yaml)")
    ap.add_argument("--out", default=None, help="report directory (refused if it holds results, unless --overwrite)")
    ap.add_argument("--overwrite", action="store_true", help="replace the report in --out (--work is kept and reused)")
    ap.add_argument("--work", default="checkpoints/sft_recipe", help="variant run dirs (resumable)")
    ap.add_argument("--device", default="cpu", help="accelerator of each variant's training (cpu, cuda)")
    ap.add_argument("--jobs", type=int, default=1, help="variants trained in parallel processes")
    ap.add_argument("--threads", type=int, default=2, help="torch threads per process")
    ap.add_argument("--only", default=None, help="run this one variant in this process (used by --jobs)")
    ap.add_argument("--report-only", action="store_true", help="tabulate what --work holds; train nothing")
    argv = sys.argv[1:] if argv is None else list(argv)
    args, over = parse_config_args(ap, argv)
    cfg = as_plain(RecipeConfig.from_yaml(args.config, over))
    if args.print_config:
        print_config(cfg)
        return 0
    if args.out is None:
        ap.error("--out is required")
    args.overwrite = args.overwrite or args.report_only  # --report-only is asked to rewrite the report
    if not args.only:  # a --jobs child writes no report
        refuse_existing(args.out, args.overwrite, f" (the variant runs in {args.work} are reused: a rerun resumes them, "
                                                  "--report-only only rewrites the report)")
    work = Path(args.work)
    names = [args.only] if args.only else list(cfg["variants"])
    procs: list[tuple[str, subprocess.Popen]] = []
    failed = []
    work.mkdir(parents=True, exist_ok=True)
    resolved = work / "resolved_config.yaml"  # what the --jobs children read: the file with the overrides merged
    if not args.only:
        resolved.write_text(yaml.safe_dump(cfg, sort_keys=False))
    if not args.report_only and not args.only:
        prepare_shared(cfg)
    if not args.report_only and (args.jobs == 1 or args.only):  # in this process, one after another
        import torch

        torch.set_num_threads(args.threads)
        for name in names:
            run_variant(cfg, name, work, args.device)
        if args.only:
            return 0
    for name in [] if args.report_only or args.jobs == 1 else names:  # a pool of --jobs processes
        while len([p for _, p in procs if p.poll() is None]) >= args.jobs:
            time.sleep(2)
        cmd = [sys.executable, "-m", "benchmarks.sft_recipe", "--config", str(resolved), "--out", args.out,
               "--work", args.work, "--device", args.device, "--threads", str(args.threads), "--only", name]
        with open(work / f"{name}.log", "a") as log:  # the child keeps its own copy of the handle
            procs.append((name, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=os.environ.copy())))
    for name, p in procs:
        if p.wait() != 0:
            failed.append(name)
    results = {n: json.loads((work / n / "recipe_eval.json").read_text())
               for n in names if (work / n / "recipe_eval.json").exists()}
    export = {n: export_step(r) for n, r in results.items()}
    with output_dir(args.out, args.overwrite) as out:
        (out / "metrics.json").write_text(json.dumps({"config": cfg, "device": args.device, "failed": failed,
                                                      "export": export, "results": results}, indent=1))
        (out / "table.md").write_text(table(results))
        if results:
            plot(results, out / "curves.png")
            grads = {n: gradient_summary(work / n) for n in results if (work / n / "metrics.jsonl").exists()}
            run = {"command": command_line("stockr1 bench sft_recipe", argv),
                   "commit": git_commit(), "date": time.strftime("%Y-%m-%d"), "config": args.config}
            (out / "README.md").write_text(readme(cfg, results, export, grads, run))
    print(table(results) + f"export (validation rule): {export}\n" + (f"failed: {failed} (logs in {work})" if failed else ""))
    print(f"wrote {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
