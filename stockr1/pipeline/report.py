"""``<run>/report.md``: one page with every stage's timing, tables and plots, linking its result files.

It only reads what the stages wrote (``metrics.json``, ``table.md``, PNGs, summaries), with
run-relative links, so the run directory (or a copy of its small files) is self-contained.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from stockr1.metrics.stats import wilson_interval
from stockr1.metrics.verdict import HOLDS, TIE, WORSE, phrase, target_verdict, verdict
from stockr1.outdir import output_dir
from stockr1.pipeline.runner import Stage, read_done

QA_MODEL = "stock-r1-sft"  # the row name `stockr1 bench qa` gives the evaluated checkpoint


def _json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return "–" if v is None else str(v)


def _table(rows: list[dict[str, Any]], cols: Sequence[str]) -> str:
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_fmt(r.get(c)) for c in cols) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def timing_rows(run_dir: Path, stages: Sequence[Stage]) -> list[dict[str, Any]]:
    rows = []
    for st in stages:
        done = read_done(run_dir / st.name)
        status = "done" if done else "this page" if "report.md" in st.outputs else "not run"
        rows.append({"stage": f"[{st.name}]({st.name}/)", "what": st.doc, "status": status,
                     "wall s": done.get("wall_s") if done else None, "CPU s": done.get("cpu_s") if done else None})
    done_rows = [r for r in rows if r["status"] == "done"]
    rows.append({"stage": "**total**", "what": "", "status": f"{len(done_rows)}/{len(stages)}",
                 "wall s": round(sum(r["wall s"] for r in done_rows), 1),
                 "CPU s": round(sum(r["CPU s"] for r in done_rows), 1)})
    return rows


def _bench_section(run_dir: Path, rel: str, title: str) -> list[str]:
    d = run_dir / rel
    out = [f"## {title}", ""]
    if not (d / "metrics.json").exists():
        return out + [f"_not run (`stockr1 demo --only {rel.split('/')[0]}`)_", ""]
    out.append(f"Files: [metrics.json]({rel}/metrics.json)" + (f", [table.md]({rel}/table.md)" if (d / "table.md").exists() else ""))
    out.append("")
    if (d / "table.md").exists():
        out += [(d / "table.md").read_text().strip(), ""]
    for png in sorted(d.glob("*.png")):
        out += [f"![{png.stem}]({rel}/{png.name})", ""]
    return out


QA_GRPO = "stock-r1-grpo"  # the demo's --compare-name for the u-GRPO run


def qa_rows(run_dir: Path) -> list[dict[str, Any]]:
    """Baselines, the SFT and the u-GRPO row of ``bench_qa/metrics.json`` (one ``bench qa`` call)."""
    m = _json(run_dir / "bench_qa" / "metrics.json") or {}
    label = {QA_MODEL: "Stock-R1 SFT", QA_GRPO: "Stock-R1 u-GRPO"}
    return [{"model": label.get(name, name), **vals} for name, vals in m.items()]


def _ci(d: dict[str, float], unit: str = "") -> str:
    return f"{d['diff']:+.2f}{unit} [{d['ci_lo']:+.2f}, {d['ci_hi']:+.2f}]"


FORECAST_WORDS = {HOLDS: "beats", TIE: "ties with", WORSE: "loses to"}


def decoder_lines(am: dict[str, Any]) -> list[str]:
    """The decoder's oracle gain and its direction control, each read from its interval when bench action
    recorded one (older runs: the point values, said to be without an interval)."""
    o = am["oracle_full"]
    if "crps_ci_lo" in o:
        v = verdict(o["crps_diff"], o["crps_ci_lo"], o["crps_ci_hi"], higher_is_better=False)
        gain = (f"conditioning on the realised action a* changes CRPS by {o['crps_diff'] * 100:+.3f}×10⁻² "
                f"[{o['crps_ci_lo'] * 100:+.3f}, {o['crps_ci_hi'] * 100:+.3f}] ({o['crps_reduction'] * 100:.0f}% lower; "
                f"return RMSE {o['return_rmse_reduction'] * 100:.0f}% lower): the oracle gain {phrase(v)}.")
    else:
        gain = (f"conditioning on the realised action a* cuts return RMSE by {o['return_rmse_reduction'] * 100:.0f}% "
                f"and CRPS by {o['crps_reduction'] * 100:.0f}% (point estimates: this bench_action recorded no interval).")
    out = [f"- **Decoder** (the one the policy's forecast tool calls): {gain}"]
    ctl, n = am.get("control/direction") or {}, (am.get("meta") or {}).get("n_windows")
    if "unconditioned" in am and "up" in ctl:
        up, base = ctl["up"], ctl.get("base_up", float("nan"))
        line = (f"  Asked for one field alone, a requested direction 'up' gives an upward g(decoded) on {up * 100:.0f}% "
                f"of windows")
        if n:
            lo, hi = wilson_interval(round(up * n), n)
            line += (f" [{lo * 100:.0f}, {hi * 100:.0f}] against {base * 100:.0f}% with no action (above the no-action "
                     f"rate: {phrase(target_verdict(up, lo, hi, base))})")
        else:
            line += f" against {base * 100:.0f}% with no action (no window count recorded: no verdict)"
        out.append(line + f"; with no action its CRPS is {am['unconditioned']['crps'] * 100:.2f}×10⁻² "
                          f"(controllability table in bench_action/).")
    return out


def qa_lines(run_dir: Path) -> list[str]:
    """The policy lines of the report's opening: the SFT policy against majority and the tool-reader
    ceiling (the best ``tool_reader_*`` row), then u-GRPO − SFT, each read from its interval."""
    iv = _json(run_dir / "bench_qa" / "intervals.json") or {}
    qm = _json(run_dir / "bench_qa" / "metrics.json") or {}
    out: list[str] = []
    if QA_MODEL in iv:
        sft, m = iv[QA_MODEL], qm[QA_MODEL]
        acc, lo_hi = sft["accuracy"]["overall"], sft["action_and_answer_wilson"]
        reused = f"; rollouts reused from {m['reused_from']}" if m.get("reused_from") else ""
        out.append(f"- **SFT policy** (`{m.get('base_model', '?')}`) on {int(m['n'])} held-out questions{reused}: "
                   f"accuracy {acc['acc']:.1f}% [{acc['ci_lo']:.1f}, {acc['ci_hi']:.1f}] (mean over families); "
                   f"a complete action and a parseable answer in {m['action_and_answer_rate']:.1f}% "
                   f"[{lo_hi[0]:.1f}, {lo_hi[1]:.1f}] of rollouts" + (
                       f"; its rationale states the prompt's price evidence exactly in {m['evidence_read_rate']:.1f}%"
                       if "evidence_read_rate" in m else "") + ".")
        vs = sft["minus"]
        verdicts = {b: verdict(d["diff"], d["ci_lo"], d["ci_hi"]) for b, d in vs.items()}
        readers = {b: qm[b]["overall"] for b in vs if b.startswith("tool_reader") and b in qm}
        if "majority" in vs:
            out.append(f"  Against majority: {_ci(vs['majority'])} points, {verdicts['majority']}.")
        if readers:
            best = max(readers, key=readers.get)
            out.append(f"  Against the tool-reader ceiling ({best}, {readers[best]:.1f}%: the answer its forecast "
                       f"distribution gives alone): {_ci(vs[best])} points, {verdicts[best]}.")
        beaten = [b for b, v in verdicts.items() if v == HOLDS]
        rest = ", ".join(f"{b} {_ci(d)} {verdicts[b]}" for b, d in vs.items())
        out.append(f"  Every baseline (points): {rest}. " + (
            f"It beats {', '.join(beaten)} beyond the interval." if beaten else
            "**It beats none of them** beyond the interval."))
    if QA_GRPO in iv and "vs_policy" in iv[QA_GRPO]:
        d = iv[QA_GRPO]["vs_policy"][QA_MODEL]
        g = _json(run_dir / "grpo" / "summary.json") or {}
        k = int(qm[QA_GRPO]["n"])
        where = "the same questions" if QA_MODEL not in qm or k == int(qm[QA_MODEL]["n"]) else f"the first {k} of them"
        out.append(f"- **u-GRPO** ({g.get('steps', '?')} steps) − SFT on {where}: {_ci(d)} points "
                   f"({verdict(d['diff'], d['ci_lo'], d['ci_hi'])}); protocol rate "
                   f"{qm[QA_GRPO]['action_and_answer_rate']:.1f}%.")
    return out


def learned(run_dir: Path) -> list[str]:
    """The report's opening: what the run learned, each claim with its interval, and where a model does not
    beat a baseline, a plain sentence saying so; the policy first. Reads only the benches' own files."""
    out = ["## What was learned", "", *qa_lines(run_dir)]
    diffs = _json(run_dir / "bench_forecast" / "differences.json")
    fm = _json(run_dir / "bench_forecast" / "metrics.json") or {}
    if isinstance(diffs, list) and "stockr1_ts" in fm:
        crps = [d for d in diffs if d.get("metric") == "crps" and d.get("reference") == "stockr1_ts"]
        if crps:
            best = min(crps, key=lambda d: d["baseline_value"])
            v = verdict(best["diff"], best["ci_lo"], best["ci_hi"], higher_is_better=False)  # lower CRPS is better
            out.append(f"- **Forecaster**: CRPS {fm['stockr1_ts']['crps'] * 100:.3f}×10⁻² against the best baseline "
                       f"({best['baseline']}, {best['baseline_value'] * 100:.3f}×10⁻²): difference "
                       f"{best['diff'] * 100:+.3f}×10⁻² [{best['ci_lo'] * 100:+.3f}, {best['ci_hi'] * 100:+.3f}], "
                       f"so it {FORECAST_WORDS[v]} it ({phrase(v)}); 90% interval coverage "
                       f"{fm['stockr1_ts'].get('cov_close90', float('nan')) * 100:.1f}%.")
    am = _json(run_dir / "bench_action" / "metrics.json") or {}
    if "oracle_full" in am:
        out += decoder_lines(am)
    man = _json(run_dir / "manifest.json") or {}
    if man.get("total_wall_s") is not None:
        mins = man["total_wall_s"] / 60
        vs = "within it" if mins <= DEMO_TARGET_MIN else f"{mins - DEMO_TARGET_MIN:.1f} min over it"
        out.append(f"- This run: {mins:.1f} min wall over its finished stages "
                   f"({len(man.get('stages') or {})} stages; the table below). The target for the default demo "
                   f"is {DEMO_TARGET_MIN} min on 2 idle cores: {vs} (if its cores were idle).")
    return out + [""] if len(out) > 2 else []


DEMO_TARGET_MIN = 10  # issue 31: `./run demo` from the small release on 2 idle CPU cores

SFT_LOG_LINE = re.compile(r"^step (\d+): loss \S+ \(sft (\S+), ts (\S+)\)")  # llm.sft's progress line


def _version(d: Path) -> int:
    m = re.fullmatch(r"version_(\d+)", d.name)
    return int(m.group(1)) if m else -1


def lightning_series(log_dir: Path, keys: Sequence[str]) -> dict[str, list[tuple[float, float]]]:
    """{key: [(epoch, value)]} ordered by step, from every ``log_dir/version_*/metrics.csv``.

    Lightning's CSVLogger starts a new ``version_N`` each time a run is resumed, so one version holds
    one segment of the run. The versions are read in numeric order (version_10 after version_9) and a
    step logged by several keeps the later version's value: a resumed run redoes the steps after its
    checkpoint. ValueError naming the file (and line) for a metrics.csv without ``step`` / ``epoch``
    columns or with a value that is not a number."""
    import csv

    by_step: dict[str, dict[int, tuple[float, float]]] = {k: {} for k in keys}
    for f in sorted(log_dir.glob("version_*/metrics.csv"), key=lambda f: _version(f.parent)):
        with f.open(newline="") as fh:
            reader = csv.DictReader(fh)
            missing = {"step", "epoch"} - set(reader.fieldnames or ())
            if missing:
                raise ValueError(f"{f}: not a Lightning metrics.csv (no {sorted(missing)} column)")
            for r in reader:
                try:
                    for k in keys:
                        if r.get(k):
                            by_step[k][int(float(r["step"]))] = (float(r["epoch"]), float(r[k]))
                except (TypeError, ValueError) as e:
                    raise ValueError(f"{f}, line {reader.line_num}: unreadable row {r}: {e}") from e
    return {k: [pts[s] for s in sorted(pts)] for k, pts in by_step.items()}


def training_curves(run_dir: Path) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """Per-stage curves {panel: {series: [(x, y)]}} from the files the trainers write: Lightning's
    CSV logs (ts, action; per epoch, all resumed segments), the SFT progress lines in ``sft/log.txt``,
    ``grpo/metrics.jsonl``."""
    curves: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for stage, keys in (("ts", ("val/loss",)), ("action", ("val/loss", "val/loss_uncond"))):
        curves[f"{stage}: validation L_TS per epoch"] = lightning_series(run_dir / stage / "logs", keys)
    log = run_dir / "sft" / "log.txt"
    if log.exists():
        pts = [m.groups() for m in map(SFT_LOG_LINE.match, log.read_text().splitlines()) if m]
        curves["sft: L_SFT (model tokens)"] = {"l_sft": [(float(a), float(b)) for a, b, _ in pts]}
    met = run_dir / "grpo" / "metrics.jsonl"
    if met.exists():
        rows = [json.loads(line) for line in met.read_text().splitlines() if line.strip()]
        curves["grpo: reward per step"] = {k: [(r["step"], r[k]) for r in rows if k in r]
                                           for k in ("reward/total", "reward/r_ans", "reward/r_act")}
    return {k: v for k, v in curves.items() if any(v.values())}


def plot_training(run_dir: Path, path: Path) -> bool:
    curves = training_curves(run_dir)
    if not curves:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(curves), figsize=(4 * len(curves), 3.2), squeeze=False)
    for ax, (title, series) in zip(axes[0], curves.items(), strict=True):
        for name, pts in series.items():
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, label=name)
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def _training_section(run_dir: Path) -> list[str]:
    out = ["## Training", ""]
    if plot_training(run_dir, run_dir / "training.png"):
        out += ["![training curves](training.png)", ""]
    for name, title in (("sft", "Joint SFT"), ("grpo", "u-GRPO")):
        s = _json(run_dir / name / "summary.json")
        if s is None:
            continue
        final = s.get("final") or {}
        keys = [k for k in final if isinstance(final[k], (int, float))][:12]
        out += [f"**{title}** ({s.get('steps')} steps, [summary.json]({name}/summary.json))", ""]
        out += [_table([{k: final[k] for k in keys}], keys) if keys else "", ""]
    return out


def models_line(run_dir: Path, man: dict[str, Any]) -> str:
    """Which models the run started from (the release stage's manifest) and its config: small models on
    CPU budgets, not the paper's scale."""
    rel = _json(run_dir / "release" / "manifest.json")
    cfg = " ".join(man.get("command") or []) or "stockr1 demo"
    if rel is None:
        return f"Every model trained in this run (`{cfg}`): small models on CPU budgets, not the paper's scale."
    base = (rel.get("base") or {}).get("name_or_path") or "the random-init tiny Qwen3 (no pretrained base)"
    return (f"Started from the shipped SFT run of `{rel.get('command', '?')}` (policy base: `{base}`) and the TS encoder "
            f"of `{rel.get('ts_release') or 'the same release'}` (`{cfg}`): small models on CPU budgets, not the "
            f"paper's scale.")


def write_report(run_dir: str | Path, stages: Sequence[Stage]) -> Path:
    run_dir = Path(run_dir)
    man = _json(run_dir / "manifest.json") or {}
    data = _json(run_dir / "data" / "manifest.json") or {}
    summ = data.get("summary", {})
    lines = [
        f"# stockr1 demo report — seed {man.get('seed', '?')}", "",
        f"Generated {time.strftime('%Y-%m-%d %H:%M')} by `stockr1 demo`; git commit `{man.get('git_commit', '?')}`; "
        f"data hash `{data.get('content_hash', '?')[:16]}`; [manifest.json](manifest.json).", "",
        models_line(run_dir, man), "",
        *learned(run_dir),
        "## Stages", "", _table(timing_rows(run_dir, stages), ["stage", "what", "status", "wall s", "CPU s"]),
        "## Data", "",
        f"{summ.get('source', '?')}: {summ.get('n_tickers', '?')} tickers, {summ.get('days', '?')} days "
        f"({summ.get('first_day', '?')} → {summ.get('last_day', '?')}), windows per split {summ.get('windows', '?')}, "
        f"repairs {summ.get('repairs') or 'none'} ([manifest](data/manifest.json)).", "",
    ]
    lines += _bench_section(run_dir, "bench_forecast", "Forecasting (TS encoder vs baselines, Table 2 layout)")
    lines += _bench_section(run_dir, "bench_action", "Forecast action: oracle gain and controllability")
    qa = qa_rows(run_dir)
    lines += ["## QA (held-out questions, Table 1 layout)", ""]
    if qa:
        cols = ["model"] + [c for c in ("forecast", "event", "fundamental", "news", "multi_signal", "overall",
                                        "action_success_rate", "answer_parse_rate") if any(c in r for r in qa)]
        lines += [_table(qa, cols), "Files: [README](bench_qa/README.md) (intervals), [metrics.json](bench_qa/metrics.json), "
                  "[intervals.json](bench_qa/intervals.json), [samples.json](bench_qa/samples.json)", ""]
    else:
        lines += ["_not run (`stockr1 demo --only bench_qa`)_", ""]
    lines += _training_section(run_dir)
    lines += _bench_section(run_dir, "bench_backtest", "Backtest (z-score signals, Table 6 layout)")
    path = run_dir / "report.md"
    path.write_text("\n".join(lines))
    return path


def export_report(run_dir: str | Path, dest: str | Path, max_bytes: int = 1_000_000) -> list[Path]:
    """Copy ``report.md`` and the files it links (plots, metrics, summaries; each under ``max_bytes``)
    to ``dest`` with the same relative paths, so the copy renders as the original (results/demo/).
    ``dest`` is replaced as a whole (``stockr1.outdir.output_dir``): no file of an earlier run stays."""
    run_dir, dest = Path(run_dir), Path(dest)
    text = (run_dir / "report.md").read_text()
    rels = ["report.md", "manifest.json"] + re.findall(r"\]\(([^)#\s]+)\)", text)
    copied = []
    with output_dir(dest, overwrite=True) as tmp:
        for rel in dict.fromkeys(rels):
            src = run_dir / rel
            if src.is_file() and src.stat().st_size <= max_bytes:
                (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(src, tmp / rel)
                copied.append(dest / rel)
    return copied
