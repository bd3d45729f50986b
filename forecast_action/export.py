"""``ExportPretrained``: at the end of ``stockr1 ts fit``, the validation-best checkpoint as a
``Forecaster.save_pretrained`` directory (safetensors + JSON). Lightning checkpoints stay for resuming;
the directory is what ``stockr1 forecast``, ``Forecaster.from_pretrained`` and a fresh process load.

Listed in the ts configs' ``trainer.callbacks`` (configs/ts_encoder/*.yaml); it lives here, not in
``ts_encoder``, because the saved form is the forecaster's (ts_encoder sits a floor below).
"""

from __future__ import annotations

from pathlib import Path

from lightning.pytorch.callbacks import Callback, ModelCheckpoint

from forecast_action.forecaster import Forecaster


class ExportPretrained(Callback):
    """dirpath: where the directory goes (default: ``<best checkpoint's folder>/pretrained``)."""

    def __init__(self, dirpath: str | None = None) -> None:
        self.dirpath = dirpath

    def on_fit_end(self, trainer, pl_module) -> None:
        if not trainer.is_global_zero:
            return
        best = next((cb.best_model_path for cb in trainer.callbacks
                     if isinstance(cb, ModelCheckpoint) and cb.monitor and cb.best_model_path), "")
        if not best:
            raise ValueError("ExportPretrained needs a ModelCheckpoint with a monitor (the validation-best "
                             "checkpoint); none has saved one")
        out = Path(self.dirpath) if self.dirpath else Path(best).parent / "pretrained"
        Forecaster.from_checkpoint(best).save_pretrained(out)
        print(f"wrote {out} (Forecaster.save_pretrained of {best})")
