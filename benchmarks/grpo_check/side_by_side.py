"""`stockr1 bench grpo_checks`: every `stockr1 bench grpo_check` report in a folder, side by side.

One row per check: a sub-folder holding the ``summary.json`` and ``run_info.json`` that `stockr1 bench
grpo_check` wrote. Every figure is read from those two files, so each is the number of the command that
measured it, never copied by hand:

- what the check trained: its queries (balanced yes/no or mixed), steps x seeds and the recipe's lr, AdamW eps,
  the rows' own optimiser group, the credit, the precision and a merged decoding twin, where they differ from
  the defaults;
- the verdict on the training-query reward (end − start of the probe, the check's own interval and level);
- R_ans's part of that rise (the same interval rule);
- the answer's log-odds split on fixed contexts, where the check read one: the move toward each query's own
  gold and the shift shared by every query;
- how far the policy moved (KL to the start at the last step), whether the answer format held (the training
  rollouts' answer parse rate at the last step) and the cost of a step.

The verdicts are the checks' own (``stockr1.metrics.verdict``): a rise holds only where its interval
excludes 0. Each interval is its own check's; none is corrected over the recipes tried, and the text says
how many there are. A check stopped before its verdict wrote no folder and has no row.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from stockr1.manifest import git_commit
from stockr1.metrics.verdict import HOLDS, TIE, WORSE, verdict
from stockr1.outdir import command_line, generated_line, output_dir

COMMAND = "stockr1 bench grpo_check "


def read_checks(folder: Path) -> list[dict[str, Any]]:
    """``{name, dir, summary, info}`` of every grpo_check report directly under ``folder``, by name."""
    out = []
    for d in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        summary, info = d / "summary.json", d / "run_info.json"
        if not (summary.is_file() and info.is_file()):
            continue
        try:
            run_info, data = json.loads(info.read_text()), json.loads(summary.read_text())
        except json.JSONDecodeError as e:
            raise ValueError(f"{d}: its summary.json or run_info.json is not valid JSON ({e})") from e
        if str(run_info.get("command", "")).startswith(COMMAND):  # a grpo_check's (not grpo_credit's, not ours)
            out.append({"name": d.name, "dir": d, "summary": data, "info": run_info})
    return out


def recipe_text(summary: Mapping[str, Any], config: Mapping[str, Any]) -> str:
    """The check's training in a few words: queries, steps x seeds, lr and what departs from the defaults."""
    r = summary["recipe"]
    queries = (f"{summary['n_queries']} balanced yes/no" if config.get("balance_yes_no")
               else f"{summary['n_queries']} mixed")
    parts = [f"{queries}; {summary['steps']} steps x {len(summary['seeds'])} seeds; lr {r['lr']:g}"]
    overrides = (config.get("grpo") or {}).get("overrides") or {}
    if "beta" in (overrides.get("train") or {}).get("loss", {}):  # named only where the check sets it
        parts.append(f"KL beta {r['beta']:g}")
    if r.get("adam_eps") is not None:
        parts.append(f"AdamW eps {r['adam_eps']:g}")
    if r.get("rows_lr") is not None or r.get("rows_adam_eps") is not None:  # their own group, else the rest's
        rows_lr = r["rows_lr"] if r.get("rows_lr") is not None else r["lr"]
        rows_eps = next(e for e in (r.get("rows_adam_eps"), r.get("adam_eps"), 1e-8) if e is not None)
        parts.append(f"rows lr {rows_lr:g}, eps {rows_eps:g}")
    credit = r.get("credit") or {}
    prior = {"cancel": " (answer prior cancelled)", "project": " (answer prior projected out)",
             "hold": " (answer prior held)"}.get(credit.get("answer_prior", "keep"), "")
    mode = credit.get("mode", "sequence")
    if mode == "answer_span" and credit.get("answer_tags") is False:
        mode = "answer_span (words)"
    parts.append(("credit Eq. 1" if mode == "sequence" else f"credit {mode}") + prior)
    if r.get("precision") not in (None, "32-true"):  # the checks before 2026-12-06 ran in fp32 and lack the key
        parts.append(r["precision"])
    rollout = {**overrides.get("rollout", {}),  # a run before the recipe
               **{k: r[k] for k in ("merge_lora", "twin_dtype") if r.get(k) is not None}}  # kept them: its overrides
    if rollout.get("merge_lora"):
        parts.append(f"decoded by a merged {rollout.get('twin_dtype') or 'float32'} twin")
    return "; ".join(parts)


def interval_text(x: Mapping[str, Any] | None, digits: int = 3, shift: bool = False) -> str:
    """A difference, its interval and the verdict's word; ``shift``: a move with no good side (the log-odds
    shift shared by every query), named by where its interval lies (toward Yes / toward No / tie)."""
    if not x:
        return "–"
    word = "**holds**" if x["verdict"] == HOLDS else x["verdict"]
    if shift:  # the verdict of "toward Yes": holds, worse (toward No) or tie, read from the interval alone
        word = {HOLDS: "toward Yes", WORSE: "toward No", TIE: "tie"}[verdict(x["diff"], x["ci_low"], x["ci_high"])]
    return f"{x['diff']:+.{digits}f} [{x['ci_low']:+.{digits}f}, {x['ci_high']:+.{digits}f}]: {word}"


def _last(summary: Mapping[str, Any], key: str) -> float | None:
    c = summary["per_step"].get(key)
    return None if not c else c[max(c, key=int)]["mean"]


def row(check: Mapping[str, Any], out: Path) -> dict[str, Any]:
    """One check's cells (strings) and the verdicts the summary line counts."""
    s, cfg = check["summary"], check["info"].get("config", {})
    split = s.get("logodds_split") or {}
    r_ans = (s.get("rise_components") or {}).get("r_ans", {}).get("interval")
    kl, parse = _last(s, "policy/kl"), _last(s, "rollout/answer_parse_rate")
    steps = s["per_step"].get("time/step_s") or {}
    step_s = sum(v["mean"] for v in steps.values()) / len(steps) if steps else None
    look = s.get("earlier_look")
    link = os.path.relpath(check["dir"] / "README.md", out).replace(os.sep, "/")
    return {"check": f"[{check['name']}]({link})" + (f" (second look at {Path(look['dir']).name})" if look else ""),
            "trained": recipe_text(s, cfg),
            "rise": interval_text(s["rise"]) + f" ({s['rise']['level']:.1%})",
            "r_ans": interval_text(r_ans),
            "toward_gold": interval_text(split.get("toward_gold"), 2),
            "shared": interval_text(split.get("shared"), 2, shift=True),
            "kl": "–" if kl is None else f"{kl:.1e}",
            "parse": "–" if parse is None else f"{parse:.0%}",
            "step_s": "–" if step_s is None else f"{step_s:.0f}",
            "verdict": s["rise"]["verdict"], "level": s["rise"]["level"]}


HEAD = (("check", "check"), ("trained", "what it trained"), ("rise", "training-query reward, end − start"),
        ("r_ans", "R_ans, end − start"), ("toward_gold", "log-odds toward each query's gold"),
        ("shared", "log-odds shift shared by every query"), ("kl", "KL at the last step"),
        ("parse", "answers parsed at the last step"), ("step_s", "s a step"))


def readme(rows: list[dict[str, Any]], info: Mapping[str, Any]) -> str:
    n, holds = len(rows), sum(r["verdict"] == HOLDS for r in rows)
    ties = sum(r["verdict"] == TIE for r in rows)
    if holds:
        said = (f"{holds} of {n} checks read a rise that holds; each interval is its own check's, not corrected "
                f"over the {n} checks: a false rise somewhere among them has a chance of up to "
                f"{min(1.0, sum(1 - r['level'] for r in rows)):.0%} (Bonferroni, their alphas summed)")
    else:
        said = f"No check reads a rise that holds: {ties} ties, {n - ties} worse"
    lines = ["# GRPO's training-query checks side by side (`stockr1 bench grpo_checks`)", "",
             generated_line(info["command"], info["commit"], info["date"]), "",
             f"Every `stockr1 bench grpo_check` report under `{info['folder']}`, one row each, read from its own "
             "`summary.json` and `run_info.json` (the figures are those checks' own). The reward's and R_ans's rises "
             "are probe means, end − start, with the check's seeds x queries interval; the log-odds columns are the "
             "answer's log p(Yes) − log p(No) on the start's fixed contexts, golds weighted equally (– where the check "
             "read none; a diagnostic, so no verdict rests on it, and the shared shift has no good side: it is named "
             "by where its interval lies); KL and the parse rate are the training rollouts' at the last step, mean over seeds.", "",
             f"{said}.", "",
             "| " + " | ".join(h for _, h in HEAD) + " |", "|---" * len(HEAD) + "|"]
    lines += ["| " + " | ".join(r[k] for k, _ in HEAD) + " |" for r in rows]
    lines += ["", "A check stopped before its verdict wrote no report and has no row here; its config says why.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    ap = argparse.ArgumentParser(prog="stockr1 bench grpo_checks", description=__doc__.splitlines()[0])
    ap.add_argument("--folder", default="results/grpo_check", help="the folder whose grpo_check reports to read")
    ap.add_argument("--out", default=None, help="result directory (default: FOLDER/side_by_side)")
    ap.add_argument("--overwrite", action="store_true", help="replace --out")
    a = ap.parse_args(argv)
    folder = Path(a.folder)
    if not folder.is_dir():
        ap.error(f"--folder {folder}: no such directory")
    out = Path(a.out) if a.out else folder / "side_by_side"
    checks = read_checks(folder)
    if not checks:
        ap.error(f"--folder {folder}: no `stockr1 bench grpo_check` report (summary.json + run_info.json) under it")
    rows = [row(c, out) for c in checks]
    info = {"command": command_line("stockr1 bench grpo_checks", argv), "commit": git_commit(),
            "date": datetime.date.today().isoformat(), "folder": folder.as_posix(),
            "checks": [c["name"] for c in checks]}
    with output_dir(out, a.overwrite) as tmp:
        (tmp / "rows.json").write_text(json.dumps(rows, indent=1))
        (tmp / "run_info.json").write_text(json.dumps(info, indent=1))
        (tmp / "README.md").write_text(readme(rows, info))
    print(f"wrote {out}: {len(rows)} checks")
    return 0
