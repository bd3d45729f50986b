"""stockr1.resume: per-step seeds depend on (seed, step, rank) only; a checkpoint is whole or absent (a
failed or killed write leaves the previous one, a staging file is never returned, a directory swap killed
half-way is recovered); the one --resume / --overwrite rule of every training command."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from stockr1.outdir import moved_aside
from stockr1.resume import (
    last_checkpoint,
    seed_step,
    staging,
    start_or_resume,
    step_rng,
    step_seed,
    write_checkpoint,
)


def test_step_draws_are_functions_of_seed_step_and_rank():
    assert step_seed(3, 7, 1) == step_seed(3, 7, 1)
    assert len({step_seed(3, 7, 0), step_seed(3, 7, 1), step_seed(3, 8, 0), step_seed(4, 7, 0), step_seed(3, 7, 0, 2)}) == 5
    assert step_rng(3, 7).integers(1000, size=5).tolist() == step_rng(3, 7).integers(1000, size=5).tolist()
    assert step_rng(3, 7).integers(1000, size=5).tolist() != step_rng(3, 8).integers(1000, size=5).tolist()
    torch.manual_seed(0)
    a = (seed_step(3, 7), torch.rand(4))
    torch.rand(100)  # whatever ran before, the step draws the same numbers
    b = (seed_step(3, 7), torch.rand(4))
    assert a[0] == b[0] and torch.equal(a[1], b[1])


def test_a_failed_write_keeps_the_previous_checkpoint(tmp_path):
    path = tmp_path / "run" / "last.ckpt"
    write_checkpoint(path, lambda p: torch.save({"step": 1}, p))
    assert torch.load(path)["step"] == 1 and not staging(path).exists()

    def dies_half_way(p):
        p.write_bytes(b"PK\x03\x04 half a zip")
        raise KeyboardInterrupt  # a kill between the data and the rename

    with pytest.raises(KeyboardInterrupt):
        write_checkpoint(path, dies_half_way)
    assert torch.load(last_checkpoint(path))["step"] == 1  # the torn staging file is never what is found
    assert staging(path).exists()
    write_checkpoint(path, lambda p: torch.save({"step": 2}, p))
    assert torch.load(last_checkpoint(path))["step"] == 2 and not staging(path).exists()
    assert sorted(p.name for p in path.parent.iterdir()) == ["last.ckpt"]


def test_only_a_staging_file_means_no_checkpoint(tmp_path):
    path = tmp_path / "last.ckpt"
    staging(path).write_bytes(b"torn")
    assert last_checkpoint(path) is None


def test_directory_checkpoints_swap_whole_and_a_half_swap_is_recovered(tmp_path):
    """Sharded strategies save a directory: the old one is moved aside, the new one renamed in; a kill
    between the two renames leaves only the moved-aside one, which ``last_checkpoint`` puts back."""
    path = tmp_path / "last.ckpt"

    def shards(step):
        def write(p):
            p.mkdir()
            for r in range(2):
                np.save(p / f"rank{r}.npy", np.full(3, step))
        return write

    write_checkpoint(path, shards(1))
    write_checkpoint(path, shards(2))
    assert np.load(path / "rank1.npy").tolist() == [2, 2, 2] and not moved_aside(path).exists()
    os.replace(path, moved_aside(path))  # the kill: after the first rename, before the second
    assert last_checkpoint(path) == path and np.load(path / "rank0.npy").tolist() == [2, 2, 2]


def test_resume_overwrite_rule(tmp_path, capsys):
    out = tmp_path / "run"
    assert start_or_resume(out, None, resume=False, overwrite=False, command="stockr1 x") is None  # fresh
    assert start_or_resume(out, None, resume=True, overwrite=False, command="stockr1 x") is None  # nothing yet
    out.mkdir()
    ckpt = out / "last.ckpt"
    ckpt.write_bytes(b"x")
    with pytest.raises(FileExistsError, match=r"last\.ckpt exists: rerun stockr1 x with --resume .* --overwrite"):
        start_or_resume(out, ckpt, resume=False, overwrite=False, command="stockr1 x")
    assert start_or_resume(out, ckpt, resume=True, overwrite=False, command="stockr1 x") == ckpt
    with pytest.raises(ValueError, match="pass one"):
        start_or_resume(out, ckpt, resume=True, overwrite=True, command="stockr1 x")
    assert start_or_resume(out, ckpt, resume=False, overwrite=True, command="stockr1 x") is None
    assert not out.exists()
