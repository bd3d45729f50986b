"""`stockr1 bench qa_baselines [--config configs/sft/tiny.yaml] [--n-test 1250] --out results/qa_baselines`

Can the QA benchmark be answered from the question alone? Without any trained policy, this
generates the config's QA set (its ``qa`` section with ``n_test`` raised to ``--n-test``, so each
family has enough test questions to tell a few points apart) and scores, on every test question,
the majority-class and random-walk baselines and the question-only lookup and classifier
(``llm.qa.question_only``: template and parameters only, fitted on train), each with a 95% interval,
plus the per-family counts and the templates whose test answers all fall in one class.

It does so for the per-cell balanced generator (``after``) and for the earlier per-template sampler
(``before``, ``QAConfig(balance="template")``), and for the earlier sampler at the config's own size
on the first ``--n-eval`` test questions (``before_config``: the questions `bench qa` evaluated), so
the before/after numbers come from one command. Writes ``metrics.json`` and a ``README.md`` built
from it. Target per family (after): question-only ≤ majority + 3 points; no single-answer template.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, replace

from llm.qa.core import FAMILIES, FAMILY_TITLES, QAItem
from stockr1.manifest import git_commit
from stockr1.outdir import command_line, generated_line, output_dir, refuse_existing

ROWS = ("majority", "random_walk", "question_only_lookup", "question_only_classifier")
SUMMARY_ROWS = ("majority", "question_only_lookup", "question_only_classifier")
MARGIN = 3.0  # points question-only may exceed majority (the target)


def cell_imbalance(items: list[QAItem]) -> dict[str, int]:
    """Cells, and cells whose answer-class counts differ by more than one item, per split."""
    from llm.qa.question_only import cell_spread

    out: dict[str, int] = {}
    for split in ("train", "test"):
        spread = cell_spread([it for it in items if it.split == split])
        out[f"{split}_cells"] = len(spread)
        out[f"{split}_cells_off_by_more_than_1"] = sum(s > 1 for s in spread.values())
    return out


def evaluate_set(name: str, cfg, windows, context_fn, n_eval: int | None, n_boot: int) -> dict:
    """Generate one QA set (timed) and score the baselines on its test questions."""
    from llm.qa import generate_qa
    from llm.qa.baselines import baseline_report

    t0 = time.perf_counter()
    items, rep = generate_qa(windows, cfg, context_fn)
    sec = time.perf_counter() - t0
    train = [it for it in items if it.split == "train"]
    test = [it for it in items if it.split == "test"][:n_eval]
    return {
        "name": name, "qa": {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(cfg).items()},
        "generation_sec": round(sec, 2), "n_by_split": {k: sum(v.values()) for k, v in rep.counts.items()},
        "shortfall": rep.shortfall, "n_evaluated": len(test), "cell_balance": cell_imbalance(items),
        "report": baseline_report(train, test, windows, n_boot=n_boot),
    }, items


def target(report: dict) -> dict[str, bool]:
    """Per family: both question-only rows within ``MARGIN`` points of majority."""
    gap = report["question_only_minus_majority"]
    return {f: all(g[f] <= MARGIN + 1e-9 for g in gap.values()) for f in report["counts"]}


def _fmt(r: dict) -> str:
    return f"{r['acc']:.1f} [{r['ci_lo']:.1f}, {r['ci_hi']:.1f}]"


def set_table(s: dict) -> list[str]:
    rep = s["report"]
    fams = [f for f in FAMILIES if f in rep["counts"]]
    head = [f"{FAMILY_TITLES[f]} (n={rep['counts'][f]})" for f in fams] + [f"Avg. (n={rep['n']})"]
    lines = ["| baseline | " + " | ".join(head) + " |", "|---" * (len(head) + 1) + "|"]
    for row in ROWS:
        lines.append(f"| {row} | " + " | ".join(_fmt(rep["rows"][row][f]) for f in [*fams, "overall"]) + " |")
    single = rep["single_answer_templates"]
    cb = s["cell_balance"]
    return lines + ["", f"- generation: {s['generation_sec']:.1f} s for {s['n_by_split']} questions; "
                        f"shortfall {s['shortfall'] or 'none'}",
                    "- templates with a single answer class on the evaluated test questions: "
                    + (", ".join(f"`{t}` ({a})" for t, a in single.items()) if single else "none"),
                    f"- parameter cells whose answer classes differ by more than one item: "
                    f"train {cb['train_cells_off_by_more_than_1']} of {cb['train_cells']}, "
                    f"test {cb['test_cells_off_by_more_than_1']} of {cb['test_cells']}",
                    "- question-only within 3 points of majority: "
                    + ", ".join(f"{f} {'yes' if ok else 'NO'}" for f, ok in target(rep).items())]


def summary_table(sets: dict[str, dict]) -> list[str]:
    """Before/after per family: majority, question-only lookup and classifier (accuracy %)."""
    fams = [*FAMILIES, "overall"]
    lines = ["| set | baseline | " + " | ".join(fams) + " |", "|---" * (len(fams) + 2) + "|"]
    for name, s in sets.items():
        rows = s["report"]["rows"]
        for r in SUMMARY_ROWS:
            lines.append(f"| {name} | {r} | " + " | ".join(
                f"{rows[r][f]['acc']:.1f}" if f in rows[r] else "–" for f in fams) + " |")
    return lines


def readme(m: dict) -> str:
    sets = m["sets"]
    lines = [
        "# Question-only baselines on the QA benchmark", "",
        generated_line(m["command"], m.get("commit"), m.get("date")) + " No trained policy is involved.", "",
        "Baselines, each fitted on the train questions and scored on test questions: `majority` (train",
        "mode / median per template and horizon), `random_walk` (the answer on a flat future close path),",
        "`question_only_lookup` (train majority, or median for numeric answers, of the question's",
        "template + parameters cell) and `question_only_classifier` (logistic regression on one-hot",
        "template + parameters; numeric answers: the constant within tolerance of the most train answers",
        "of the cell). Intervals: 95% percentile intervals over date-block resamples (block",
        f"{sets['after']['report']['block']} dates, {m['n_boot']} resamples); `metrics.json` also has Wilson",
        "intervals per family. `overall` is the mean over families (Table 1's Avg.).", "",
        "Sets: `before_config` = the earlier per-template sampler at the config's own size, on the first",
        f"{sets['before_config']['n_evaluated']} test questions (what `bench qa --n 200` evaluated); `before` = the",
        f"earlier sampler with n_test = {m['n_test']}; `after` = answers balanced within every (template,",
        f"parameters) cell, n_test = {m['n_test']}. Target (after, every family): question-only ≤ majority +",
        f"{MARGIN:g} points and no template with a single answer class: "
        f"**{'met' if m['target_met'] else 'NOT met'}**.", "",
        "## Before / after (accuracy %)", "", *summary_table(sets), "",
    ]
    for name, s in sets.items():
        lines += [f"## {name}", "", *set_table(s), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from llm.build import load_data
    from llm.qa import QAConfig
    from llm.sft import from_dict
    from stockr1.config import load_yaml

    ap = argparse.ArgumentParser(prog="stockr1 bench qa_baselines", description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="configs/sft/tiny.yaml", help="SFT config (data and qa sections)")
    ap.add_argument("--n-test", type=int, default=1250, help="test questions generated (≥ 1000: ~250 per family)")
    ap.add_argument("--n-eval", type=int, default=200, help="test questions of before_config (bench qa's --n)")
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--out", default="results/qa_baselines", help="refused if it holds results, unless --overwrite")
    ap.add_argument("--overwrite", action="store_true", help="replace an --out that holds results")
    ap.add_argument("--save-qa", action="store_true", help="also write the after set's qa.jsonl")
    argv = sys.argv[1:] if argv is None else list(argv)
    args = ap.parse_args(argv)
    refuse_existing(args.out, args.overwrite)  # before generating anything
    cfg = load_yaml(args.config)
    windows, context_fn = load_data(cfg.get("data", {}))
    qa = from_dict(QAConfig, cfg.get("qa", {}))
    plans = {"before_config": (replace(qa, balance="template"), args.n_eval),
             "before": (replace(qa, balance="template", n_test=args.n_test), None),
             "after": (replace(qa, balance="cell", n_test=args.n_test), None)}
    sets, after_items = {}, []
    for name, (qcfg, n_eval) in plans.items():
        sets[name], items = evaluate_set(name, qcfg, windows, context_fn, n_eval, args.n_boot)
        after_items = items if name == "after" else after_items
    rep = sets["after"]["report"]
    met = all(target(rep).values()) and not rep["single_answer_templates"]
    m = {"command": command_line("stockr1 bench qa_baselines", argv), "commit": git_commit(),
         "date": time.strftime("%Y-%m-%d"), "config": args.config, "n_test": args.n_test, "n_boot": args.n_boot,
         "margin_points": MARGIN, "target_met": met, "target_by_family": target(rep), "sets": sets}
    with output_dir(args.out, args.overwrite) as out:
        (out / "metrics.json").write_text(json.dumps(m, indent=1))
        (out / "README.md").write_text(readme(m))
        if args.save_qa:
            from llm.qa import save_items

            save_items(after_items, out / "qa.jsonl")
    print("\n".join(summary_table(sets)))
    print(f"target met: {met}")
    print(f"wrote {args.out}")
    return 0
