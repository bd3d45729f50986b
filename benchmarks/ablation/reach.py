"""`stockr1 bench ablation_reach --config configs/ablation/smollm2-135m.yaml --qa results/qa --out DIR`:
can the ablation's target be met on its own questions by a policy that reads its tools?

Issue 33 part 4 asks for u-GRPO − SFT beyond its interval on QA accuracy or action accuracy, on the
ablation's held-out questions (``eval.n`` of them, ``balanced_slice``). GRPO's rewards pay the policy for
an answer and an action that match the realised future (R_ans, R_act), and for an action that matches
what its decoder returns (R_cons). What it can learn through its tools is therefore bounded by what the
tools themselves say about that future: a policy that passed a forecaster's view to its answer and its
action perfectly would answer as that forecaster's *reader* does. This command measures those readers
against the SFT start, on the ablation's questions, with the ablation's own interval
(``benchmarks.ablation.summary.interval``, one seed: the paired bootstrap over questions). A u-GRPO row's
interval adds its seed spread (the wider of the two stages), so this is the narrowest interval the
ablation could report for the same gain: where a reader's gain over SFT ties here, a u-GRPO that matched
that reader in every seed would tie too.

Rows, each paired per question with the SFT start:
- ``sft``: the start's greedy rollouts, taken from a ``stockr1 bench qa`` folder of the same run, QA file
  and decoding settings (its ``reuse.json`` fingerprint is checked, ``benchmarks.qa.reuse``; no decoding
  here). The ablation decodes them in other batches, so a left-padded row can rarely differ by a token.
- ``own_trajectory`` (QA only): the answer the start's own observed ``<forecast_ts>`` path implies
  (``benchmarks.qa.answers.own_trajectory_answers``): the SFT policy passing on what its tool returned.
- ``reader_<tool>``: the QA answer most of the tool's sample paths give (``llm.qa.tool_reader``) and the
  consensus action g over those paths (``forecast_action.derive.actions_from_forecast``), scored against
  a* = g(realised future) with the run's fitted thresholds, as the ablation scores a policy's action.
  Tools: GJR-GARCH-t fitted on train, the policy's own decoder with no action, and the TS encoder
  (``--tool-reader-ts``).

Both slices are reported: the ablation's questions, and every question of the ``bench qa`` folder (to
show whether a gain is a matter of sample size). What stays out of the bound, said in the README: a policy
could beat every reader by reading its prompt (price history, news, macro) better than these tools do.

Writes ``summary.json`` and a generated ``README.md``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.ablation.command import AblationConfig, balanced_slice, sft_start
from benchmarks.ablation.summary import TARGET_METRICS, interval
from benchmarks.qa.answers import follows_rate, own_trajectory_answers
from benchmarks.qa.command import garch_forecaster
from benchmarks.qa.reuse import RUN_FILE, fingerprint, rollout_settings, stored_rollout
from forecast_action.build import load_decoder
from forecast_action.derive import ActionThresholds, actions_from_forecast, actions_from_windows
from forecast_action.score import score_action
from llm.build import load_data
from llm.qa import load_items
from llm.qa.answers import is_correct, normalize_answer
from llm.qa.tool_reader import ToolReader, decoder_forecaster, ensemble_forecaster
from stockr1.config import load_yaml
from stockr1.manifest import git_commit
from stockr1.metrics.verdict import HOLDS
from stockr1.outdir import command_line, generated_line, output_dir, refuse_existing
from stockr1.types import train_only

METRIC_TITLES = {"qa_acc": "QA accuracy", "action_acc": "action accuracy"}
TOOL_NAMES = {"garch": "GJR-GARCH-t (fit on train)", "decoder": "the policy's own decoder (no action)",
              "ts": "the TS encoder"}
PAPER_QA_GAIN = (57.3, 67.5)  # Stock-R1 (paper), Table 3: SFT -> u-GRPO average QA accuracy on its own QA set


@dataclass(frozen=True)
class Answerer:
    """One row: ``qa`` [D, Q] 1/0 correct and ``action`` [D, Q] action score in [0, 1] per question of a slice
    and per draw of the row's sampled paths (D = 1 for the SFT rollouts and its own trajectory; None where
    the row gives no answer or no action). ``own_tool``: the tool the policy has (its decoder)."""

    name: str
    what: str
    qa: np.ndarray | None
    action: np.ndarray | None
    own_tool: bool


def stored_sft(qa_dir: Path, fp: str) -> tuple[str, dict[str, dict[str, Any]]]:
    """(row name, id -> stored rollout record) of the SFT start in ``bench qa``'s folder ``qa_dir``, read once.
    Refused, naming what differs, when no row there has fingerprint ``fp`` (another run, QA file or decoding
    setting)."""
    index = qa_dir / RUN_FILE
    if not index.is_file():
        raise FileNotFoundError(f"{index} is missing: {qa_dir} is not a `stockr1 bench qa` output folder")
    saved = json.loads(index.read_text())["fingerprints"]
    rows = [n for n, f in saved.items() if f == fp]
    if not rows:
        raise ValueError(f"no policy row of {qa_dir} was decoded from this SFT run with these settings (fingerprint "
                         f"{fp[:12]}; {index} has {saved}): rerun `stockr1 bench qa --checkpoint <the ablation's "
                         "sft.run_dir> --max-new-tokens <eval.max_new_tokens>`")
    recs = {r["id"]: r for line in (qa_dir / "rollouts.jsonl").read_text().splitlines()
            if (r := json.loads(line))["policy"] == rows[0]}
    return rows[0], recs


def sft_pairs(row: str, recs: Mapping[str, Mapping[str, Any]], items: Sequence[Any]) -> list[tuple[Any, Any]]:
    """(item, stored rollout) for every item, by question id; refused when the row lacks one of them."""
    missing = [it.id for it in items if it.id not in recs]
    if missing:
        raise ValueError(f"row {row} lacks {len(missing)} of the {len(items)} questions (e.g. {missing[:3]}): "
                         "rerun `stockr1 bench qa` with a larger --n")
    return [(it, stored_rollout(recs[it.id])) for it in items]


def sft_row(pairs: Sequence[tuple[Any, Any]], targets: Sequence[Any]) -> Answerer:
    """The start's rollouts graded as ``benchmarks.ablation.command.per_item`` grades a policy."""
    qa = np.array([[float(is_correct(it, normalize_answer(it, r.answer))) for it, r in pairs]])
    act = np.array([[score_action(r.action, t).score for (_, r), t in zip(pairs, targets, strict=True)]])
    return Answerer("sft", "the SFT start (its greedy rollouts)", qa, act, own_tool=True)


def own_trajectory_row(pairs: Sequence[tuple[Any, Any]], windows: Any) -> tuple[Answerer, float]:
    """QA only: always answering what the start's own observed trajectory implies (no readable one: wrong);
    and how often the start did (% of rollouts with a readable observation, ``follows_rate``)."""
    implied = own_trajectory_answers(pairs, windows)
    qa = np.array([[float(a is not None and is_correct(it, a)) for (it, _), a in zip(pairs, implied, strict=True)]])
    row = Answerer("own_trajectory", "the answer the start's own observed trajectory implies", qa, None, own_tool=True)
    return row, follows_rate(pairs, implied)


def consensus_actions(reader: ToolReader, thresholds: ActionThresholds) -> dict[int, Any]:
    """window -> the consensus action g over the reader's sample paths of that window (every forecast row)."""
    windows = sorted(reader.row_of, key=reader.row_of.get)  # the window of each forecast row, in row order
    acts = actions_from_forecast(reader.forecast, reader.windows.select(np.array(windows)).last_close, thresholds)
    return dict(zip(windows, acts, strict=True))


def reader_row(name: str, draws: Sequence[tuple[ToolReader, Mapping[int, Any]]], items: Sequence[Any],
               targets: Sequence[Any], own_tool: bool) -> Answerer:
    """A tool's reader over its draws (each: the reader and its ``consensus_actions``): its QA answer and its
    consensus action per item, scored like a policy's."""
    qa = [[float(is_correct(it, reader.answer(it))) for it in items] for reader, _ in draws]
    act = [[score_action(acts[int(it.window)], t).score for it, t in zip(items, targets, strict=True)]
           for _, acts in draws]
    what = f"reads the sample paths of {TOOL_NAMES.get(name, name)}"
    return Answerer(f"reader_{name}", what, np.array(qa), np.array(act), own_tool)


def compare_rows(rows: Sequence[Answerer], n_boot: int) -> dict[str, dict[str, Any]]:
    """metric -> row -> {value (%, mean over draws), its std over draws, own_tool, and for every row but sft:
    the gain over sft with the ablation's interval, draws x questions (a row's draws play the seeds)}."""
    sft = next(r for r in rows if r.name == "sft")
    out: dict[str, dict[str, Any]] = {}
    for metric in TARGET_METRICS:
        key = "qa" if metric == "qa_acc" else "action"
        base = 100.0 * getattr(sft, key)[0]
        out[metric] = {}
        for r in rows:
            vals = getattr(r, key)
            if vals is None:
                continue
            per_draw = 100.0 * vals.mean(axis=1)
            rec: dict[str, Any] = {"value": float(per_draw.mean()), "draw_std": float(per_draw.std(ddof=1))
                                   if len(per_draw) > 1 else 0.0, "draws": len(per_draw), "n": vals.shape[1],
                                   "what": r.what, "own_tool": r.own_tool}
            if r.name != "sft":
                rec["minus_sft"] = interval(dict(enumerate(100.0 * vals)), dict.fromkeys(range(len(vals)), base),
                                            n_boot=n_boot)
            out[metric][r.name] = rec
    return out


def _gains(rows: Mapping[str, Any], own: bool) -> dict[str, dict[str, Any]]:
    return {k: v["minus_sft"] for k, v in rows.items() if "minus_sft" in v and v["own_tool"] == own}


def _tool_line(gains: Mapping[str, Mapping[str, Any]], words: str, n: int) -> str:
    held = sorted(k for k, d in gains.items() if d["verdict"] == HOLDS)
    if held:
        return f"{words}: the gain over SFT **holds** for {', '.join(f'`{k}`' for k in held)}"
    best = max(gains, key=lambda k: gains[k]["diff"])
    return (f"{words}: **no gain over SFT holds** on these {n} questions (the largest, `{best}`: "
            f"{_cell(gains[best])})")


def conclusion(metrics: Mapping[str, Mapping[str, Any]], n: int, follows: float) -> list[str]:
    """The generated verdict on one slice: per metric, which readers' gains over SFT hold, through the
    policy's own tool and through tools it does not have; then what that says about the target."""
    lines, own_holds, other_holds = [], [], []
    for m in TARGET_METRICS:
        own, other = _gains(metrics[m], True), _gains(metrics[m], False)
        parts = [_tool_line(own, "its own tool (the decoder)", n)]
        if other:
            parts.append(_tool_line(other, "tools it does not have", n))
        lines.append(f"- {METRIC_TITLES[m]}: " + "; ".join(parts) + ".")
        own_holds += [m for d in own.values() if d["verdict"] == HOLDS]
        other_holds += [m for d in other.values() if d["verdict"] == HOLDS]
    if own_holds:
        why = (f" (the start's answer is the one its own observed trajectory implies in {follows:.1f}% of its "
               "rollouts)") if "qa_acc" in own_holds else ""
        lines.append(f"- So the target is within reach through the policy's own tool on these {n} questions "
                     f"({', '.join(METRIC_TITLES[m] for m in dict.fromkeys(own_holds))}): what blocks it there is the "
                     f"policy passing on what its tool says{why}.")
    elif other_holds:
        lines.append(f"- So on these {n} questions the policy's own tool does not carry enough for the target, even "
                     "read perfectly; tools it does not have do "
                     f"({', '.join(METRIC_TITLES[m] for m in dict.fromkeys(other_holds))}): the target needs one of them "
                     "in the policy's loop, or more questions.")
    else:
        lines.append(f"- So no tool here carries enough for the target on these {n} questions: through its tools, "
                     "a u-GRPO policy would tie SFT whatever GRPO does.")
    return lines


def _cell(d: Mapping[str, Any]) -> str:
    return f"{d['diff']:+.1f} [{d['ci_low']:+.1f}, {d['ci_high']:+.1f}] {d['verdict']}"


def _value(r: Mapping[str, Any]) -> str:
    return f"{r['value']:.1f}" + (f" ± {r['draw_std']:.1f}" if r["draws"] > 1 else "")


def readme(summary: Mapping[str, Any]) -> str:
    sl = summary["slices"]
    start = summary["start"]
    lines = ["# Can the ablation's target be met through the tools? (`stockr1 bench ablation_reach`)", "",
             generated_line(summary["command"], summary["commit"], summary["date"]), "",
             f"Start: `{start['sft_run_dir']}` (policy base `{start['policy_base']}`, SFT release hash "
             f"`{start['sft_release_hash'][:12]}`), its greedy rollouts from `{summary['qa_dir']}` (fingerprint "
             "checked, nothing decoded here). Target (issue 33 part 4): u-GRPO − SFT beyond its interval on QA "
             "accuracy or action accuracy.", "",
             "A reader answers and acts from one tool's sample paths alone (`llm.qa.tool_reader`; the action: g "
             "per path, the mode per field): its gain over SFT is what a policy that passed that tool's "
             "information perfectly to its answer and action would show. The policy's own tool is its decoder "
             "(with no action here); GARCH and the TS encoder are tools it does not have. A reader's paths are "
             f"random: {summary['reader_draws']} draws (sampling seeds 0..{summary['reader_draws'] - 1}, each "
             "forecasting every test window as `bench qa` does, so draw 0 is its tool-reader row) play the seeds "
             "of the ablation's own interval (`benchmarks.ablation.summary.interval`: draws x questions, "
             f"{summary['n_boot']} resamples). The SFT row is one greedy run, so this is the interval the ablation "
             "would report for a u-GRPO that answered as the reader, with the reader's draw spread standing in "
             "for its seed spread.", "", "## Verdict", ""]
    for s in sl.values():
        lines.append(f"On {s['label']} ({s['n']} questions):")
        lines += conclusion(s["metrics"], s["n"], s["follows_rate"])
        lines.append("")
    first = next(iter(sl.values()))
    qa = first["metrics"]["qa_acc"]
    best = max((k for k in qa if k != "sft"), key=lambda k: qa[k]["minus_sft"]["diff"])
    paper = PAPER_QA_GAIN[1] - PAPER_QA_GAIN[0]
    lines += [f"The paper reports {PAPER_QA_GAIN[0]} → {PAPER_QA_GAIN[1]} QA accuracy ({paper:+.1f} points) on its "
              f"own QA set; the best reader here gains {qa[best]['minus_sft']['diff']:+.1f} over this SFT start on "
              f"{first['label']} (`{best}`; descriptive: two QA sets, no interval on that comparison).", "",
              "Not bounded here: a policy could beat every reader by reading its prompt (price history, news, "
              "macro) better than these tools do; the question text alone carries nothing beyond the majority "
              "answer (results/qa_baselines).", ""]
    for s in sl.values():
        lines += [f"## {s['label'][0].upper() + s['label'][1:]} ({s['n']} questions)", "",
                  "| row | what | QA accuracy (%) | − SFT | action accuracy (%) | − SFT |", "|---|---|---|---|---|---|"]
        ms = s["metrics"]
        for name in ms["qa_acc"]:
            cells = []
            for m in TARGET_METRICS:
                r = ms[m].get(name)
                cells += (["–", "–"] if r is None else
                          [_value(r), _cell(r["minus_sft"]) if "minus_sft" in r else "–"])
            lines.append(f"| `{name}` | {ms['qa_acc'][name]['what']} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += ["Values: mean over the reader's draws ± their std. Files: [summary.json](summary.json).", ""]
    return "\n".join(lines)


def tool_readers(run: Path, windows: Any, items: Sequence[Any], ts_path: str | None, draws: int,
                 thresholds: ActionThresholds) -> dict[tuple[str, bool], list[tuple[ToolReader, dict[int, Any]]]]:
    """(tool, is it the policy's own) -> per draw (sampling seed = draw), a ``ToolReader`` forecasting every
    window of ``items`` once and its ``consensus_actions``."""
    decoder = load_decoder(run / "decoder")
    makers = {("garch", False): lambda seed: garch_forecaster(windows, seed=seed),
              ("decoder", True): lambda seed: decoder_forecaster(decoder, seed=seed)}
    if ts_path:
        makers[("ts", False)] = lambda seed: ensemble_forecaster(ts_path, seed=seed)
    out = {}
    for k, make in makers.items():
        readers = [ToolReader(make(d), windows, items) for d in range(draws)]
        out[k] = [(r, consensus_actions(r, thresholds)) for r in readers]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="stockr1 bench ablation_reach", description=__doc__.split("\n")[0])
    ap.add_argument("--config", required=True, help="the ablation config (its sft.run_dir and eval section)")
    ap.add_argument("--qa", required=True, help="a `stockr1 bench qa` folder of that SFT run (its rollouts are reused)")
    ap.add_argument("--tool-reader-ts", default=None, help="a saved TS encoder (or ensemble) to read as a tool")
    ap.add_argument("--reader-draws", type=int, default=5, help="draws of every reader's sample paths (>= 2)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--overwrite", action="store_true")
    ap.add_argument("--n-boot", type=int, default=None, help="bootstrap resamples (default: the config's n_boot)")
    argv = sys.argv[1:] if argv is None else list(argv)
    args = ap.parse_args(argv)
    if args.reader_draws < 2:
        ap.error(f"--reader-draws {args.reader_draws}: needs >= 2 (a reader's draw spread enters its interval)")
    refuse_existing(args.out, args.overwrite)
    cfg = AblationConfig.from_dict(load_yaml(args.config))
    if not cfg.sft.run_dir:
        raise SystemExit(f"{args.config}: sft.run_dir is not set; the bound needs the ablation's shipped SFT start")
    run, qa_dir = Path(cfg.sft.run_dir), Path(args.qa)
    torch.set_num_threads(cfg.threads)
    run_cfg = load_yaml(run / "config.yaml")
    windows, _ = load_data(run_cfg.get("data", {}))
    test = [it for it in load_items(run / "qa.jsonl") if it.split == cfg.eval.split]
    th_path = run / "thresholds.json"  # g as the SFT / GRPO runs used it, as the ablation loads it
    thresholds = ActionThresholds.load(th_path) if th_path.exists() else ActionThresholds.fit(train_only(windows))
    fp = fingerprint(run, run / "qa.jsonl", rollout_settings(run_cfg, cfg.eval.max_new_tokens, cfg.threads))
    row, stored = stored_sft(qa_dir, fp)  # the folder and fingerprint checked before any forecast
    slices = {"ablation": ("the ablation's questions (`eval.n`, `balanced_slice`)", balanced_slice(test, cfg.eval.n)),
              "all": (f"every question of {qa_dir}", [it for it in test if it.id in stored])}
    readers = tool_readers(run, windows, test, args.tool_reader_ts, args.reader_draws, thresholds)
    n_boot = args.n_boot or cfg.n_boot
    out_slices = {}
    for key, (label, items) in slices.items():
        pairs = sft_pairs(row, stored, items)
        targets = actions_from_windows(windows.select(np.array([it.window for it in items])), thresholds)
        own, follows = own_trajectory_row(pairs, windows)
        rows = [sft_row(pairs, targets), own,
                *(reader_row(k, r, items, targets, mine) for (k, mine), r in readers.items())]
        out_slices[key] = {"label": label, "n": len(items), "follows_rate": follows,
                           "metrics": compare_rows(rows, n_boot)}
    summary = {"command": command_line("stockr1 bench ablation_reach", argv), "commit": git_commit(),
               "date": datetime.date.today().isoformat(), "config": args.config, "qa_dir": str(qa_dir),
               "start": sft_start(run, per_seed=False), "reader_draws": args.reader_draws, "n_boot": n_boot,
               "slices": out_slices}
    with output_dir(args.out, args.overwrite) as out:
        (out / "summary.json").write_text(json.dumps(summary, indent=1))
        (out / "README.md").write_text(readme(summary))
    print(readme(summary))
    return 0
