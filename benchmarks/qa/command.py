"""`stockr1 bench qa --checkpoint RUN_DIR [--ablation-checkpoint RUN_DIR] [--name LABEL] [--qa QA.jsonl] --out DIR`

QA accuracy per task family and overall (Stock-R1 Table 1 layout) on held-out test questions, with
action success rate, answer parse rate and tokens per answer, beside the majority-class and
random-walk baselines. ``--ablation-checkpoint`` is a second SFT run trained from the same init
with soft tokens off (same budget); both are evaluated on the same questions in this one run.

``--name`` labels the checkpoint's row (default ``stock-r1-sft``; the ablation row is
``<name>-no-ts-tokens``), e.g. ``stock-r1-grpo`` for a GRPO run directory. ``--qa`` evaluates the
questions of another QA file instead of the run's own ``qa.jsonl`` (its train split feeds the
majority-class baseline, its test split is evaluated); its windows must come from the same data
section (``--config``).

``--anonymise`` (the memorisation probe): every policy is also evaluated on the same questions with
tickers and company names replaced by neutral ids, dates shifted by whole weeks and prices rescaled
(``stockr1.anonymise``; answers unchanged by construction); the README reports the paired accuracy
gap plain − anonymised with its date-block interval (rows ``<name>-anonymised``).

Baselines (no policy): majority class, random walk, and the question-only lookup and classifier
(``llm.qa.question_only``: template and parameters alone, fitted on train). ``baselines.json`` has
each with its 95% interval per family and overall, the per-family counts, the question-only gap to
majority and the templates with a single answer class, on the evaluated questions (``evaluated``)
and on every test question of the file (``all_test``); ``table.md`` shows both.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.qa.answers import answer_spread, spread_md
from benchmarks.qa.reuse import (
    ROLLOUT_BATCH,
    fingerprint,
    reused_pairs,
    rollout_record,
    rollout_settings,
    write_reuse_index,
)
from benchmarks.qa.targets import READER, family_comparisons, own_trajectory, targets, targets_md
from forecast_action.build import load_decoder
from llm.policy import Policy, PolicyConfig
from llm.qa import load_items
from llm.qa.answers import is_correct
from llm.qa.baselines import (
    accuracy_by_family,
    accuracy_intervals,
    baseline_answer_fns,
    baseline_report,
    overall_difference,
    qa_resamples,
)
from llm.qa.core import FAMILY_TITLES
from llm.qa.evaluate import (
    evidence_read_rate,
    failure_kind,
    failure_kinds,
    grade_rollouts,
    item_hits,
    rollout_items,
    start_value_read_rate,
)
from llm.qa.prompt import answer_instruction, question_line
from llm.qa.tool_reader import Forecaster, decoder_forecaster, ensemble_forecaster, tool_reader_answer_fns
from llm.special_tokens import FORECAST_TS_CLOSE
from stockr1.anonymise import Anonymiser, profile_names
from stockr1.config import load_yaml
from stockr1.cutoff import cutoff_line
from stockr1.data import load_run_data
from stockr1.data.config import DataConfig
from stockr1.manifest import git_commit
from stockr1.metrics.stats import wilson_interval
from stockr1.metrics.verdict import verdict
from stockr1.outdir import command_line, generated_line, output_dir, refuse_existing
from stockr1.progress import Progress

FAMILY_COLS = ("forecast", "event", "fundamental", "news", "multi_signal")
EXTRA_COLS = ("action_success_rate", "answer_parse_rate", "action_and_answer_rate", "start_value_read_rate",
              "evidence_read_rate", "tokens_per_answer")


def evaluate_run(run_dir: Path, items, windows, max_new_tokens: int, max_context_chars: int | None = None,
                 device: str = "cpu", reuse: tuple[Path, str] | None = None,
                 batch_size: int = ROLLOUT_BATCH) -> tuple[dict[str, Any], list]:
    """Greedy rollouts of the run's policy on ``device`` (the decoder tool stays on cpu), graded.
    ``reuse`` = (an earlier --out, this run's fingerprint): its rollouts when their inputs were identical
    (``benchmarks.qa.reuse``), else decoded here."""
    found = reused_pairs(*reuse, items, batch_size) if reuse is not None else None
    pairs = [] if found is None else list(found[0])
    n_reused = len(pairs)
    if found is not None:
        print(f"[bench qa] {run_dir}: {len(pairs)} of {len(items)} rollouts reused from {reuse[0]} "
              f"(row {found[1]}: same fingerprint)")
    if len(pairs) < len(items):  # the rest, in batches aligned as a fresh run's (benchmarks.qa.reuse)
        rest = items[len(pairs):]
        policy = Policy.load(run_dir / "policy").to(device).eval()
        decoder = load_decoder(run_dir / "decoder")
        bar = Progress(len(rest), f"[bench qa] {run_dir}", unit="rollout")
        with policy.merged():  # LoRA and protocol rows folded in: same logits, ~3x faster decoding
            pairs += rollout_items(policy, decoder, windows, rest, max_new_tokens=max_new_tokens,
                                   max_context_chars=max_context_chars, batch_size=batch_size,
                                   on_batch=bar.advance)
    metrics: dict[str, Any] = grade_rollouts(pairs)
    metrics["reused_from"] = None if found is None else f"{reuse[0]} ({found[1]}: {n_reused} of {len(items)})"
    metrics["start_value_read_rate"] = start_value_read_rate(pairs, windows)
    metrics["evidence_read_rate"] = evidence_read_rate(pairs, windows)
    return metrics, pairs


def garch_forecaster(windows, n_samples: int = 100, seed: int = 0) -> Forecaster:
    """GJR-GARCH-t fitted per ticker on the train split of ``windows`` (one fit, train only): the
    ``tool_reader_garch`` row's forecaster."""
    from benchmarks.baselines.classical import GJRGARCH
    from stockr1.types import train_only

    model = GJRGARCH().fit(train_only(windows))
    return lambda w: model.predict(w, n_samples=n_samples, seed=seed)


def base_model(run_dir: Path) -> str:
    """The policy's base model as its saved config names it (hub id, local path or package form)."""
    cfg = json.loads((Path(run_dir) / "policy" / "policy_config.json").read_text())
    if cfg.get("name_or_path") == "tiny":  # llm.policy's random-init fixture, not a pretrained base
        return f"random-init tiny Qwen3 (width {cfg.get('tiny_hidden')}, {cfg.get('tiny_layers')} layers)"
    return str(cfg.get("name_or_path"))


def policy_cutoff_line(run_dir: Path, items, allow: bool) -> str:
    """``stockr1.cutoff.cutoff_line`` for the run's saved policy config and the evaluated decision dates."""
    pcfg = PolicyConfig.from_dict(json.loads((run_dir / "policy" / "policy_config.json").read_text()))
    return cutoff_line(pcfg.pretrained, pcfg.name_or_path, pcfg.knowledge_cutoff, [it.date for it in items], allow)


def anonymised(store, windows, items: list) -> tuple:
    """(anonymised windows, anonymised items) of the memorisation probe; names from the data's store."""
    an = Anonymiser.for_windows(windows, profile_names(getattr(store, "profiles", None) or {}))
    return an.windows(windows), [an.item(it) for it in items]


def table(metrics: dict[str, dict[str, float]]) -> str:
    cols = [FAMILY_TITLES[f] for f in FAMILY_COLS] + ["Avg."] + list(EXTRA_COLS)
    lines = ["| model | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for name, m in metrics.items():
        vals = [m.get(f) for f in FAMILY_COLS] + [m.get("overall")] + [m.get(c) for c in EXTRA_COLS]
        lines.append(f"| {name} | " + " | ".join("–" if v is None else f"{v:.2f}" for v in vals) + " |")
    return "\n".join(lines) + "\n"


def interval_table(report: dict) -> str:
    """Baselines with 95% intervals (date-block bootstrap) and the per-family question counts."""
    fams = [f for f in FAMILY_COLS if f in report["counts"]]
    head = [f"{FAMILY_TITLES[f]} (n={report['counts'][f]})" for f in fams] + [f"Avg. (n={report['n']})"]
    lines = ["| baseline | " + " | ".join(head) + " |", "|---" * (len(head) + 1) + "|"]
    for name, row in report["rows"].items():
        cells = [f"{row[f]['acc']:.1f} [{row[f]['ci_lo']:.1f}, {row[f]['ci_hi']:.1f}]" for f in [*fams, "overall"]]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    single = report["single_answer_templates"]
    lines.append("")
    lines.append("Templates with a single answer class: " + (", ".join(f"{t} ({a})" for t, a in single.items())
                                                            if single else "none"))
    return "\n".join(lines) + "\n"


def _ci(row: dict) -> str:
    return f"{row['acc']:.1f} [{row['ci_lo']:.1f}, {row['ci_hi']:.1f}]"


def diff_cell(d: dict) -> str:
    """A paired difference (points) with its interval and the verdict read from that interval."""
    return f"{d['diff']:+.1f} [{d['ci_lo']:+.1f}, {d['ci_hi']:+.1f}] {verdict(d['diff'], d['ci_lo'], d['ci_hi'])}"


def readme(metrics: dict, intervals: dict, evaluated: dict, run: dict, spreads: dict | None = None) -> str:
    """results/<out>/README.md from the numbers this run just produced (never edited by hand)."""
    fams = [f for f in FAMILY_COLS if f in evaluated["counts"]]
    head = [f"{FAMILY_TITLES[f]} (n={evaluated['counts'][f]})" for f in fams] + [f"Avg. (n={evaluated['n']})"]
    rows = {**evaluated["rows"], **{k: v["accuracy"] for k, v in intervals.items()}}
    lines = [
        "# QA benchmark (`stockr1 bench qa`)", "",
        *([" ".join(run["cutoff"]), ""] if run.get("cutoff") else []),  # what the cutoff check found, first
        generated_line(run["command"], run["commit"], run["date"]),
        "", f"Questions: the first {evaluated['n']} of the family-balanced test split of `{run['qa_file']}` "
        f"({run['n_test_file']} test, {run['n_train']} train questions; baselines are fitted on train). "
        f"Greedy rollouts, up to {run['max_new_tokens']} new tokens, {run['eval_s']:.0f} s decoding every policy row's rollouts that were not reused "
        f"on {run['threads']} threads. Intervals: 95% percentile intervals over {evaluated['n_boot']} date-block "
        f"resamples (block {evaluated['block']} dates), one set shared by every row and every difference.", "",
        "## Accuracy (%) per family and overall (mean over families)", "",
        "Rows `tool_reader_*` answer from a forecast distribution alone (`llm.qa.tool_reader`: the answer most "
        "sampled paths give, numeric: their median): GARCH's, the policy's own decoder with no action, and the "
        "TS encoder ensemble's where `--tool-reader-ts` names one. They are the ceiling of a policy that passes its "
        "tool's information faithfully to its answer.", "",
        "| answerer | " + " | ".join(head) + " |", "|---" * (len(head) + 1) + "|",
    ]
    for name, row in rows.items():
        k = int(metrics.get(name, {}).get("n", evaluated["n"]))  # --compare-n: a policy row on the first k questions
        label = name if k == evaluated["n"] else f"{name} (first {k} questions)"
        lines.append(f"| {label} | " + " | ".join(_ci(row[f]) if f in row else "–" for f in [*fams, "overall"]) + " |")
    lines += ["", "## Policies: protocol and difference to each baseline", "",
              "| policy | base model | action + answer parse (Wilson 95%) | complete action | answer parses | "
              "start_value = last close (±1%) | price evidence read | tokens | " + " | ".join(f"− {b} (points)" for b in evaluated["rows"]) + " |",
              "|---" * (8 + len(evaluated["rows"])) + "|"]
    for name, iv in intervals.items():
        m, lo_hi = metrics[name], iv["action_and_answer_wilson"]
        diffs = " | ".join(diff_cell(d) for d in iv["minus"].values())
        lines.append(f"| {name} | `{m.get('base_model', '?')}` | {m['action_and_answer_rate']:.1f} "
                     f"[{lo_hi[0]:.1f}, {lo_hi[1]:.1f}] | {m['action_success_rate']:.1f} | {m['answer_parse_rate']:.1f} "
                     f"| {m.get('start_value_read_rate', float('nan')):.1f} | {m.get('evidence_read_rate', float('nan')):.1f} "
                     f"| {m['tokens_per_answer']:.0f} | {diffs} |")
    lines += ["", "Two checks that the policy read its prompt: `start_value` within 1% of the prompt's last close, "
              "and the rationale's price sentence (ticker, date, close, 5- and 20-session returns, 10-session "
              "volatility) exactly as the window's data give it (`llm.qa.evaluate.evidence_read_rate`). On a rebased "
              "source (100 = the close of t, `docs/data.md`) every last close is 100, so only the second shows "
              "reading. Every rollout is in [rollouts.jsonl](rollouts.jsonl)."]
    reused = [f"`{name}` from {m['reused_from']}" for name, m in metrics.items() if m.get("reused_from")]
    if reused:
        lines += ["", "Rollouts reused, not decoded here; the rest of each row was decoded (`--reuse`: same policy and decoder files, QA file, data and "
                  "decoding settings, same batches; `benchmarks.qa.reuse`): " + "; ".join(reused) + "."]
    short = [f"`{n}` on the first {int(metrics[n]['n'])}" for n in intervals if int(metrics[n]["n"]) < evaluated["n"]]
    if short:
        lines += ["", "Rows on fewer questions (`--compare-n`): " + "; ".join(short) + "; their accuracy, differences to "
                  "the baselines and to the first policy are paired on those questions alone."]
    for name, iv in intervals.items():
        if "targets" in iv:
            lines += targets_md(name, iv["targets"]["rows"], iv["targets"]["comparisons"], (spreads or {}).get(name),
                                evaluated["counts"])
    for name, rows in (spreads or {}).items():
        lines += spread_md(name, rows)
    paired = [(name, ref, d) for name, iv in intervals.items() for ref, d in iv.get("vs_policy", {}).items()]
    probe = [(name, iv["anonymised"]) for name, iv in intervals.items() if "anonymised" in iv]
    if probe:
        lines += ["", "## Memorisation probe (`--anonymise`): plain − anonymised overall accuracy (points)", "",
                  "The same questions with neutral ticker ids, no company names, dates shifted by whole weeks and "
                  "prices rescaled (answers unchanged). A gap above 0 beyond noise means the policy used what it "
                  "knew of the named stock and dates; for a random-init policy it must be a tie.", ""]
        lines += [f"- {name}: {diff_cell(d)}" for name, d in probe]
    if paired:
        lines += ["", "## Paired differences between policies (overall accuracy, points)", ""]
        lines += [f"- {name} − {ref}: {diff_cell(d)}" for name, ref, d in paired]
    lines += ["", "Verdicts (`stockr1.metrics.verdict`): holds where the interval excludes 0 on the policy's side, "
              "tie where it contains 0, worse where it excludes 0 on the other side. Files: [table.md](table.md) (the Table 1",
              "layout and the baselines on every test question of the file), [metrics.json](metrics.json),",
              "[intervals.json](intervals.json), [baselines.json](baselines.json), [samples.json](samples.json),",
              "[failures.json](failures.json), [failed_rollouts.json](failed_rollouts.json), "
              "[answer_spread.json](answer_spread.json).", ""]
    return "\n".join(lines)


_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def restatement(pairs) -> tuple[list[str], list[dict[str, bool]], dict[str, float]]:
    """How each rollout restated the prompt's question line after the tool's observation (the SFT
    traces open the final reasoning with it: a copy from ~490 tokens back).

    Returns what each rollout wrote after the observation; per rollout ``verbatim`` (the line exactly)
    and ``words`` (the line with every number masked: the template and answer instruction, whatever
    dates, prices and horizons it wrote); and in % the share of each and the action + answer rate
    with and without a ``words`` copy (nan when no rollout falls in a group)."""
    after = [r.completion.rsplit(FORECAST_TS_CLOSE, 1)[-1].strip() for _, r in pairs]
    copies = []
    for (it, _), a in zip(pairs, after, strict=True):
        line, first = question_line(it), a.split("\n", 1)[0]
        copies.append({"verbatim": first == line, "words": _NUMBER.sub("#", first) == _NUMBER.sub("#", line)})
    ok = [failure_kind(it, r) == "ok" for it, r in pairs]

    def pct(xs: list[bool]) -> float:
        return 100.0 * float(np.mean(xs)) if xs else float("nan")

    return after, copies, {
        "question_restated_rate": pct([c["verbatim"] for c in copies]),
        "question_words_restated_rate": pct([c["words"] for c in copies]),
        "action_and_answer_rate_if_words_restated": pct([o for o, c in zip(ok, copies, strict=True) if c["words"]]),
        "action_and_answer_rate_if_not": pct([o for o, c in zip(ok, copies, strict=True) if not c["words"]]),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="stockr1 bench qa", description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", required=True, help="SFT run dir (policy/, decoder/, qa.jsonl, config)")
    ap.add_argument("--ablation-checkpoint", default=None, help="the same SFT with soft tokens off")
    ap.add_argument("--compare", default=None, help="a second policy run (e.g. u-GRPO from this SFT run) graded on "
                                                   "the same questions, with its paired difference to --checkpoint")
    ap.add_argument("--compare-name", default="stock-r1-grpo", help="row label of --compare")
    ap.add_argument("--allow-before-cutoff", action="store_true",
                    help="evaluate a pretrained policy on dates on or before its knowledge cutoff (said in the README)")
    ap.add_argument("--anonymise", action="store_true",
                    help="also evaluate every policy on the anonymised questions and report the paired gap")
    ap.add_argument("--config", default=None, help="SFT config (for the data section); default: run's")
    ap.add_argument("--name", default="stock-r1-sft", help="row label of --checkpoint in metrics.json / table.md")
    ap.add_argument("--qa", default=None, help="QA jsonl to evaluate instead of the run's qa.jsonl")
    ap.add_argument("--out", required=True, help="output directory (refused if it holds results, unless --overwrite)")
    ap.add_argument("--overwrite", action="store_true", help="replace an --out that holds results")
    ap.add_argument("--n", type=int, default=200, help="test questions evaluated (balanced slice)")
    ap.add_argument("--max-new-tokens", type=int, default=512)
    ap.add_argument("--n-boot", type=int, default=1000, help="date-block resamples of every interval")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu", help="device of the policy during rollouts (cpu, cuda, cuda:1, ...)")
    ap.add_argument("--tool-reader-ts", default=None,
                    help="a saved TS encoder ensemble whose sample paths answer every question (row tool_reader_ts)")
    ap.add_argument("--compare-n", type=int, default=None, metavar="K",
                    help="evaluate --compare on the first K of the --n questions only (a decoding budget); its "
                         "accuracy and paired differences are then on those K")
    ap.add_argument("--reuse", default=None, metavar="DIR",
                    help="an earlier bench qa --out: a policy row whose fingerprint (policy and decoder files, QA "
                         "file, data, decoding settings) matches takes its rollouts from there instead of decoding")
    argv = sys.argv[1:] if argv is None else list(argv)
    args = ap.parse_args(argv)
    if args.compare_n is not None and not (args.compare and 0 < args.compare_n <= args.n):
        ap.error(f"--compare-n {args.compare_n}: needs --compare and 1 <= K <= --n ({args.n})")
    refuse_existing(args.out, args.overwrite)  # before any rollout
    torch.set_num_threads(args.threads)
    run = Path(args.checkpoint)
    cfg = load_yaml(args.config or run / "config.yaml")
    data = load_run_data(DataConfig.from_dict(cfg.get("data", {})))  # windows (context rendered) + store
    windows = data.windows
    qa_path = Path(args.qa) if args.qa else run / "qa.jsonl"
    if not qa_path.exists():
        raise SystemExit(f"stockr1 bench qa: QA file {qa_path} does not exist"
                         + ("" if args.qa else " (the run has no qa.jsonl: pass --qa)"))
    items = load_items(qa_path)
    train = [i for i in items if i.split == "train"]
    test = [i for i in items if i.split == "test"][: args.n]
    if not test:
        raise SystemExit(f"stockr1 bench qa: {qa_path} has no test-split questions")
    bad = [i.id for i in items if not 0 <= i.window < len(windows)]
    if bad:
        raise SystemExit(f"stockr1 bench qa: {qa_path} refers to windows outside the {len(windows)} of the "
                         f"configured data (items {bad[:3]}...): was it generated from another data section?")
    cutoff = [policy_cutoff_line(Path(path), test, args.allow_before_cutoff)  # before any rollout
              for path in (run, args.ablation_checkpoint, args.compare) if path is not None]
    anon = anonymised(data.store, windows, test) if args.anonymise else None
    fns = baseline_answer_fns(train, windows)
    # tool-readers (llm.qa.tool_reader): answers from a forecast distribution alone, the ceiling of a policy
    # that passes its tool's information to its answer; each forecasts every test window of the file once
    readers = {"tool_reader_garch": garch_forecaster(windows),
               "tool_reader_decoder": decoder_forecaster(load_decoder(run / "decoder"))}
    if args.tool_reader_ts:
        readers["tool_reader_ts"] = ensemble_forecaster(args.tool_reader_ts)
    fns.update(tool_reader_answer_fns(readers, windows, [i for i in items if i.split == "test"]))
    metrics = {k: accuracy_by_family(test, fn) for k, fn in fns.items()}
    all_test = [i for i in items if i.split == "test"]
    baselines = {"evaluated": baseline_report(train, test, windows, answer_fns=fns, n_boot=args.n_boot),
                 "all_test": baseline_report(train, all_test, windows, answer_fns=fns, n_boot=args.n_boot)}
    resamples, _ = qa_resamples(test, windows, args.n_boot)  # the same resamples as the baselines' rows
    base_hits = {k: np.array([float(is_correct(it, fn(it))) for it in test]) for k, fn in fns.items()}
    intervals: dict[str, dict] = {}
    samples, failures, failed = {}, {}, {}
    spreads: dict[str, list[dict]] = {}
    rollouts: list[dict] = []  # every rollout of every policy row, for re-grading without re-decoding
    fingerprints: dict[str, str] = {}
    settings = rollout_settings(cfg, args.max_new_tokens, args.threads, args.device)
    t0 = time.time()
    policy_hits: dict[str, np.ndarray] = {}
    arms = ((args.name, run, args.n), (f"{args.name}-no-ts-tokens", args.ablation_checkpoint, args.n),
            (args.compare_name, args.compare, args.compare_n or args.n))
    for name, path, k in arms:
        if path is None:
            continue
        qs = test[:k]  # --compare-n: the compare row on the first K questions, paired on those K
        rs = resamples if k == len(test) else qa_resamples(qs, windows, args.n_boot)[0]
        fingerprints[name] = fingerprint(Path(path), qa_path, settings)
        metrics[name], pairs = evaluate_run(Path(path), qs, windows, args.max_new_tokens, cfg.get("max_context_chars"),
                                            args.device, None if args.reuse is None else (Path(args.reuse), fingerprints[name]))
        metrics[name]["base_model"] = base_model(Path(path))
        hits = item_hits(pairs)
        n_ok = int(round(metrics[name]["action_and_answer_rate"] * len(pairs) / 100))
        intervals[name] = {"accuracy": accuracy_intervals(qs, hits, rs),
                           "action_and_answer_wilson": [100 * v for v in wilson_interval(n_ok, len(pairs))],
                           "minus": {b: overall_difference(qs, hits, h[:k], rs) for b, h in base_hits.items()}}
        if policy_hits:  # paired against the first policy (--checkpoint), on the same questions and resamples
            intervals[name]["vs_policy"] = {args.name: overall_difference(qs, hits, policy_hits[args.name][:k], rs)}
        policy_hits[name] = hits
        if name == args.name:  # the first policy's answers per template: do they depend on the prompt?
            spreads[name] = answer_spread(pairs, fns.get("majority"))
            comp = family_comparisons(qs, hits, base_hits, rs)  # issue 31's targets, per family
            comp["reader_accuracy"] = {b: intervals_acc["overall"]["acc"] for b, intervals_acc in
                                       baselines["evaluated"]["rows"].items() if b.startswith(READER)}
            comp["own_trajectory"] = own_trajectory(qs, pairs, hits, windows, rs)
            metrics[name]["own_trajectory_follows_rate"] = comp["own_trajectory"]["follows_rate"]
            intervals[name]["targets"] = {"rows": targets(metrics[name], comp),
                                          "comparisons": comp}
            metrics[name]["constant_answer_templates"] = [sum(r["constant"] for r in spreads[name]), len(spreads[name])]
        if anon is not None:  # the same run on the anonymised questions, paired on the same resamples
            metrics[f"{name}-anonymised"], apairs = evaluate_run(Path(path), anon[1][:k], anon[0], args.max_new_tokens,
                                                                 cfg.get("max_context_chars"), args.device)
            intervals[name]["anonymised"] = overall_difference(qs, hits, item_hits(apairs), rs)
            samples[f"{name}-anonymised"] = [{"question": it.question, "answer": it.answer, "completion": r.completion}
                                             for it, r in apairs[:5]]
        samples[name] = [{"question": it.question, "answer": it.answer, "completion": r.completion}
                         for it, r in pairs[:5]]
        rollouts += [rollout_record(name, it, r, h) for (it, r), h in zip(pairs, hits, strict=True)]
        failures[name] = failure_kinds(pairs)
        after, copies, rates = restatement(pairs)
        metrics[name].update(rates)
        # every failing rollout, with what the model wrote after the tool's observation and how it
        # restated the prompt's question line (a failed long-range copy if not even its words)
        failed[name] = [{"id": it.id, "kind": kind, "instruction": answer_instruction(it), "answer": it.answer,
                         "restated_question": c, "after_observation": a}
                        for (it, r), a, c in zip(pairs, after, copies, strict=True)
                        if (kind := failure_kind(it, r)) != "ok"]
    eval_s = time.time() - t0
    with output_dir(args.out, args.overwrite) as out:
        write_outputs(out, metrics, intervals, baselines, samples, failures, failed, rollouts, spreads, {
            "command": command_line("stockr1 bench qa", argv),
            "commit": git_commit(), "date": time.strftime("%Y-%m-%d"), "qa_file": str(qa_path),
            "n_train": len(train), "n_test_file": len(all_test), "eval_s": eval_s, "threads": args.threads,
            "max_new_tokens": args.max_new_tokens, "cutoff": list(dict.fromkeys(cutoff)),
            "fingerprints": fingerprints})
    print(table(metrics))
    print(f"wrote {args.out}")
    return 0


def write_outputs(out: Path, metrics: dict, intervals: dict, baselines: dict, samples: dict, failures: dict,
                  failed: dict, rollouts: list[dict], spreads: dict, run: dict) -> None:
    (out / "metrics.json").write_text(json.dumps(metrics, indent=1))
    (out / "intervals.json").write_text(json.dumps(intervals, indent=1))
    (out / "README.md").write_text(readme(metrics, intervals, baselines["evaluated"], run, spreads))
    (out / "answer_spread.json").write_text(json.dumps(spreads, indent=1))
    (out / "table.md").write_text(table(metrics) + "\n## Baselines with 95% intervals\n\nEvaluated questions:\n\n"
                                  + interval_table(baselines["evaluated"]) + "\nAll test questions of the file:\n\n"
                                  + interval_table(baselines["all_test"]))
    (out / "baselines.json").write_text(json.dumps(baselines, indent=1))
    (out / "samples.json").write_text(json.dumps(samples, indent=1))
    (out / "failures.json").write_text(json.dumps(failures, indent=1))  # first failure cause per rollout
    (out / "failed_rollouts.json").write_text(json.dumps(failed, indent=1))
    (out / "rollouts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rollouts))
    write_reuse_index(out, run["fingerprints"])
