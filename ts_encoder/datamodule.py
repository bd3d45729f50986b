"""``WindowDataModule``: point-in-time windows from ``stockr1.data`` as train / val / test loaders.

source:
  sample     the embedded offline S&P 500 + NASDAQ sample (``stockr1.data.sample_windows``)
  synthetic  seeded synthetic tickers (``stockr1.data.synthetic_windows``), for tests
  csv        any OHLCV csv (``path``), checked like ``stockr1 data build``, then ``build_windows``
  dataset    a directory written by ``stockr1 data build`` (its window shape must be this one)
(all through ``stockr1.data.source_windows``). ``tickers`` keeps only those tickers' windows (every
split), e.g. train on one index and score the other with ``stockr1 bench forecast --cross-series``.
Batches are dicts ``{"x": [B, 5, L], "y": [B, 5, S], "channels": [B, 5] bool, "idx": [B]}``; ``idx``
indexes the split's ``Windows`` so metrics can be computed in price space; ``channels`` is
``Windows.channels`` (an absent channel is NaN in x and y; the encoder and the loss mask it).
"""

from __future__ import annotations

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from stockr1.data.returns import observed_moments
from stockr1.data.run_data import WINDOW_SOURCES as SOURCES
from stockr1.data.run_data import source_windows
from stockr1.types import SPLITS, TrainWindows, Windows, require_train, train_only
from ts_encoder.resume import ResumableLoader, run_seed


def input_stats(train: TrainWindows) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel mean and std [5] (float64, cast to float32) of ``train_only(windows).x``; TypeError
    for anything else, so the TS encoder's input scaling never sees a val/test row. Each channel's
    over the windows that observe it (``observed_moments``)."""
    train = require_train(train, "input_stats")
    x = train.x.astype(np.float64)
    if not train.channels.all():
        mean, std = observed_moments(x, train.channels)
        return torch.tensor(mean, dtype=torch.float32), torch.tensor(std + 1e-8, dtype=torch.float32)
    return torch.tensor(x.mean(axis=(0, 2)), dtype=torch.float32), \
        torch.tensor(x.std(axis=(0, 2)) + 1e-8, dtype=torch.float32)


class WindowDataset(Dataset):
    def __init__(self, windows: Windows) -> None:
        self.x = torch.from_numpy(np.ascontiguousarray(windows.x, dtype=np.float32))
        self.y = torch.from_numpy(np.ascontiguousarray(windows.y, dtype=np.float32))
        self.channels = torch.from_numpy(np.ascontiguousarray(windows.channels))

    def __len__(self) -> int:
        return self.x.shape[0]

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"x": self.x[i], "y": self.y[i], "channels": self.channels[i], "idx": torch.tensor(i)}


class WindowDataModule(L.LightningDataModule):
    def __init__(
        self,
        source: str = "sample",
        path: str | None = None,
        lookback: int = 90,
        horizon: int = 10,
        batch_size: int = 256,
        eval_batch_size: int = 1024,
        num_workers: int = 0,
        n_tickers: int = 3,
        n_days: int = 400,
        seed: int = 0,
        predict_split: str = "test",
        tickers: list[str] | None = None,
    ) -> None:
        super().__init__()
        if source not in SOURCES:
            raise ValueError(f"unknown data source {source!r}; expected one of {SOURCES}")
        if predict_split not in SPLITS:
            raise ValueError(f"predict_split must be one of {SPLITS}, got {predict_split!r}")
        self.save_hyperparameters()
        self.windows: dict[str, Windows] = {}

    @classmethod
    def from_windows(cls, windows: Windows, **kw) -> WindowDataModule:
        """A datamodule over windows already in memory (tests, notebooks)."""
        dm = cls(lookback=windows.x.shape[2], horizon=windows.y.shape[2], **kw)
        dm._set(windows)
        return dm

    def _set(self, windows: Windows) -> None:
        hp = self.hparams
        if hp.tickers:
            windows = windows.of_tickers(list(hp.tickers), "data.tickers")
        if windows.x.shape[1:] != (5, hp.lookback) or windows.y.shape[1:] != (5, hp.horizon):
            raise ValueError(f"windows are x{windows.x.shape[1:]} y{windows.y.shape[1:]}, expected "
                             f"x(5, {hp.lookback}) y(5, {hp.horizon}) (lookback / horizon of the datamodule)")
        for name in ("x", "y"):  # an absent channel is NaN by design (Windows.channels); the others must be finite
            bad = ~(np.isfinite(getattr(windows, name)) | ~windows.channels[:, :, None]).all(axis=(1, 2))
            if bad.any():
                raise ValueError(f"{bad.sum()} windows have non-finite {name} (first: ticker "
                                 f"{windows.ticker[bad][0]} at {windows.date[bad][0]})")
        # train as a TrainWindows: what input_stats and the module's normaliser fit require
        self.windows = {s: train_only(windows) if s == "train" else windows.split_of(s) for s in SPLITS}
        if len(self.windows["train"]) == 0 or len(self.windows["val"]) == 0:
            raise ValueError(f"need train and val windows, got { {s: len(w) for s, w in self.windows.items()} }")

    def setup(self, stage: str | None = None) -> None:
        if not self.windows:
            hp = self.hparams
            self._set(source_windows(hp.source, hp.path, hp.lookback, hp.horizon,
                                     n_tickers=hp.n_tickers, n_days=hp.n_days, seed=hp.seed))

    def input_stats(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-channel mean and std [5] of the TRAINING inputs (the model standardises with them)."""
        self.setup()
        return input_stats(self.windows["train"])

    def _loader(self, split: str, train: bool) -> DataLoader:
        hp = self.hparams
        return DataLoader(WindowDataset(self.windows[split]), batch_size=hp.batch_size if train else hp.eval_batch_size,
                          shuffle=train, num_workers=hp.num_workers, persistent_workers=hp.num_workers > 0)

    def train_dataloader(self) -> DataLoader:
        """Shuffled by (run seed, epoch) and resumable mid-epoch (``ts_encoder.resume.ResumableLoader``): a fit
        resumed from any checkpoint trains on the batches the uninterrupted fit would have."""
        hp, trainer = self.hparams, self.trainer
        world, rank = (trainer.world_size, trainer.global_rank) if trainer is not None else (1, 0)
        return ResumableLoader(WindowDataset(self.windows["train"]), hp.batch_size, run_seed(hp.seed), world, rank,
                               num_workers=hp.num_workers, persistent_workers=hp.num_workers > 0)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", False)

    def predict_dataloader(self) -> DataLoader:
        return self._loader(self.hparams.predict_split, False)
