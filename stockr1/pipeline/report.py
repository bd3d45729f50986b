"""``<run>/report.md``: one page with every stage's timing, tables and plots, linking its result files.

It only reads what the stages wrote (``metrics.json``, ``table.md``, PNGs, summaries), with
run-relative links, so the run directory (or a copy of its small files) is self-contained.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

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


def qa_rows(run_dir: Path) -> list[dict[str, Any]]:
    """Baselines and the SFT row from ``bench_qa/sft``, the u-GRPO row from ``bench_qa/grpo``."""
    rows = []
    for arm, label in (("sft", "SFT"), ("grpo", "u-GRPO")):
        m = _json(run_dir / "bench_qa" / arm / "metrics.json") or {}
        for name, vals in m.items():
            if name == QA_MODEL:
                rows.append({"model": f"Stock-R1 {label}", **vals})
            elif arm == "sft":
                rows.append({"model": name, **vals})
    return rows


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


def write_report(run_dir: str | Path, stages: Sequence[Stage]) -> Path:
    run_dir = Path(run_dir)
    man = _json(run_dir / "manifest.json") or {}
    data = _json(run_dir / "data" / "manifest.json") or {}
    summ = data.get("summary", {})
    lines = [
        f"# stockr1 demo report — seed {man.get('seed', '?')}", "",
        f"Generated {time.strftime('%Y-%m-%d %H:%M')} by `stockr1 demo`; git commit `{man.get('git_commit', '?')}`; "
        f"data hash `{data.get('content_hash', '?')[:16]}`; [manifest.json](manifest.json).", "",
        "Tiny models on 2 CPU cores with demo budgets (configs/demo.yaml): the numbers show the pipeline "
        "works end to end, not the paper's results.", "",
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
        lines += [_table(qa, cols), "Files: [SFT](bench_qa/sft/metrics.json), [u-GRPO](bench_qa/grpo/metrics.json), "
                  "samples: [SFT](bench_qa/sft/samples.json), [u-GRPO](bench_qa/grpo/samples.json)", ""]
    else:
        lines += ["_not run (`stockr1 demo --only bench_qa`)_", ""]
    lines += _training_section(run_dir)
    lines += _bench_section(run_dir, "bench_backtest", "Backtest (z-score signals, Table 6 layout)")
    path = run_dir / "report.md"
    path.write_text("\n".join(lines))
    return path


def export_report(run_dir: str | Path, dest: str | Path, max_bytes: int = 1_000_000) -> list[Path]:
    """Copy ``report.md`` and the files it links (plots, metrics, summaries; each under ``max_bytes``)
    to ``dest`` with the same relative paths, so the copy renders as the original (results/demo/)."""
    import shutil

    run_dir, dest = Path(run_dir), Path(dest)
    text = (run_dir / "report.md").read_text()
    rels = ["report.md", "manifest.json"] + re.findall(r"\]\(([^)#\s]+)\)", text)
    copied = []
    for rel in dict.fromkeys(rels):
        src = run_dir / rel
        if src.is_file() and src.stat().st_size <= max_bytes:
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, dest / rel)
            copied.append(dest / rel)
    return copied
