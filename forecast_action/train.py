"""Train the action-conditioned decoder from a YAML config.

    stockr1 decoder --config configs/forecast_action/tiny.yaml --out checkpoints/action_tiny

Writes ``OUT/decoder.ckpt`` (``ActionDecoderModule.load_from_checkpoint`` needs no arguments), the
train-fitted g thresholds beside it (``OUT/action_thresholds.json``) and a CSV log under ``OUT/logs``.
Model selection uses the validation split (lowest conditioned ``val/loss``), never test.

Resume: every validation also writes ``OUT/last.ckpt`` (weights, optimiser, schedule, loop counters,
best-checkpoint tracking and the global RNG states); rerunning the same command continues from it
and logs to the next ``OUT/logs/version_N`` (Lightning's CSV writer replaces an existing file, so each
run segment keeps its own; concatenate them by ``step``). The RNG states make the resumed run draw
the same shuffles and action dropout as an uninterrupted one, so it ends with the same weights
(tested on CPU).
"""

from __future__ import annotations

import argparse
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
import yaml

from forecast_action.derive import ActionThresholds
from forecast_action.module import THRESHOLDS_FILE, ActionDecoderModule
from stockr1.types import Windows, train_only
from ts_encoder.datamodule import WindowDataModule, load_split_windows
from ts_encoder.progress import StepProgress


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


class RNGState(L.Callback):
    """Stores the global torch / CUDA / numpy / python RNG states in each checkpoint and sets them back
    when training resumes from it: the next epoch's shuffle, action dropout and dropout masks are then
    those the uninterrupted run drew. (Lightning restores weights and loop counters, not RNG states.)"""

    def state_dict(self) -> dict[str, Any]:
        np_state = np.random.get_state()
        cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []
        return {"torch": torch.get_rng_state(), "cuda": cuda,
                "numpy": (np_state[0], torch.from_numpy(np_state[1].astype(np.int64)), *np_state[2:]),
                "python": random.getstate()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        torch.set_rng_state(state["torch"])
        if state["cuda"] and torch.cuda.is_available() and len(state["cuda"]) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(state["cuda"])
        kind, key, *rest = state["numpy"]
        np.random.set_state((kind, key.numpy().astype(np.uint32), *rest))
        random.setstate(state["python"])


def train(cfg: ActionTrainConfig, out: str | Path, max_epochs: int | None = None,
          callbacks: Sequence[L.Callback] = ()) -> ActionDecoderModule:
    """Train (or resume from ``out/last.ckpt``) and return the best module on val; ``callbacks``: extra
    Lightning callbacks."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t = dict(cfg.train)
    seed = t.pop("seed", 0)
    batch_size = t.pop("batch_size", 128)
    epochs = max_epochs or t.pop("max_epochs", 10)
    t.pop("max_epochs", None)
    L.seed_everything(seed, workers=True)
    full = load_windows(cfg.data)
    thresholds = ActionThresholds.fit(train_only(full)).to_dict()  # the whole train split, before subsampling
    windows = subsample(full, cfg.data.get("max_train"), cfg.data.get("max_val"), seed)
    dm = WindowDataModule.from_windows(windows, batch_size=batch_size, seed=seed)
    module = ActionDecoderModule(encoder=cfg.model, action=cfg.action, init_encoder=cfg.init_encoder,
                                 thresholds=thresholds, **t)
    ckpt = L.pytorch.callbacks.ModelCheckpoint(dirpath=out, filename="decoder", monitor="val/loss", mode="min",
                                               save_top_k=1, enable_version_counter=False)
    # its own callback: Lightning's save_last=True writes last.ckpt only when the best one improves
    latest = L.pytorch.callbacks.ModelCheckpoint(dirpath=out, filename="last", save_top_k=1,
                                                 enable_version_counter=False)
    last = out / "last.ckpt"
    resume_step = None
    if last.exists():
        try:  # mmap: reads the step without loading the weights
            resume_step = int(torch.load(last, map_location="cpu", weights_only=False, mmap=True)["global_step"])
        except Exception as e:
            raise ValueError(f"cannot resume from {last} (delete it to start over): {type(e).__name__}: {e}") from e
    if resume_step is not None:
        print(f"resuming from {last} (step {resume_step})", flush=True)
    trainer = L.Trainer(max_epochs=epochs, accelerator="auto", devices=1,
                        callbacks=[ckpt, latest, RNGState(), StepProgress(every_n_steps=50), *callbacks],
                        logger=L.pytorch.loggers.CSVLogger(out, name="logs"), enable_progress_bar=False,  # StepProgress: log-friendly
                        gradient_clip_val=1.0, log_every_n_steps=10, enable_model_summary=False)
    trainer.fit(module, datamodule=dm, ckpt_path=last if resume_step is not None else None)
    best = ActionDecoderModule.load_from_checkpoint(ckpt.best_model_path or out / "decoder.ckpt", map_location="cpu")
    best.thresholds.save(out / THRESHOLDS_FILE)
    return best


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="stockr1 decoder", description=__doc__.splitlines()[0])
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
