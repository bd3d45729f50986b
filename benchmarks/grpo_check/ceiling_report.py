"""The README of `stockr1 bench grpo_ceiling` (``benchmarks.grpo_check.ceiling``), generated from its summary."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from benchmarks.grpo_check.credit_report import side
from stockr1.metrics.verdict import claim_line
from stockr1.outdir import generated_line


def _ci(r: Mapping[str, Any], digits: int = 3) -> str:
    return f"{r['diff']:+.{digits}f} [{r['ci_low']:+.{digits}f}, {r['ci_high']:+.{digits}f}]"


def _num(v: float | None, fmt: str) -> str:
    return "–" if v is None else format(v, fmt)


def table(s: Mapping[str, Any]) -> str:
    rows = ["| step | held out: toward gold | verdict | held out: shared shift | held out: p(gold) | held out: on "
            "gold's side | trained on: toward gold | trained on: p(gold) | loss | gradient norm | s |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in s["per_step"]:
        h, t = r["read"], r["train"]
        start = r["step"] == 0
        rows.append(f"| {r['step']} | {'start' if start else _ci(h['toward_gold'])} | "
                    f"{'' if start else h['toward_gold']['verdict']} | "
                    f"{'' if start else _ci(h['shared']) + ' ' + side(h['shared'])} | {h['p_gold']:.3f} | "
                    f"{h['on_gold_side']} of {h['n_queries']} | {'start' if start else _ci(t['toward_gold'])} | "
                    f"{t['p_gold']:.3f} | {_num(r['loss'], '.4f')} | {_num(r['grad_norm'], '.3g')} | "
                    f"{_num(r['time_s'], '.0f')} |")
    return "\n".join(rows)


def reading(s: Mapping[str, Any]) -> str:
    last = s["per_step"][-1]
    t = last["read"]["toward_gold"]
    lines = [claim_line(f"After {s['steps']} oracle steps, held-out answers move toward their gold", t["diff"],
                        t["ci_low"], t["ci_high"], digits=3, unit=" nats")]
    first = s["first_step_all_on_gold_side"]
    n = last["read"]["n_queries"]
    if first is None:
        lines.append(f"Not every held-out query is on its gold's side within {s['steps']} steps: "
                     f"{last['read']['on_gold_side']} of {n} at the end ({s['start_on_gold_side']} at the start).")
    else:
        lines.append(f"Every held-out query is on its gold's side first at step {first}; {last['read']['on_gold_side']} "
                     f"of {n} at step {s['steps']} ({s['start_on_gold_side']} at the start).")
    for o in s["observed"]:
        k = o["oracle_steps_to_match"]
        reach = (f"the oracle's held-out move reached it at step {k}" if k is not None
                 else f"the oracle's held-out move did not reach it within {s['steps']} steps")
        lines.append(f"The check in `{o['path']}` moved its answers toward their golds by {_ci(o, 2)} nats over its "
                     f"{o['steps']} GRPO steps ({o['verdict']}); {reach} (descriptive: one oracle run).")
    return "\n".join(f"- {x}" for x in lines)


def readme(s: Mapping[str, Any], info: Mapping[str, Any]) -> str:
    nc = s["n_contexts"]
    return f"""# How fast the check's optimiser moves answers when it is told them (`stockr1 bench grpo_ceiling`)

{generated_line(info['command'], info['commit'], info['date'])}

Config: `{info['config_path']}`: the grpo_check's start, its {s['golds']['yes']} gold-Yes and {s['golds']['no']}
gold-No training queries, its recipe (trainable weights, AdamW, lr, clipping) and training seed {s['seed']}. In
place of GRPO's loss, each step's gradient is the gold answer's own: the cross-entropy of the gold among " Yes" /
" No" at the decision point of the start's fixed contexts (`rl.ceiling`; every query weighted equally; no KL term,
unlike GRPO's loss). Each
query's contexts are split in two: the oracle trains on {nc['train']} of them and is read on the other
{nc['read']} ("held out": reasoning it never trained on, as the check's probes sample fresh rollouts). The
moves are each query's mean log-odds of Yes against the start, split as the check splits its readings (golds
weighted equally) with {s['level']:.1%} intervals over queries (one run: no seed spread); p(gold) is the gold
word's probability among the two, per query the mean over its contexts, golds weighted equally.

An upper bound of a kind, not a forecast: GRPO's answer signal reaches only groups that hold both answers,
through about 1% of the tokens, with a noisy sign; the oracle has every answer on every context, every step.
If even the oracle needs many of the check's steps to turn the answers, the step budget and the learning rate
block the check whatever the credit; if it turns them in a few, what GRPO's gradient carries is what is missing.

## Reading

{reading(s)}

## Per step

{table(s)}

The loss and gradient norm of a row are those of the step taken from it (the gradient norm before clipping);
s: the wall seconds of the step that led to the row, its reading included ({info['oracle_s']:.0f} s in all).
"""
