"""Benchmark figures (matplotlib, Agg backend): fan charts, the close-interval reliability curve and
PIT histograms."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from stockr1.metrics.forecast import interval_coverage, pit_values  # noqa: E402
from stockr1.types import CLOSE, Forecast, Windows  # noqa: E402


def fan_charts(
    forecasts: dict[str, Forecast], windows: Windows, path: str | Path, n_windows: int = 3, history: int = 30
) -> Path:
    """Grid (forecaster × window): last ``history`` closes, the true future, median and 50%/90% bands."""
    names = list(forecasts)
    idx = np.linspace(0, len(windows) - 1, n_windows).round().astype(int)
    fig, axes = plt.subplots(len(names), n_windows, figsize=(4 * n_windows, 2.4 * len(names)), squeeze=False)
    s = windows.future.shape[1]
    t_hist, t_fut = np.arange(-history + 1, 1), np.arange(1, s + 1)
    for r, name in enumerate(names):
        f = forecasts[name]
        for c, i in enumerate(idx):
            ax = axes[r, c]
            ax.plot(t_hist, windows.hist[i, -history:, CLOSE], color="black", lw=1)
            ax.plot(t_fut, windows.future[i, :, CLOSE], color="black", lw=1, ls="--", label="actual")
            q = np.quantile(f.close_samples[i], [0.05, 0.25, 0.5, 0.75, 0.95], axis=0)
            ax.fill_between(t_fut, q[0], q[4], color="tab:blue", alpha=0.2, label="90%")
            ax.fill_between(t_fut, q[1], q[3], color="tab:blue", alpha=0.35, label="50%")
            ax.plot(t_fut, q[2], color="tab:blue", lw=1, label="median")
            ax.plot(t_fut, f.high[i], color="tab:green", lw=0.8, ls=":", label="High q.95")
            ax.plot(t_fut, f.low[i], color="tab:red", lw=0.8, ls=":", label="Low q.05")
            ax.tick_params(labelsize=7)
            if r == 0:
                ax.set_title(f"{windows.ticker[i]} {str(windows.date[i])[:10]}", fontsize=8)
            if c == 0:
                ax.set_ylabel(name, fontsize=8)
    axes[0, 0].legend(fontsize=6, loc="upper left")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def calibration_curve(forecasts: dict[str, Forecast], windows: Windows, path: str | Path) -> Path:
    """Empirical vs nominal coverage of central close intervals (diagonal = calibrated)."""
    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    ax.plot([0, 1], [0, 1], color="grey", lw=0.8, ls="--")
    for name, f in forecasts.items():
        levels, cov = interval_coverage(f, windows, np.linspace(0.1, 0.95, 18))
        ax.plot(levels, cov, marker=".", lw=1, label=name)
    ax.set_xlabel("nominal central-interval level")
    ax.set_ylabel("empirical coverage of the true close")
    ax.set_title("Close-interval reliability (all horizons)", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def pit_histograms(forecasts: dict[str, Forecast], windows: Windows, path: str | Path, bins: int = 10) -> Path:
    """One panel per forecaster: histogram (density) of the PIT of the true close over all windows and
    horizons. Flat at 1 = calibrated; U = too narrow; hump = too wide; slope = biased."""
    names = list(forecasts)
    cols = min(4, len(names))
    rows = -(-len(names) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3 * cols, 2.4 * rows), squeeze=False, sharey=True)
    for ax, name in zip(axes.ravel(), names, strict=False):  # the grid may have spare panels
        ax.hist(pit_values(forecasts[name], windows).ravel(), bins=bins, range=(0, 1), density=True,
                color="tab:blue", alpha=0.7)
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_title(name, fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in axes.ravel()[len(names):]:
        ax.axis("off")
    fig.suptitle("PIT of the true close (all horizons)", fontsize=9)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
