"""Ablation figures and report: policy-entropy curves with and without the uncertainty weight
(Stock-R1 Fig. 4 / Fig. 6 left) from the GRPO runs' logged ``metrics.jsonl``, and the README text."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from stockr1.outdir import generated_line  # noqa: E402

LABELS = {"grpo": "GRPO (w = 1)", "ugrpo": "u-GRPO (w(U))"}


def read_metric(path: Path, key: str) -> dict[int, float]:
    """step -> value of ``key`` in a ``metrics.jsonl``; a step logged twice (re-run after a resume)
    keeps its last record, as docs/rl.md says."""
    out: dict[int, float] = {}
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        rec = json.loads(line)
        if rec.get(key) is not None and rec.get("step") is not None:
            out[int(rec["step"])] = float(rec[key])
    return out


def entropy_curves(grpo_root: Path, variant: str, seeds: Sequence[int],
                   keys: Sequence[str] = ("policy/entropy", "reward/total")) -> dict[str, dict[int, dict[int, float]]]:
    """metric -> seed -> step -> value for the runs ``<grpo_root>/<variant>-s<seed>``."""
    return {k: {s: c for s in seeds if (c := read_metric(grpo_root / f"{variant}-s{s}" / "metrics.jsonl", k))}
            for k in keys}


def mean_band(by_seed: Mapping[int, Mapping[int, float]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(steps, mean, std) over seeds at the steps every seed logged."""
    common = sorted(set.intersection(*(set(c) for c in by_seed.values()))) if by_seed else []
    vals = np.array([[by_seed[s][t] for t in common] for s in by_seed], dtype=np.float64).reshape(len(by_seed), -1)
    std = vals.std(axis=0, ddof=1) if len(by_seed) > 1 else np.zeros(len(common))
    return np.array(common), vals.mean(axis=0), std


def plot_entropy(curves: Mapping[str, Mapping[str, Mapping[int, Mapping[int, float]]]], path: Path) -> Path:
    """Left: mean policy entropy (model tokens) ± std over seeds, thin lines per seed; right: total reward."""
    panels = [("policy/entropy", "policy entropy (nats / token)"), ("reward/total", "mean total reward")]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, (key, ylabel) in zip(axes, panels, strict=True):
        for i, (variant, metrics) in enumerate(curves.items()):
            by_seed = metrics.get(key, {})
            if not by_seed:
                continue
            color = f"C{i}"
            for c in by_seed.values():
                ax.plot(sorted(c), [c[t] for t in sorted(c)], color=color, lw=0.6, alpha=0.35)
            steps, mean, std = mean_band(by_seed)
            ax.plot(steps, mean, color=color, lw=2, label=f"{LABELS.get(variant, variant)} (n={len(by_seed)})")
            ax.fill_between(steps, mean - std, mean + std, color=color, alpha=0.15)
        ax.set_xlabel("GRPO step")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    axes[0].set_title("Fig. 4: entropy with / without uncertainty weighting", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


TRAINING_PANELS = (("reward/total", "mean total reward"), ("reward/r_ans", "mean R_ans"),
                   ("rollout/answer_parse_rate", "answer parse rate"), ("reward/group_std", "within-group std"),
                   ("reward/frac_zero_spread", "share of zero-spread groups"), ("policy/kl", "KL to SFT (k3)"),
                   ("policy/clip_region", "clipped token share"), ("policy/entropy", "entropy (nats / token)"))


def plot_training(grpo_root: Path, variants: Sequence[str], seeds: Sequence[int], path: Path) -> Path | None:
    """Per-step curves of every GRPO row (mean over seeds, band = std): rewards, parse rate, group
    spread, zero-spread share, KL, clip share, entropy (the runs' ``metrics.jsonl``)."""
    keys = [k for k, _ in TRAINING_PANELS]
    curves = {v: entropy_curves(grpo_root, v, seeds, keys) for v in variants}
    if not any(any(m.values()) for m in curves.values()):
        return None
    fig, axes = plt.subplots(2, 4, figsize=(16, 6.4))
    for ax, (key, label) in zip(axes.ravel(), TRAINING_PANELS, strict=True):
        for i, (variant, metrics) in enumerate(curves.items()):
            by_seed = metrics.get(key, {})
            if not by_seed:
                continue
            steps, mean, std = mean_band(by_seed)
            ax.plot(steps, mean, color=f"C{i}", lw=1.6, label=variant)
            ax.fill_between(steps, mean - std, mean + std, color=f"C{i}", alpha=0.12)
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("GRPO step", fontsize=8)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _ms(x: Mapping[str, float] | None, ci: bool = True) -> str:
    if not x:
        return "–"
    s = f"{x['mean']:.1f} ± {x['std']:.1f}"
    return s + (f" [{x['ci_low']:.1f}, {x['ci_high']:.1f}]" if ci and "ci_low" in x else "")


def _pm(x: Mapping[str, float] | None) -> str:
    return "–" if not x else f"{x['mean']:+.3f} ± {x['std']:.3f}"


def _diff(d: Mapping[str, float] | None, digits: int = 1) -> str:
    if not d:
        return "–"
    return f"{d['diff']:+.{digits}f} [{d['ci_low']:+.{digits}f}, {d['ci_high']:+.{digits}f}]"


def summary_table(summary: Mapping[str, Any], labels: Mapping[str, str]) -> str:
    lines = ["| Row | QA acc. | Action acc. | Answer parse rate | Probe: total reward | Probe: R_ans | Probe: answer parse |",
             "|---|---|---|---|---|---|---|"]
    for k, r in summary["rows"].items():
        lines.append(f"| {labels.get(k, k)} | {_ms(r['qa_acc'])} | {_ms(r['action_acc'])} | {_ms(r['answer_parse_rate'])} "
                     f"| {_pm(r.get('probe_reward_total'))} | {_pm(r.get('probe_r_ans'))} "
                     f"| {_ms(r.get('probe_answer_parse_rate'), ci=False)} |")
    return "\n".join(lines) + "\n"


def differences_table(summary: Mapping[str, Any]) -> str:
    lines = ["| Difference | QA acc. | Action acc. | Answer parse rate | Probe: total reward (paired by query) |",
             "|---|---|---|---|---|"]
    for k, d in summary["differences"].items():
        lines.append(f"| {k} | {_diff(d['qa_acc'])} | {_diff(d['action_acc'])} | {_diff(d['answer_parse_rate'])} "
                     f"| {_diff(d.get('probe_reward_total'), 3)} |")
    return "\n".join(lines) + "\n"


def variance_table(summary: Mapping[str, Any]) -> str:
    """Share of the within-group variance of the total reward carried by each weighted component
    (the probe's rollouts; `rl.probe.variance_shares`): what the group-relative advantages are made of."""
    rows = {k: r["probe_variance_share"] for k, r in summary["rows"].items() if r.get("probe_variance_share")}
    if not rows:
        return ""
    comps = sorted({c for s in rows.values() for c in s})
    lines = ["What the advantages are made of (share of the within-group variance of the probe's total reward):", "",
             "| Row | " + " | ".join(comps) + " |", "|---" * (len(comps) + 1) + "|"]
    lines += [f"| {k} | " + " | ".join(f"{s.get(c, float('nan')):.2f}" for c in comps) + " |" for k, s in rows.items()]
    return "\n".join(lines) + "\n"


def targets(summary: Mapping[str, Any]) -> list[str]:
    """The issue's targets, each as one generated line: 'holds' / 'does not hold' with the numbers."""
    rows, diffs, out = summary["rows"], summary["differences"], []
    if "sft" not in rows:
        return ["no SFT row: targets not checked"]
    sft_parse = rows["sft"]["answer_parse_rate"]["mean"]
    for k, r in rows.items():
        if k == "sft":
            continue
        p = r["answer_parse_rate"]["mean"]
        out.append(f"GRPO does not cost answer parsing ({k}: {p:.1f}% vs SFT {sft_parse:.1f}% − 2): "
                   f"**{'holds' if p >= sft_parse - 2 else 'does not hold'}**")
    if all(k in rows for k in ("sft", "grpo", "ugrpo")):
        a = {k: rows[k]["action_acc"]["mean"] for k in ("sft", "grpo", "ugrpo")}
        holds = a["ugrpo"] >= a["grpo"] >= a["sft"]
        d1, d2 = diffs.get("grpo-sft", {}).get("action_acc"), diffs.get("ugrpo-grpo", {}).get("action_acc")
        out.append(f"u-GRPO ≥ GRPO ≥ SFT on action accuracy ({a['ugrpo']:.1f} / {a['grpo']:.1f} / {a['sft']:.1f}): "
                   f"**{'holds' if holds else 'does not hold'}** (GRPO − SFT {_diff(d1)}, u-GRPO − GRPO {_diff(d2)}; "
                   "an interval that includes 0 is a tie)")
        q = {k: rows[k]["qa_acc"]["mean"] for k in ("sft", "grpo", "ugrpo")}
        out.append(f"QA accuracy SFT < GRPO < u-GRPO (the paper's ordering; {q['sft']:.1f} / {q['grpo']:.1f} / "
                   f"{q['ugrpo']:.1f}): **{'holds' if q['sft'] < q['grpo'] < q['ugrpo'] else 'does not hold'}** "
                   f"(GRPO − SFT {_diff(diffs.get('grpo-sft', {}).get('qa_acc'))}, "
                   f"u-GRPO − GRPO {_diff(diffs.get('ugrpo-grpo', {}).get('qa_acc'))})")
    s = rows["sft"].get("probe_reward_total")
    if s:
        for k, r in rows.items():
            p = r.get("probe_reward_total")
            if k == "sft" or not p:
                continue
            beyond = p["mean"] - s["mean"] > max(p["std"], s["std"])
            ra, rs = r["probe_r_ans"], rows["sft"]["probe_r_ans"]
            ans_beyond = ra["mean"] - rs["mean"] > max(ra["std"], rs["std"])
            out.append(f"the optimiser optimises ({k} on its training queries: total reward {p['mean']:+.3f} ± {p['std']:.3f} "
                       f"vs SFT {s['mean']:+.3f} ± {s['std']:.3f}; R_ans {ra['mean']:+.3f} vs {rs['mean']:+.3f}): total "
                       f"**{'above SFT beyond the seed spread' if beyond else 'not above SFT beyond the seed spread'}**, "
                       f"R_ans **{'above' if ans_beyond else 'not above'}** beyond the spread")
    return out


def readme(summary: Mapping[str, Any], info: Mapping[str, Any], labels: Mapping[str, str]) -> str:
    """results/ablation/README.md, generated from ``summary.json`` and ``run_info.json``."""
    cfg = info["config"]
    over = cfg["grpo"].get("overrides", {})
    budget = {**over.get("train", {}), **{f"rollout.{k}": v for k, v in over.get("rollout", {}).items()},
              "qa.max_train_queries": over.get("qa", {}).get("max_train_queries")}
    lines = "\n".join(f"- {t}" for t in targets(summary))
    figs = "\n".join(f"- `{f}`" for f in info.get("figures", []))
    command = info.get("command") or f"stockr1 bench ablation --config {info['config_path']} --out <this dir>"
    header = generated_line(command, info.get("commit") or "unknown", info.get("date")).removesuffix(".")
    return f"""# Ablation: SFT vs GRPO vs u-GRPO and reward components (Stock-R1 Table 3, Fig. 4)

{header} (docs/ablation.md says what each row means).
{summary['n_questions']} held-out {cfg['eval'].get('split', 'test')} questions ({info['eval_families']}), greedy, seeds
{summary['seeds']}; every GRPO row starts from the same SFT run ({cfg['sft'].get('run_dir')}) with the same budget and recipe:
`{json.dumps(budget, default=str)}` on top of `{cfg['grpo']['config']}`.
Stage wall times summed: {info['total_s'] / 60:.1f} min ({info.get('cores_note', 'see run_info.json')}).

Cells: mean ± std over seeds [95% bootstrap interval over the questions, seeds averaged per question].
"Probe": each policy re-sampled ({cfg['probe'].get('group_size')} rollouts per query, seeds 1000 + s) on the GRPO
training queries and scored with the full Stock-R1 reward (`rl.probe`); the SFT row's spread is the sampling seed's.

{summary_table(summary, labels)}
Paired differences (same questions / same training queries, {summary['n_boot']} bootstrap resamples; 95% interval):

{differences_table(summary)}
{variance_table(summary)}
## What holds

{lines}

Training curves (`training.png`: reward, R_ans, parse rate, group spread, zero-spread share, KL, clip share,
entropy per step, mean ± std over seeds) and Fig. 4's entropy curves (`entropy.png`):
{figs}
"""
