"""forecast_action.train resumes an interrupted run from OUT/last.ckpt and ends where an uninterrupted run ends."""

from __future__ import annotations

import dataclasses

import lightning as L
import pandas as pd
import pytest
import torch

from forecast_action.train import ActionTrainConfig, train
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
    resumed = train(RESUME_CFG, tmp_path / "cut")  # the same command again

    a, b = ckpt(tmp_path / "full" / "last.ckpt"), ckpt(tmp_path / "cut" / "last.ckpt")
    assert a["global_step"] == b["global_step"] == 9 and a["epoch"] == b["epoch"] == 2
    for k, v in a["state_dict"].items():
        torch.testing.assert_close(b["state_dict"][k], v, rtol=1e-5, atol=1e-6, msg=k)
    moved = [k for k, v in a["state_dict"].items() if v.is_floating_point() and
             not torch.equal(v, saved["state_dict"][k])]
    assert moved  # the resumed epoch trained (the equality above is not the saved state twice)
    for k, v in full.state_dict().items():  # the returned best-on-val modules agree too
        torch.testing.assert_close(resumed.state_dict()[k], v, rtol=1e-5, atol=1e-6, msg=k)

    # each run segment logs to its own version; together they validate every epoch once, as the full run
    logs = sorted((tmp_path / "cut" / "logs").glob("version_*"))
    assert [d.name for d in logs] == ["version_0", "version_1"]
    val = pd.concat([pd.read_csv(d / "metrics.csv") for d in logs]).dropna(subset=["val/loss"])
    assert list(val["epoch"].astype(int)) == [0, 1, 2]
    ref = pd.read_csv(tmp_path / "full" / "logs" / "version_0" / "metrics.csv").dropna(subset=["val/loss"])
    assert val["val/loss"].to_numpy() == pytest.approx(ref["val/loss"].to_numpy(), rel=1e-5)


def test_rerunning_a_finished_run_trains_no_further(tmp_path) -> None:
    cfg = dataclasses.replace(RESUME_CFG, train=dataclasses.replace(RESUME_CFG.train, max_epochs=1))
    train(cfg, tmp_path)
    before = ckpt(tmp_path / "last.ckpt")
    again = train(cfg, tmp_path)
    after = ckpt(tmp_path / "last.ckpt")
    assert after["global_step"] == before["global_step"] == 3
    for k, v in before["state_dict"].items():
        assert torch.equal(after["state_dict"][k], v), k
        assert torch.equal(again.state_dict()[k], v), k  # 1 epoch: last is the best
    (tmp_path / "last.ckpt").write_bytes(b"torn")
    with pytest.raises(ValueError, match="last.ckpt"):
        train(cfg, tmp_path)
