"""Train the action-conditioned decoder from a YAML config.

    stockr1 decoder --config configs/forecast_action/tiny.yaml --out checkpoints/action_tiny

Writes the decoder's saved form ``OUT/decoder/`` (``ActionConditionedDecoder.save_pretrained`` of the
validation-best weights: config.json + model.safetensors, with the fitted input statistics and
uncertainty normaliser and the train-fitted action thresholds g inside), what SFT / GRPO configs
(``decoder.checkpoint``), ``bench action`` and a later stage's ``init_encoder`` load. Model selection
uses the validation split (lowest ``val/objective``: L_TS with the full a* plus the weighted control
loss, ``forecast_action.module``), never test. A CSV log goes to ``OUT/logs``.

Resume only: Lightning's ``OUT/best.ckpt`` (the best so far) and ``OUT/last.ckpt`` (written at every
validation, atomically: weights, optimiser, schedule, loop counters, best-checkpoint tracking, the
training loader's position); ``--resume`` continues from ``last.ckpt`` and logs to the next
``OUT/logs/version_N`` (Lightning's CSV writer replaces an existing file, so each run segment keeps its
own; concatenate them by ``step``). Epoch e's shuffle is keyed on (seed, e) and every batch's field dropout
and dropout on (seed, epoch, rank, batch) (``ts_encoder.resume``), so the resumed run ends with the weights
of the uninterrupted one, bit for bit on CPU (``tests/test_action_train_resume.py``).
``stockr1 decoder --export CKPT --out OUT`` writes ``OUT/decoder/`` from such a checkpoint (an older
run's ``decoder.ckpt``) without training.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch

from forecast_action.decoder import ActionConditionedDecoder
from forecast_action.decoder_loss import DecoderRecipe
from forecast_action.derive import ActionThresholds
from forecast_action.encoder import ActionEncoderConfig
from forecast_action.module import ActionDecoderModule
from stockr1.config import config_from_dict, load_yaml
from stockr1.data.run_data import WINDOW_SOURCES, source_windows
from stockr1.resume import last_checkpoint, start_or_resume
from stockr1.types import Windows, train_only
from ts_encoder.config import LossWeights, TSEncoderConfig
from ts_encoder.datamodule import WindowDataModule
from ts_encoder.progress import StepProgress
from ts_encoder.resume import AtomicCheckpointIO, ExactResume

DECODER_DIR, BEST, LAST = "decoder", "best.ckpt", "last.ckpt"
SOURCES = WINDOW_SOURCES  # sample, synthetic, stocks, universe, csv, dataset


def _positive(section: str, **values: float | None) -> None:
    bad = [f"{section}.{k}={v}" for k, v in values.items() if v is not None and v <= 0]
    if bad:
        raise ValueError(f"must be positive: {', '.join(bad)}")


@dataclass(frozen=True)
class DecoderDataConfig:
    """Windows to train on (``stockr1.data.source_windows``); ``max_train``: random train
    subset, ``max_val``: evenly spaced val subset (None = all)."""

    source: str = "sample"
    path: str | None = None
    lookback: int = 90
    horizon: int = 10
    max_train: int | None = None
    max_val: int | None = None

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"data.source must be one of {SOURCES}, got {self.source!r}")
        if self.source in ("csv", "dataset") and not self.path:
            raise ValueError(f"data.source {self.source!r} needs data.path")
        _positive("data", lookback=self.lookback, horizon=self.horizon, max_train=self.max_train,
                  max_val=self.max_val)
        if self.horizon > self.lookback:
            raise ValueError(f"data.horizon={self.horizon} is longer than the window (data.lookback={self.lookback})")


@dataclass(frozen=True)
class DecoderTrainConfig:
    """``ActionDecoderModule`` hyper-parameters plus the loop's batch size, epochs and seed; ``recipe``:
    how the decoder loss is formed (``forecast_action.decoder_loss.DecoderRecipe``, the same section as
    the ``decoder.recipe`` of an SFT config)."""

    lr: float = 1e-3
    weight_decay: float = 0.01
    warmup_steps: int = 100
    min_lr_ratio: float = 0.0
    normalizer_fit_windows: int = 2048
    val_samples: int = 100
    fan_chart_windows: int = 0
    loss_weights: LossWeights | None = None
    recipe: DecoderRecipe = field(default_factory=DecoderRecipe)  # field dropout + control loss (decoder_loss.py)
    train_scope: str = "all"
    tool_samples: int = 16
    batch_size: int = 128
    max_epochs: int = 10
    seed: int = 0

    def __post_init__(self) -> None:
        _positive("train", lr=self.lr, normalizer_fit_windows=self.normalizer_fit_windows,
                  val_samples=self.val_samples, batch_size=self.batch_size, max_epochs=self.max_epochs)
        if self.warmup_steps < 0 or self.weight_decay < 0 or not 0 <= self.min_lr_ratio <= 1:
            raise ValueError(f"train: warmup_steps={self.warmup_steps} and weight_decay={self.weight_decay} must be "
                             f">= 0, min_lr_ratio={self.min_lr_ratio} in [0, 1]")
        if self.train_scope not in ("all", "action"):
            raise ValueError(f"train.train_scope must be 'all' or 'action', got {self.train_scope!r}")

    def module_kwargs(self) -> dict[str, Any]:
        kw = {k: v for k, v in asdict(self).items() if k not in ("batch_size", "max_epochs", "seed")}
        return kw | {"loss_weights": self.loss_weights}


@dataclass(frozen=True)
class ActionTrainConfig:
    """data: DecoderDataConfig; model: TSEncoderConfig (cond_dim is set from action.cond_dim); action:
    ActionEncoderConfig; train: DecoderTrainConfig; init_encoder: a saved TS encoder (``ts fit``'s
    ``pretrained/``) or decoder directory to start from (``module.load_encoder_state``), or null."""

    data: DecoderDataConfig = field(default_factory=DecoderDataConfig)
    model: TSEncoderConfig = field(default_factory=TSEncoderConfig)
    action: ActionEncoderConfig = field(default_factory=ActionEncoderConfig)
    train: DecoderTrainConfig = field(default_factory=DecoderTrainConfig)
    init_encoder: str | None = None

    def __post_init__(self) -> None:
        d, m = self.data, self.model
        if (d.lookback, d.horizon) != (m.lookback, m.horizon):
            raise ValueError(f"data.lookback/horizon {d.lookback}/{d.horizon} differ from model.lookback/horizon "
                             f"{m.lookback}/{m.horizon}")

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any] | None, where: str = "decoder config") -> ActionTrainConfig:
        """Unknown sections / keys are errors naming the key path (with the nearest valid key)."""
        return config_from_dict(cls, raw, where)

    @classmethod
    def from_yaml(cls, path: str | Path) -> ActionTrainConfig:
        return cls.from_dict(load_yaml(path), str(path))


def load_windows(data: DecoderDataConfig) -> Windows:
    return source_windows(data.source, data.path, data.lookback, data.horizon)


def subsample(windows: Windows, max_train: int | None, max_val: int | None, seed: int) -> Windows:
    """At most ``max_train`` train windows (random, seeded) and ``max_val`` val windows (evenly spaced);
    test untouched."""
    keep = []
    for split, cap in (("train", max_train), ("val", max_val), ("test", None)):
        idx = np.flatnonzero(windows.split == split)
        if cap is not None and len(idx) > cap:
            idx = (np.random.default_rng(seed).choice(idx, cap, replace=False) if split == "train"
                   else idx[np.linspace(0, len(idx) - 1, cap).round().astype(int)])
        keep.append(idx)
    return windows.select(np.sort(np.concatenate(keep)))


def export_decoder(module: ActionDecoderModule, out: str | Path) -> ActionConditionedDecoder:
    """``module``'s decoder with its thresholds, saved as ``out`` (``save_pretrained``); returns it."""
    dec = module.decoder.eval()
    dec.thresholds = module.thresholds
    dec.save_pretrained(out)
    return dec


def train(cfg: ActionTrainConfig, out: str | Path, max_epochs: int | None = None,
          callbacks: Sequence[L.Callback] = (), resume: bool = False, overwrite: bool = False) -> ActionDecoderModule:
    """Train, write ``out/decoder/`` from the best module on val and return that module; ``callbacks``: extra
    Lightning callbacks. ``resume``: continue from the last complete ``out/last.ckpt``; ``overwrite``: delete
    ``out`` first; with neither, an ``out`` holding a checkpoint is refused (``stockr1.resume.start_or_resume``)."""
    out = Path(out)
    last = start_or_resume(out, last_checkpoint(out / LAST), resume, overwrite, "stockr1 decoder")
    out.mkdir(parents=True, exist_ok=True)
    t = cfg.train
    L.seed_everything(t.seed, workers=True)
    full = load_windows(cfg.data)
    thresholds = ActionThresholds.fit(train_only(full)).to_dict()  # the whole train split, before subsampling
    windows = subsample(full, cfg.data.max_train, cfg.data.max_val, t.seed)
    dm = WindowDataModule.from_windows(windows, batch_size=t.batch_size, seed=t.seed)
    module = ActionDecoderModule(encoder=cfg.model, action=asdict(cfg.action), init_encoder=cfg.init_encoder,
                                 thresholds=thresholds, **t.module_kwargs())
    ckpt = L.pytorch.callbacks.ModelCheckpoint(dirpath=out, filename=Path(BEST).stem, monitor="val/objective", mode="min",
                                               save_top_k=1, enable_version_counter=False)
    # its own callback: Lightning's save_last=True writes last.ckpt only when the best one improves
    latest = L.pytorch.callbacks.ModelCheckpoint(dirpath=out, filename=Path(LAST).stem, save_top_k=1,
                                                 enable_version_counter=False)
    if last is not None:
        try:  # mmap: reads the step without loading the weights
            step = int(torch.load(last, map_location="cpu", weights_only=False, mmap=True)["global_step"])
        except Exception as e:
            raise ValueError(f"cannot resume from {last} (--overwrite starts over): {type(e).__name__}: {e}") from e
        print(f"resuming from {last} (step {step})", flush=True)
    trainer = L.Trainer(max_epochs=max_epochs or t.max_epochs, accelerator="auto", devices=1,
                        callbacks=[ckpt, latest, ExactResume(t.seed), StepProgress(every_n_steps=50), *callbacks],
                        plugins=[AtomicCheckpointIO()],  # ts_encoder.resume: exact resume, atomic checkpoints
                        logger=L.pytorch.loggers.CSVLogger(out, name="logs"), enable_progress_bar=False,  # StepProgress: log-friendly
                        gradient_clip_val=1.0, log_every_n_steps=10, enable_model_summary=False)
    trainer.fit(module, datamodule=dm, ckpt_path=last)
    best = ActionDecoderModule.load_from_checkpoint(ckpt.best_model_path or out / BEST, map_location="cpu")
    export_decoder(best, out / DECODER_DIR)
    return best


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="stockr1 decoder", description=__doc__.splitlines()[0])
    p.add_argument("--config", default="configs/forecast_action/tiny.yaml")
    p.add_argument("--out", default="checkpoints/action_tiny")
    p.add_argument("--max-epochs", type=int, default=None)
    p.add_argument("--resume", action="store_true", help="continue from OUT/last.ckpt (README, Resume)")
    p.add_argument("--overwrite", action="store_true", help="delete OUT and start over")
    p.add_argument("--threads", type=int, default=int(os.environ.get("STOCKR1_THREADS", "2")))
    p.add_argument("--export", default=None, metavar="CKPT",
                   help="no training: write OUT/decoder/ from this Lightning checkpoint (e.g. an older decoder.ckpt)")
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    if a.export:
        export_decoder(ActionDecoderModule.load_from_checkpoint(a.export, map_location="cpu"), Path(a.out) / DECODER_DIR)
    else:
        train(ActionTrainConfig.from_yaml(a.config), a.out, a.max_epochs, resume=a.resume, overwrite=a.overwrite)
    print(f"wrote {Path(a.out) / DECODER_DIR} (ActionConditionedDecoder.save_pretrained, thresholds inside)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
