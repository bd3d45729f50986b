"""Exact resume of the Lightning stages (``stockr1 ts fit`` and ``stockr1 decoder``), mid-epoch included.

What a Lightning 2.6 checkpoint restores (``Trainer.fit(ckpt_path=...)``): the module's state dict
(weights and buffers: the input statistics, the uncertainty normaliser), the optimisers' states, the LR
schedulers' states, the loops' progress (epoch, global step, batch index inside the epoch, whether the
epoch's validation ran), the callbacks' states (ModelCheckpoint's best path and score), the precision
plugin's state (the AMP scaler), the hyper-parameters, and the state of a train dataloader that has
``state_dict`` / ``load_state_dict``. What it does not restore: the torch / CUDA / numpy / python RNG
states (Lightning 2.x saves none), so dropout, field dropout and ``shuffle=True`` draw other numbers after
a resume; the position of a plain ``DataLoader`` inside an epoch (a mid-epoch checkpoint restarts the
epoch's iterator from its first batch; Lightning warns that the loader "is not resumable"); the loggers'
state (CSVLogger starts a new ``version_N``).

What this module adds, so a resumed fit ends bit-identical to the uninterrupted one on CPU
(``tests/test_ts_resume.py``, ``tests/test_action_train_resume.py``):

- ``EpochSampler``: epoch e's order is a permutation keyed on (seed, e) (torch's ``DistributedSampler``: with
  several devices each rank takes its share of the same permutation, and Lightning leaves it in place);
- ``ResumableLoader``: the training loader over it; its state (epoch, batches handed out) goes into every
  checkpoint, and after a mid-epoch resume its next iteration skips the batches the run already trained on;
- ``ExactResume`` (a callback): seeds torch before every training batch with ``step_seed(seed, epoch, rank,
  batch)`` (``stockr1.resume``), so dropout and field dropout depend on where the batch is, not on what ran
  before (validation, a sanity check, a restart), and carries the loader's position through the checkpoint;
- ``AtomicCheckpointIO``: Lightning's checkpoint writer through ``stockr1.resume.write_checkpoint`` (staging
  file in the same directory, fsync, rename). Lightning's own writer moves a temporary file from the system
  temp directory, which is a copy, not an atomic rename, when that is another filesystem.

The seed is the run's: ``seed_everything``'s (``PL_GLOBAL_SEED``), else the datamodule's ``seed``. On GPU
the batches, their order, the dropout masks' seeds and the schedule are the same after a resume; the
weights agree as far as the kernels are deterministic (cuDNN / cuBLAS reductions may differ run to run,
resumed or not).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.plugins.io import TorchCheckpointIO
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from stockr1.resume import seed_step, write_checkpoint


def run_seed(default: int = 0) -> int:
    """The seed of this run: ``seed_everything``'s (Lightning keeps it in ``PL_GLOBAL_SEED``), else ``default``."""
    return int(os.environ.get("PL_GLOBAL_SEED", default))


class EpochSampler(DistributedSampler):
    """Epoch e's indices: this rank's share of the permutation keyed on (seed, e) (``set_epoch``, called by
    Lightning at the start of every epoch). ``skip`` indices are dropped from the next iteration only."""

    def __init__(self, dataset: Dataset, seed: int, num_replicas: int = 1, rank: int = 0) -> None:
        super().__init__(dataset, num_replicas=num_replicas, rank=rank, shuffle=True, seed=seed)
        self.skip = 0

    def __iter__(self) -> Iterator[int]:
        idx = list(super().__iter__())
        skip, self.skip = self.skip, 0
        return iter(idx[skip:])


class ResumableLoader(DataLoader):
    """A training DataLoader over ``EpochSampler`` with Lightning's resumable-loader interface: ``state_dict``
    is (epoch, batches handed out this epoch); after ``load_state_dict`` the next iteration of that epoch
    starts after those batches. Counted here, where batches leave the loader, not in the sampler, which
    workers read ahead of what was trained on."""

    def __init__(self, dataset: Dataset, batch_size: int, seed: int, num_replicas: int = 1, rank: int = 0,
                 **kwargs: Any) -> None:
        super().__init__(dataset, batch_size=batch_size, sampler=EpochSampler(dataset, seed, num_replicas, rank),
                         **kwargs)
        self._done = 0
        self._resume: tuple[int, int] | None = None

    def __iter__(self) -> Iterator[Any]:
        sampler: EpochSampler = self.sampler  # type: ignore[assignment]
        skip = self._resume[1] if self._resume is not None and self._resume[0] == sampler.epoch else 0
        self._resume, self._done = None, skip
        sampler.skip = skip * self.batch_size
        for batch in super().__iter__():
            self._done += 1
            yield batch

    def state_dict(self) -> dict[str, int]:
        return {"epoch": int(self.sampler.epoch), "batches": self._done}  # type: ignore[attr-defined]

    def load_state_dict(self, state: dict[str, int]) -> None:
        self._resume = (int(state["epoch"]), int(state["batches"]))


class ExactResume(L.Callback):
    """Seeds torch before each training batch from (seed, epoch, rank, batch index), so the batch's dropout
    and field-dropout draws are the same in a resumed fit as in the uninterrupted one; and carries the
    ``ResumableLoader``'s position through the checkpoint. Why the second: Lightning 2.6 saves a stateful
    loader's state, but loads it only when the loader is built after the restore, and a module whose
    ``configure_optimizers`` reads ``trainer.estimated_stepping_batches`` (the LR schedules here) builds it
    before, so the state would be dropped and a mid-epoch resume would retrain the epoch's first batches."""

    KEY = "train_loader_position"

    def __init__(self, seed: int | None = None) -> None:
        self.seed = seed
        self._position: dict[str, int] | None = None

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any,
                             batch_idx: int) -> None:
        seed = self.seed if self.seed is not None else run_seed()
        seed_step(seed, trainer.current_epoch, trainer.global_rank, batch_idx)

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]) -> None:
        loader = trainer.train_dataloader
        if isinstance(loader, ResumableLoader):
            checkpoint[self.KEY] = loader.state_dict()

    def on_load_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]) -> None:
        self._position = checkpoint.get(self.KEY)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        loader = trainer.train_dataloader  # built by now; its first batch is drawn after this hook
        if self._position is not None and isinstance(loader, ResumableLoader):
            loader.load_state_dict(self._position)
        self._position = None


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's checkpoint writer, local paths through ``stockr1.resume.write_checkpoint``."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Any | None = None) -> None:
        if "://" in str(path):  # remote storage: Lightning's own writer
            return super().save_checkpoint(checkpoint, path, storage_options)
        write_checkpoint(Path(path), lambda p: torch.save(checkpoint, p))
        return None
