"""``StepProgress``: one plain progress line every N optimizer steps for Lightning loops
(``step 50/430 (11.6%) 0.12 s/step, ETA 50s, train/loss 0.312``, stockr1.progress's format).

Why not Lightning's progress bar: a redrawn bar turns into thousands of lines in a log file or under
``nohup``; one line per N steps reads the same in a terminal and in a log.
"""

from __future__ import annotations

import math
import time
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Callback

from stockr1.progress import progress


class StepProgress(Callback):
    """Prints a line every ``every_n_steps`` steps and at the last one (rank 0 only); the rate counts only
    the steps this process ran, so a resumed run's ETA is not skewed by its earlier steps."""

    def __init__(self, every_n_steps: int = 50, metric: str = "train/loss") -> None:
        if every_n_steps < 1:
            raise ValueError(f"StepProgress.every_n_steps must be >= 1, got {every_n_steps}")
        self.every_n_steps, self.metric = every_n_steps, metric
        self._t0, self._step0, self._last = 0.0, 0, -1

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._t0, self._step0, self._last = time.monotonic(), trainer.global_step, trainer.global_step

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        step, total = trainer.global_step, trainer.estimated_stepping_batches
        total = int(total) if math.isfinite(total) else step
        if step == self._last or (step % self.every_n_steps and step < total) or not trainer.is_global_zero:
            return
        self._last = step
        line = progress(step, total, time.monotonic() - self._t0, step - self._step0)
        value = trainer.callback_metrics.get(self.metric)
        print(line + (f", {self.metric} {float(value):.4g}" if value is not None else ""), flush=True)
