"""Ablation figures: policy-entropy curves with and without the uncertainty weight (Stock-R1 Fig. 4 /
Fig. 6 left) and per-step training curves, from the GRPO runs' logged ``metrics.jsonl``. The README
text is ``benchmarks.ablation.report``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks.ablation.summary import read_metric  # noqa: E402

LABELS = {"grpo": "GRPO (w = 1)", "ugrpo": "u-GRPO (w(U))"}


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
