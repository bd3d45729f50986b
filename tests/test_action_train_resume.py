"""``stockr1 decoder --resume`` continues an interrupted run from OUT/last.ckpt and ends bit-identical to an
uninterrupted run: weights, AdamW state, LR schedule, loop counters, the best-on-val module (CPU)."""

from __future__ import annotations

import dataclasses

import lightning as L
import pandas as pd
import pytest
import torch

from forecast_action.train import ActionTrainConfig, train
from tests.resume_check import assert_identical
from tests.test_action_train import RAW

# 96 train windows / batch 32 = 3 steps per epoch; dropout 0.2 and action dropout draw from the global RNG
RESUME_CFG = ActionTrainConfig.from_dict({
    **RAW, "data": {**RAW["data"], "max_val": 24}, "model": {**RAW["model"], "dropout": 0.2},
    "train": {**RAW["train"], "max_epochs": 3, "val_samples": 4, "normalizer_fit_windows": 64, "warmup_steps": 2}})


class Crash(L.Callback):
    """Raise inside training before optimiser step ``at`` (a kill mid-epoch)."""

    def __init__(self, at: int) -> None:
        self.at = at

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if trainer.global_step == self.at:
            raise RuntimeError("simulated kill")


def ckpt(path):
    return torch.load(path, map_location="cpu", weights_only=False)


def test_interrupted_run_resumes_to_the_uninterrupted_result(tmp_path) -> None:
    full = train(RESUME_CFG, tmp_path / "full")
    with pytest.raises(RuntimeError, match="simulated kill"):
        train(RESUME_CFG, tmp_path / "cut", callbacks=[Crash(at=7)])  # in epoch 3, after epoch 2 was saved
    saved = ckpt(tmp_path / "cut" / "last.ckpt")
    assert saved["global_step"] == 6 and saved["epoch"] == 1
    with pytest.raises(FileExistsError, match="--resume.*--overwrite"):  # a plain rerun must say which it is
        train(RESUME_CFG, tmp_path / "cut")
    torch.manual_seed(123)  # whatever the process drew before, the resumed run draws what the full one drew
    resumed = train(RESUME_CFG, tmp_path / "cut", resume=True)

    a, b = ckpt(tmp_path / "full" / "last.ckpt"), ckpt(tmp_path / "cut" / "last.ckpt")
    assert a["global_step"] == b["global_step"] == 9 and a["epoch"] == b["epoch"] == 2
    keys = ("state_dict", "optimizer_states", "lr_schedulers", "loops", "epoch", "global_step")
    assert assert_identical({k: a[k] for k in keys}, {k: b[k] for k in keys}) > 10
    moved = [k for k, v in a["state_dict"].items() if v.is_floating_point() and
             not torch.equal(v, saved["state_dict"][k])]
    assert moved  # the resumed epoch trained (the equality above is not the saved state twice)
    assert_identical(full.state_dict(), resumed.state_dict())  # the returned best-on-val modules agree too

    # each run segment logs to its own version; together they validate every epoch once, as the full run
    logs = sorted((tmp_path / "cut" / "logs").glob("version_*"))
    assert [d.name for d in logs] == ["version_0", "version_1"]
    val = pd.concat([pd.read_csv(d / "metrics.csv") for d in logs]).dropna(subset=["val/loss"])
    assert list(val["epoch"].astype(int)) == [0, 1, 2]
    ref = pd.read_csv(tmp_path / "full" / "logs" / "version_0" / "metrics.csv").dropna(subset=["val/loss"])
    assert val["val/loss"].tolist() == ref["val/loss"].tolist()


def test_rerunning_a_finished_run_trains_no_further(tmp_path) -> None:
    cfg = dataclasses.replace(RESUME_CFG, train=dataclasses.replace(RESUME_CFG.train, max_epochs=1))
    train(cfg, tmp_path)
    before = ckpt(tmp_path / "last.ckpt")
    again = train(cfg, tmp_path, resume=True)
    after = ckpt(tmp_path / "last.ckpt")
    assert after["global_step"] == before["global_step"] == 3
    for k, v in before["state_dict"].items():
        assert torch.equal(after["state_dict"][k], v), k
        assert torch.equal(again.state_dict()[k], v), k  # 1 epoch: last is the best
    (tmp_path / "last.ckpt").write_bytes(b"torn")
    with pytest.raises(ValueError, match="last.ckpt"):
        train(cfg, tmp_path, resume=True)
