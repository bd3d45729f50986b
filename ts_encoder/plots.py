"""Fan charts of validation forecasts, logged to W&B each epoch (or saved as PNG without W&B)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from stockr1.types import CLOSE, Forecast, Windows


def fan_chart_figure(forecast: Forecast, windows: Windows, n: int = 4, history: int = 30):
    """A row of ``n`` panels (evenly spaced windows): last ``history`` closes, the realised future,
    the mean path, the 5-95% and 25-75% bands of the sampled closes, and the high/low quantiles."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = min(n, len(windows))
    picks = np.unique(np.linspace(0, len(windows) - 1, n).round().astype(int))
    fig, axes = plt.subplots(1, len(picks), figsize=(4 * len(picks), 3), squeeze=False)
    for ax, i in zip(axes[0], picks, strict=True):
        hist = windows.hist[i, -history:, CLOSE]
        s = forecast.close.shape[1]
        th, tf = np.arange(-len(hist) + 1, 1), np.arange(1, s + 1)
        q = np.quantile(forecast.close_samples[i], [0.05, 0.25, 0.75, 0.95], axis=0)
        ax.plot(th, hist, color="black", lw=1)
        ax.plot(tf, windows.future[i, :, CLOSE], color="black", lw=1, ls="--", label="realised")
        ax.fill_between(tf, q[0], q[3], color="tab:blue", alpha=0.2, label="5-95%")
        ax.fill_between(tf, q[1], q[2], color="tab:blue", alpha=0.3)
        ax.plot(tf, forecast.close[i], color="tab:blue", lw=1.5, label="mean path")
        ax.plot(tf, forecast.high[i], color="tab:green", lw=0.8, ls=":", label="q95 high")
        ax.plot(tf, forecast.low[i], color="tab:red", lw=0.8, ls=":", label="q05 low")
        unc = "" if forecast.uncertainty is None else f"  U={forecast.uncertainty[i]:.2f}"
        ax.set_title(f"{windows.ticker[i]} {str(windows.date[i])[:10]}{unc}", fontsize=9)
    axes[0][0].legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig


def log_fan_chart(trainer, forecast: Forecast, windows: Windows, n: int, epoch: int) -> None:
    """Log to every WandbLogger of the trainer; without one, save under the trainer's log dir."""
    from lightning.pytorch.loggers import WandbLogger

    if trainer.global_rank != 0:
        return
    import matplotlib.pyplot as plt

    fig = fan_chart_figure(forecast, windows, n)
    wandb_loggers = [lg for lg in trainer.loggers if isinstance(lg, WandbLogger)]
    for lg in wandb_loggers:
        import wandb

        lg.experiment.log({"val/fan_chart": wandb.Image(fig), "epoch": epoch})
    if not wandb_loggers and trainer.log_dir:
        out = Path(trainer.log_dir) / "fan_charts"
        out.mkdir(parents=True, exist_ok=True)
        fig.savefig(out / f"epoch{epoch:03d}.png", dpi=80)
    plt.close(fig)
