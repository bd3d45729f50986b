"""`stockr1 bench select_sft --run DIR [--baseline RUN] [--n 40] --out DIR`: which checkpoint of an SFT run
to ship, chosen on validation questions (never test).

Candidates: the run's snapshots (``train.snapshot_every`` writes ``run/snapshots/step_NNNNN``, each a
loadable run of its step) and the run itself (its last step). Each is graded on the same family-balanced
validation slice of the run's QA file (``benchmarks.sft_recipe.val_slice``) by the QA grader, and on
whether its answer is the one its own observed trajectory implies (``benchmarks.qa.answers``). The choice
is ``benchmarks.sft_recipe.export_step``'s rule, fixed before any number is read: the highest action +
answer rate, then accuracy, then the later step. ``--baseline`` (e.g. the shipped release) is graded on
the same questions and shown beside, with paired differences; it is not a candidate, but it is what ships
unless the choice is at least as good by the same rule (``ship``).

Writes ``metrics.json`` (per candidate: metrics and per-question hits; the choice and its directory) and
``README.md``. With tens of questions the intervals are wide: the README says where they hold 0.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.qa.answers import follows_rate, own_trajectory_answers
from benchmarks.sft_recipe import export_step, val_slice
from stockr1.manifest import git_commit
from stockr1.metrics.stats import paired_bootstrap, wilson_interval
from stockr1.metrics.verdict import claim_line
from stockr1.outdir import command_line, generated_line, output_dir, refuse_existing

KEEP = ("action_and_answer_rate", "action_success_rate", "answer_parse_rate", "overall")
_WINDOWS: dict[str, Any] = {}


def candidates(run: Path) -> dict[str, Path]:
    """step (as text) -> run directory: every snapshot, then the run itself at its last step."""
    out = {str(json.loads((d / "summary.json").read_text())["steps"]): d
           for d in sorted((run / "snapshots").glob("step_*")) if (d / "summary.json").exists()}
    if not (run / "summary.json").exists():
        raise FileNotFoundError(f"{run} is not a finished stockr1 sft run: no summary.json")
    out[str(json.loads((run / "summary.json").read_text())["steps"])] = run
    return out


def run_windows(run_dir: Path) -> Any:
    """The windows an SFT run's QA file was made from (its saved ``data`` section), loaded once per data
    section: every candidate of a run reads the same data."""
    from llm.build import load_data
    from stockr1.config import load_yaml

    data = load_yaml(Path(run_dir) / "config.yaml").get("data", {})
    key = json.dumps(data, sort_keys=True)
    if key not in _WINDOWS:
        _WINDOWS[key] = load_data(data)[0]
    return _WINDOWS[key]


def grade(run_dir: Path, val_ids: list[str] | None, n: int, max_new_tokens: int) -> dict[str, Any]:
    """Greedy rollouts of ``run_dir`` on its validation slice (or on the questions ``val_ids``, in that
    order): the grader's rates, per-question hits and whether each answer follows its own trajectory."""
    from llm.ask import load_run
    from llm.qa import load_items
    from llm.qa.answers import is_correct
    from llm.qa.evaluate import grade_rollouts, item_hits, rollout_items
    from stockr1.config import load_yaml

    cfg = load_yaml(run_dir / "config.yaml")
    windows = run_windows(run_dir)
    items = load_items(run_dir / "qa.jsonl")
    if val_ids is None:
        val = val_slice(items, n)
    else:
        by_id = {it.id: it for it in items}
        missing = [i for i in val_ids if i not in by_id or by_id[i].split != "val"]
        if missing:
            raise ValueError(f"{run_dir}/qa.jsonl lacks the validation questions {missing[:3]}: the runs must share a QA file")
        val = [by_id[i] for i in val_ids]
    policy, decoder = load_run(run_dir)
    t0 = time.perf_counter()
    pairs = rollout_items(policy, decoder, windows, val, max_new_tokens=max_new_tokens,
                          max_context_chars=cfg.get("max_context_chars"))
    m = grade_rollouts(pairs)
    implied = own_trajectory_answers(pairs, windows)
    # per question: does the answer equal what its own trajectory implies (None: no readable observation)
    follows = [None if a is None else float(is_correct(replace(it, answer=a), r.answer))
               for (it, r), a in zip(pairs, implied, strict=True)]
    return {"dir": str(run_dir), "n_questions": len(val), "ids": [it.id for it in val],
            **{k: float(m[k]) for k in KEEP if k in m}, "follows_rate": follows_rate(pairs, implied),
            "truncated": 100.0 * float(np.mean([r.finish_reason == "length" for _, r in pairs])),  # hit max_new_tokens
            "hits": item_hits(pairs).tolist(), "follows": follows, "eval_s": round(time.perf_counter() - t0, 1)}


def rank(m: dict[str, Any]) -> tuple[float, float]:
    """``export_step``'s order without the step: action + answer rate, then accuracy."""
    return (float(m["action_and_answer_rate"]), float(m["overall"]))


def paired(a: dict[str, Any], b: dict[str, Any], key: str) -> tuple[float, float, float] | None:
    """a − b on per-question ``key`` (hits, or follows where both rollouts had an observation), in points,
    with a 95% paired bootstrap interval over questions; None with fewer than 2 such questions."""
    x, y = np.array(a[key], dtype=object), np.array(b[key], dtype=object)
    ok = np.array([u is not None and v is not None for u, v in zip(x, y, strict=True)])
    if ok.sum() < 2:
        return None
    d = paired_bootstrap(100.0 * x[ok].astype(float), 100.0 * y[ok].astype(float), higher_is_better=True)
    return d.diff, d.lo, d.hi


def _pct(v: float) -> str:
    return "–" if v is None or np.isnan(v) else f"{v:.1f}"  # no rollout read an observation


def readme(res: dict[str, Any], command: str) -> str:
    chosen, base = res["chosen"], res.get("baseline")
    rows = dict(res["candidates"])
    lines = [f"# `stockr1 bench select_sft`: the checkpoint of `{res['run']}` to ship, chosen on validation", "",
             generated_line(command), "",
             f"{res['n']} family-balanced **validation** questions of the run's QA file (never test), greedy rollouts. "
             "Rule, fixed before any number: the highest action + answer rate, then accuracy, then the later step "
             "(`benchmarks.sft_recipe.export_step`). *Follows* = the share of rollouts with an observation whose answer "
             "is the one their own observed trajectory implies (`benchmarks.qa.answers`); *truncated* = rollouts that hit "
             "the new-token limit. Intervals: Wilson for rates, "
             "paired bootstrap over questions for differences.", "",
             "| run | step | action + answer (%) | accuracy (%) [95%] | follows own trajectory (%) | truncated (%) | decode (s) |",
             "|---|---|---|---|---|---|---|"]
    table = [(f"candidate{' (chosen)' if s == chosen else ''}", s, m) for s, m in sorted(rows.items(), key=lambda kv: int(kv[0]))]
    if base is not None:
        table.append((f"baseline `{base['dir']}`", str(base.get("step", "–")), base))
    for name, step, m in table:
        k = int(round(m["overall"] * m["n_questions"] / 100))
        lo, hi = wilson_interval(k, m["n_questions"])
        lines.append(f"| {name} | {step} | {m['action_and_answer_rate']:.1f} | {m['overall']:.1f} [{100 * lo:.1f}, "
                     f"{100 * hi:.1f}] | {_pct(m['follows_rate'])} | {m['truncated']:.1f} | {m['eval_s']:.0f} |")
    lines += ["", f"**Chosen: step {chosen}** (`{rows[chosen]['dir']}`)."]
    if base is not None:
        lines += ["", "Chosen − baseline, paired on the same questions:", ""]
        for key, what in (("hits", "accuracy (points)"), ("follows", "answers that follow their own trajectory (points)")):
            d = paired(rows[chosen], base, key)
            lines.append("- " + (claim_line(what, *d) if d is not None else
                                 f"{what}: fewer than 2 questions where both rollouts read an observation; not compared"))
        ship = res.get("ship")
        lines += ["", f"**Ship: {'the chosen checkpoint' if ship == 'chosen' else 'the baseline'}** (the same rule "
                  "across runs: the baseline stays unless the choice is at least as good on action + answer rate and "
                  "then accuracy, on these questions)."]
        lines += ["", "With this many questions a difference of a few points is a tie; the test-set comparison is "
                  "`stockr1 bench qa` on the shipped release."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="stockr1 bench select_sft", description=__doc__.splitlines()[0])
    ap.add_argument("--run", required=True, help="a finished `stockr1 sft` run dir (with snapshots/ when it took them)")
    ap.add_argument("--baseline", default=None, help="another finished run graded on the same questions (not a candidate)")
    ap.add_argument("--n", type=int, default=40, help="family-balanced validation questions")
    ap.add_argument("--max-new-tokens", type=int, default=640)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", required=True)
    ap.add_argument("--overwrite", action="store_true")
    argv = list(argv) if argv is not None else None
    a = ap.parse_args(argv)
    refuse_existing(a.out, a.overwrite)
    import torch

    torch.set_num_threads(a.threads)
    run = Path(a.run)
    graded = {}
    ids = None
    for step, d in candidates(run).items():
        graded[step] = grade(d, ids, a.n, a.max_new_tokens)
        ids = graded[step]["ids"]
        print(f"[select_sft] step {step}: action+answer {graded[step]['action_and_answer_rate']:.0f}% "
              f"accuracy {graded[step]['overall']:.1f}% follows {graded[step]['follows_rate']:.1f}%", flush=True)
    chosen = export_step(graded)
    res: dict[str, Any] = {"run": str(run), "n": a.n, "chosen": chosen, "chosen_dir": graded[chosen]["dir"],
                           "commit": git_commit(), "candidates": graded}
    if a.baseline:
        base = grade(Path(a.baseline), ids, a.n, a.max_new_tokens)
        base["step"] = json.loads((Path(a.baseline) / "summary.json").read_text()).get("steps")
        res["baseline"] = base
        # the same rule across runs: the baseline stays unless the choice is at least as good on both keys
        res["ship"] = "chosen" if rank(graded[chosen]) >= rank(base) else "baseline"
    cmd = command_line("stockr1 bench select_sft", argv if argv is not None else sys.argv[1:])
    with output_dir(a.out, a.overwrite) as out:
        (out / "metrics.json").write_text(json.dumps(res, indent=1))
        (out / "README.md").write_text(readme(res, cmd))
    print(f"chosen: step {chosen} ({graded[chosen]['dir']}); wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
