"""`stockr1 bench grpo_precision --config configs/grpo_check/smollm2-135m-balanced.yaml --out DIR`: what bf16
autocast (``train.precision: bf16-mixed``) saves on one GRPO step of the check on this machine, and what it
changes in the numbers the step reads.

Side by side in one process, for each precision (``32-true``, ``bf16-mixed``; rounds alternate which goes
first): the check's trainer at step 0 (``rl.setup.build_trainer`` with the check's overrides and its first
seed: the same start, queries, recipe and a fresh adapter) takes one real step from its public parts, each
phase timed: the rollouts (decoding with the forecast tool, under Fabric's autocast as the trainer samples),
the KL reference pass, the loss passes (forward and backward over every micro-batch) and the clipped AdamW
update. On CPUs with bf16 matrix units (AMX, ``avx512_bf16``) the low-precision matmuls are the saving; on
others bf16 can be slower, which is why this is measured, not assumed.

The numerics: the first ``32-true`` batch of the run (its rollouts, as sampled) scored by the start policy in
both precisions, ``llm.logprobs.token_logprobs`` over the generated tokens: the per-token gap |log p_bf16 − log
p_fp32| (mean, 99th percentile, max) and the gap in each rollout's summed log-probability. Each precision's
own batch reports its reward and parse rate, descriptively: they are other samples, not a paired comparison.

Writes ``results.json`` and a generated ``README.md``. Timings are only comparable when nothing else ran on the
cores; the README says the threads and rounds.
"""

from __future__ import annotations

import argparse
import datetime
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.grpo_check.command import GRPOCheckConfig, check_args, run_overrides
from llm.logprobs import keep_for_mask, logprob_gap, token_logprobs
from rl.rewards import PENALTY
from rl.setup import build_trainer, load_config
from stockr1.config import as_plain, deep_update
from stockr1.distributed import precision_autocast
from stockr1.manifest import git_commit
from stockr1.outdir import command_line, generated_line, output_dir, refuse_existing

PRECISIONS = ("32-true", "bf16-mixed")
PHASES = ("rollout_s", "rollout_s_per_1k_tokens", "reference_s", "loss_s", "update_s", "step_s")


def timed_step(trainer, after_sample: Callable[[Any], Any] | None = None) -> tuple[dict[str, Any], Any]:
    """One step of ``trainer`` (``GRPOTrainer.train_step``) and the wall seconds of each phase it logs
    (``time/*``, rl/logging.py); returns (timings, the step's batch). ``after_sample(batch)``: run on the
    policy before its update, between the sampling and the rest of the step, and not timed; its result is
    ``"after"``."""
    sb = trainer.sample()
    after = after_sample(sb) if after_sample is not None else None
    scalars = trainer.train_step(sb)["scalars"]
    out = {ph: scalars[f"time/{ph}"] for ph in ("rollout_s", "scoring_s", "reference_s", "loss_s", "update_s", "step_s")}
    return ({**out, "after": after} if after_sample is not None else out), sb


@torch.no_grad()
def precision_gap(trainer, sb) -> dict[str, float]:
    """The start policy's log-probs of ``sb``'s generated tokens in fp32 and under bf16 autocast
    (``logprob_gap``), computed on the bare module (no Fabric wrapper, so nothing else casts)."""
    policy = trainer.policy.module if hasattr(trainer.policy, "module") else trainer.policy
    policy.eval()
    b = sb.batch
    kw = {"temperature": max(trainer.engine.temperature, 1e-6), "banned_token_ids": trainer.engine.banned_token_ids,
          "logits_to_keep": keep_for_mask(b["gen"])}
    out = {}
    for p in PRECISIONS:
        with precision_autocast(p, b["ids"].device):
            out[p] = torch.cat([token_logprobs(policy, b["ids"][sl], b["att"][sl],
                                               None if b["ts"] is None else b["ts"][sl], **kw) for sl in sb.chunks])
    return logprob_gap(out["bf16-mixed"].float().cpu(), out["32-true"].float().cpu(), b["gen"].cpu())


def batch_facts(sb) -> dict[str, float]:
    """The step's own batch, descriptively: rollouts, generated tokens, mean reward, answers parsed."""
    n_gen = [r.n_generated for r in sb.rollouts]
    r_ans = np.asarray(sb.rewards.components.get("r_ans", []), dtype=float)
    labelled = r_ans[~np.isnan(r_ans)]
    return {"rollouts": len(sb.rollouts), "generated_tokens": int(sum(n_gen)),
            "reward": float(np.mean(sb.rewards.total)), "answers_parsed": float((labelled != PENALTY).mean()) if labelled.size else float("nan"),
            "truncated": float(np.mean([r.finish_reason == "length" for r in sb.rollouts]))}


def schedule(rounds: int) -> list[tuple[int, str]]:
    """(round, precision) in the order they run: every round both, alternating which goes first, so a drift of
    the machine's speed over the run does not favour one."""
    return [(k, p) for k in range(rounds) for p in (PRECISIONS if k % 2 == 0 else PRECISIONS[::-1])]


def run_precision(cfg: GRPOCheckConfig, rounds: int, build: Callable[[str], Any] | None = None,
                  log=print) -> dict[str, Any]:
    """``rounds`` x both precisions, alternating which goes first; {runs, gap}. ``build(precision)``: the
    trainer at step 0 (default: the check's, first seed)."""
    sft = Path(cfg.sft_run_dir) if cfg.sft_run_dir else None
    seed = cfg.seeds[0]

    def default_build(precision: str):
        over = deep_update(run_overrides(cfg, seed), {"train": {"precision": precision}})
        return build_trainer(load_config(cfg.grpo.config, over), sft, Path(cfg.work_dir) / "precision")[0]

    build = build or default_build
    runs: list[dict[str, Any]] = []
    gap = None
    for k, p in schedule(rounds):
        trainer = build(p)
        if gap is None and p == "32-true":  # the numerics read the start policy, before any update
            t, sb = timed_step(trainer, lambda sb, trainer=trainer: precision_gap(trainer, sb))
            gap = t.pop("after")
        else:
            t, sb = timed_step(trainer)
        facts = batch_facts(sb)
        t["rollout_s_per_1k_tokens"] = 1000 * t["rollout_s"] / max(facts["generated_tokens"], 1)
        runs.append({"round": k, "precision": p, **{n: round(v, 3) for n, v in t.items()}, **facts})
        log(f"[grpo_precision] round {k} {p}: step {t['step_s']:.1f} s (rollouts {t['rollout_s']:.1f} s, "
            f"loss passes {t['loss_s']:.1f} s)")
    return {"runs": runs, "gap": gap, "ratios": ratios(runs)}


def ratios(runs: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per phase: bf16-mixed / 32-true of each round and of the medians over rounds."""
    out = {}
    for ph in PHASES:
        per = {p: [float(r[ph]) for r in runs if r["precision"] == p] for p in PRECISIONS}
        by_round = [b / a for a, b in zip(per["32-true"], per["bf16-mixed"], strict=True) if a > 0]
        out[ph] = {"fp32_median": float(np.median(per["32-true"])), "bf16_median": float(np.median(per["bf16-mixed"])),
                   "ratio_of_medians": float(np.median(per["bf16-mixed"]) / np.median(per["32-true"])),
                   "per_round": by_round}
    return out


def cpu_facts() -> dict[str, Any]:
    """What decides bf16's speed here: the CPU model and whether it has bf16 matrix instructions."""
    info = Path("/proc/cpuinfo")
    text = info.read_text() if info.is_file() else ""
    model = next((ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("model name")), "unknown")
    flags = set(next((ln.split(":", 1)[1].split() for ln in text.splitlines() if ln.startswith("flags")), []))
    return {"cpu": model, "amx_bf16": "amx_bf16" in flags, "avx512_bf16": "avx512_bf16" in flags,
            "torch": torch.__version__, "threads": torch.get_num_threads()}


def readme(res: Mapping[str, Any]) -> str:
    """The generated report: each round's phases, the ratios, the numerics, and what they do not say."""
    m, g, r = res["machine"], res["gap"], res["ratios"]
    step = r["step_s"]
    lines = ["# One GRPO step in fp32 and under bf16 autocast (`stockr1 bench grpo_precision`)", "",
             generated_line(res["command"], res["commit"], res["date"]), "",
             f"Config `{res['config_path']}`: the check's start `{res['sft_run_dir']}`, its {res['n_queries']} "
             f"training queries x G {res['group_size']} rollouts of up to {res['max_new_tokens']} new tokens, its "
             f"recipe and a fresh adapter, seed {res['seed']}; one step per precision per round, {res['rounds']} "
             f"round(s) alternating which precision goes first. Machine: {m['cpu']}, {m['threads']} threads, "
             f"bf16 matrix units: AMX {'yes' if m['amx_bf16'] else 'no'}, AVX512-BF16 "
             f"{'yes' if m['avx512_bf16'] else 'no'}; torch {m['torch']}.", "",
             "| round | precision | rollouts s | s per 1k generated tokens | scoring s | KL reference s | loss passes s "
             "| update s | step s | generated tokens | mean reward | answers parsed | truncated |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for x in res["runs"]:
        lines.append(f"| {x['round']} | {x['precision']} | {x['rollout_s']:.1f} | {x['rollout_s_per_1k_tokens']:.2f} | "
                     f"{x['scoring_s']:.1f} | {x['reference_s']:.1f} | {x['loss_s']:.1f} | {x['update_s']:.2f} | "
                     f"{x['step_s']:.1f} | {x['generated_tokens']} | {x['reward']:.3f} | {x['answers_parsed']:.0%} | "
                     f"{x['truncated']:.0%} |")
    lines += ["", "Ratios, bf16-mixed / 32-true (of the medians over rounds; each round's in brackets):", ""]
    names = {"rollout_s": "rollouts (decoding with the tool)", "rollout_s_per_1k_tokens": "rollouts per generated token",
             "reference_s": "KL reference pass", "loss_s": "loss passes (forward + backward)",
             "update_s": "clip + AdamW update", "step_s": "the whole step"}
    for ph in PHASES:
        per = ", ".join(f"x{v:.2f}" for v in r[ph]["per_round"])
        lines.append(f"- {names[ph]}: x{r[ph]['ratio_of_medians']:.2f} ({per})")
    faster = step["ratio_of_medians"] < 1 and all(v < 1 for v in step["per_round"])
    slower = step["ratio_of_medians"] > 1 and all(v > 1 for v in step["per_round"])
    word = ("faster in every round" if faster else "slower in every round" if slower
            else "faster in some rounds and slower in others: no clear difference")
    lines += ["", f"On this machine a step under bf16 autocast took x{step['ratio_of_medians']:.2f} of the fp32 step's "
              f"time ({step['bf16_median']:.0f} s against {step['fp32_median']:.0f} s, medians): {word}.", "",
              "## What bf16 changes in the numbers", "",
              f"The first fp32 batch ({g['tokens']:,} generated tokens) scored by the start policy in both precisions "
              "(`llm.logprobs.token_logprobs`, the loss's own log-probs):", "",
              f"- per token, |log p_bf16 − log p_fp32|: mean {g['token_mean']:.4f}, 99th percentile "
              f"{g['token_p99']:.4f}, max {g['token_max']:.3f} nats",
              f"- per rollout, |Σ log p_bf16 − Σ log p_fp32| over its generated tokens: mean {g['row_sum_mean']:.3f}, "
              f"max {g['row_sum_max']:.3f} nats", "",
              "With one pass of the loss per batch (mu = 1) the ratio to the old policy is 1 in either precision; "
              "the KL to the reference is read in the same precision on both sides. A run's start probes and its "
              "ends must use one precision: the checks' earlier runs are fp32 (`train.precision` of "
              "configs/grpo/smollm2-135m.yaml), so a bf16 run is compared with its own start, not with theirs.", "",
              "What this does not say: each precision's batch is its own sample (bf16 decodes other tokens), so "
              "their rewards and parse rates are descriptive, not a paired test of quality; one step per precision "
              "and round is a single timing, so the per-round ratios are the only spread shown. "
              "Files: [results.json](results.json).", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="stockr1 bench grpo_precision", description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="configs/grpo_check/smollm2-135m-balanced.yaml",
                    help="a grpo_check config: its start, queries, recipe and first seed")
    ap.add_argument("--out", default=None, help="result directory; refused if it holds results, unless --overwrite")
    ap.add_argument("--overwrite", action="store_true", help="replace --out")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of one step per precision, alternating the order")
    parsed = check_args(ap, argv)
    if parsed is None:
        return 0
    args, cfg, argv = parsed
    if args.rounds < 1:
        ap.error("--rounds must be >= 1")
    refuse_existing(args.out, args.overwrite)
    torch.set_num_threads(cfg.threads)
    res = run_precision(cfg, args.rounds)
    full = load_config(cfg.grpo.config, run_overrides(cfg, cfg.seeds[0]))
    res |= {"command": command_line("stockr1 bench grpo_precision", argv), "commit": git_commit(),
            "date": datetime.date.today().isoformat(), "config_path": args.config, "config": as_plain(cfg),
            "sft_run_dir": cfg.sft_run_dir, "n_queries": cfg.n_queries, "seed": cfg.seeds[0], "rounds": args.rounds,
            "group_size": full["train"]["group_size"], "max_new_tokens": full["rollout"]["max_new_tokens"],
            "machine": cpu_facts()}
    with output_dir(args.out, args.overwrite) as out:
        (out / "results.json").write_text(json.dumps(res, indent=1, default=str))
        (out / "README.md").write_text(readme(res))
    s = res["ratios"]["step_s"]
    print(f"bf16-mixed / 32-true step time: x{s['ratio_of_medians']:.2f}; wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
