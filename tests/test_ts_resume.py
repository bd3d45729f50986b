"""``stockr1 ts fit`` killed and resumed with ``--resume`` ends bit-identical to the uninterrupted fit (CPU):
weights, AdamW state, LR schedule, loop counters; from an epoch-end checkpoint (the shipped callbacks) and
from a mid-epoch one (``every_n_train_steps``), where Lightning alone would restart the epoch's batches."""

from pathlib import Path

import lightning as L
import pytest
import torch
import yaml

from tests.resume_check import assert_identical
from tests.test_ts_last_ckpt import _config
from ts_encoder.cli import main

STEPS_PER_EPOCH, EPOCHS = 3, 4  # tests.test_ts_last_ckpt: limit_train_batches = 3


class Crash(L.Callback):
    """The kill: raise before training optimiser step ``at`` (checkpoints up to ``at`` - 1 are on disk)."""

    def __init__(self, at: int) -> None:
        self.at = at

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if trainer.global_step == self.at:
            raise RuntimeError("simulated kill")


def fit_config(tmp: Path, every_n_steps: int | None, crash_at: int | None = None) -> Path:
    """The shipped tiny callbacks (tests.test_ts_last_ckpt) with lr > 0 and dropout 0.2, so every step moves the
    weights and draws dropout masks; ``every_n_steps``: last.ckpt every N steps instead of every validation."""
    path = _config(tmp, EPOCHS)
    cfg = yaml.safe_load(path.read_text())
    cfg["model"].update(lr=3e-3, warmup_steps=2)
    cfg["model"]["encoder"]["dropout"] = 0.2
    for cb in cfg["trainer"]["callbacks"]:
        if cb.get("init_args", {}).get("filename") == "last" and every_n_steps:
            cb["init_args"]["every_n_train_steps"] = every_n_steps
    if crash_at is not None:
        cfg["trainer"]["callbacks"].append({"class_path": "tests.test_ts_resume.Crash", "init_args": {"at": crash_at}})
    path.write_text(yaml.safe_dump(cfg))
    return path


def state(path: Path) -> dict:
    ckpt = torch.load(path, map_location="cpu", weights_only=False)
    return {k: ckpt[k] for k in ("state_dict", "optimizer_states", "lr_schedulers", "epoch", "global_step", "loops")}


@pytest.mark.parametrize("every_n_steps, crash_at, resumed_at", [(None, 8, 6), (2, 5, 4)],
                         ids=["epoch_end_checkpoint", "mid_epoch_checkpoint"])
def test_a_killed_fit_resumes_to_the_uninterrupted_weights(tmp_path: Path, every_n_steps, crash_at, resumed_at) -> None:
    full, cut = tmp_path / "full", tmp_path / "cut"
    full.mkdir(), cut.mkdir()
    assert main(["fit", "--config", str(fit_config(full, every_n_steps))]) == 0
    with pytest.raises(RuntimeError, match="simulated kill"):
        main(["fit", "--config", str(fit_config(cut, every_n_steps, crash_at))])
    saved = torch.load(cut / "ckpt" / "last.ckpt", map_location="cpu", weights_only=False)
    assert saved["global_step"] == resumed_at
    with pytest.raises(ValueError, match="--resume.*--overwrite"):  # a rerun must say which it is
        main(["fit", "--config", str(fit_config(cut, every_n_steps))])
    torch.manual_seed(123)  # whatever the process drew before, the resumed fit draws what the full one drew
    assert main(["fit", "--config", str(fit_config(cut, every_n_steps)), "--resume"]) == 0

    a, b = state(full / "ckpt" / "last.ckpt"), state(cut / "ckpt" / "last.ckpt")
    assert a["global_step"] == STEPS_PER_EPOCH * EPOCHS
    assert assert_identical(a, b) > 10
    moved = [k for k, v in a["state_dict"].items() if v.is_floating_point()
             and not torch.equal(v, saved["state_dict"][k])]
    assert moved  # the resumed segment trained: the equality is not two copies of the saved state


def test_resume_with_nothing_to_resume_starts_fresh(tmp_path: Path) -> None:
    assert main(["fit", "--config", str(fit_config(tmp_path, None)), "--resume"]) == 0
    assert torch.load(tmp_path / "ckpt" / "last.ckpt", weights_only=False)["global_step"] == STEPS_PER_EPOCH * EPOCHS
