"""Train the action-conditioned decoder from a YAML config.

    python -m forecast_action.train --config configs/forecast_action/tiny.yaml --out checkpoints/action_tiny

Writes ``OUT/decoder.ckpt`` (``ActionDecoderModule.load_from_checkpoint`` needs no arguments), the
train-fitted g thresholds beside it (``OUT/action_thresholds.json``) and a CSV log under ``OUT/logs``.
Model selection uses the validation split (lowest conditioned ``val/loss``), never test.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
import yaml

from forecast_action.derive import ActionThresholds
from forecast_action.module import THRESHOLDS_FILE, ActionDecoderModule
from stockr1.types import Windows
from ts_encoder.datamodule import WindowDataModule, load_split_windows


@dataclass(frozen=True)
class ActionTrainConfig:
    """data: source/path/lookback/horizon/max_train; model: TSEncoderConfig fields; action:
    ActionEncoderConfig fields; train: module and trainer settings; init_encoder: TS checkpoint."""

    data: dict[str, Any] = field(default_factory=dict)
    model: dict[str, Any] = field(default_factory=dict)
    action: dict[str, Any] = field(default_factory=dict)
    train: dict[str, Any] = field(default_factory=dict)
    init_encoder: str | None = None

    @classmethod
    def from_yaml(cls, path: str | Path) -> ActionTrainConfig:
        raw = yaml.safe_load(Path(path).read_text()) or {}
        unknown = set(raw) - {"data", "model", "action", "train", "init_encoder"}
        if unknown:
            raise ValueError(f"{path}: unknown config sections {sorted(unknown)}")
        return cls(**raw)


def load_windows(data: dict[str, Any]) -> Windows:
    return load_split_windows(data.get("source", "sample"), data.get("path"), data.get("lookback", 90),
                              data.get("horizon", 10))


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


def train(cfg: ActionTrainConfig, out: str | Path, max_epochs: int | None = None) -> ActionDecoderModule:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t = dict(cfg.train)
    seed = t.pop("seed", 0)
    batch_size = t.pop("batch_size", 128)
    epochs = max_epochs or t.pop("max_epochs", 10)
    t.pop("max_epochs", None)
    L.seed_everything(seed, workers=True)
    full = load_windows(cfg.data)
    thresholds = ActionThresholds.fit(full).to_dict()  # the whole train split, before subsampling
    windows = subsample(full, cfg.data.get("max_train"), cfg.data.get("max_val"), seed)
    dm = WindowDataModule.from_windows(windows, batch_size=batch_size, seed=seed)
    module = ActionDecoderModule(encoder=cfg.model, action=cfg.action, init_encoder=cfg.init_encoder,
                                 thresholds=thresholds, **t)
    ckpt = L.pytorch.callbacks.ModelCheckpoint(dirpath=out, filename="decoder", monitor="val/loss", mode="min",
                                               save_top_k=1, enable_version_counter=False)
    trainer = L.Trainer(max_epochs=epochs, accelerator="auto", devices=1, callbacks=[ckpt],
                        logger=L.pytorch.loggers.CSVLogger(out, name="logs"), enable_progress_bar=False,
                        gradient_clip_val=1.0, log_every_n_steps=10, enable_model_summary=False)
    trainer.fit(module, datamodule=dm)
    best = ActionDecoderModule.load_from_checkpoint(ckpt.best_model_path, map_location="cpu")
    best.thresholds.save(out / THRESHOLDS_FILE)
    return best


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m forecast_action.train", description=__doc__.splitlines()[0])
    p.add_argument("--config", default="configs/forecast_action/tiny.yaml")
    p.add_argument("--out", default="checkpoints/action_tiny")
    p.add_argument("--max-epochs", type=int, default=None)
    p.add_argument("--threads", type=int, default=int(os.environ.get("STOCKR1_THREADS", "2")))
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    train(ActionTrainConfig.from_yaml(a.config), a.out, a.max_epochs)
    print(f"wrote {Path(a.out) / 'decoder.ckpt'} and {Path(a.out) / THRESHOLDS_FILE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
