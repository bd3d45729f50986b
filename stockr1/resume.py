"""How every training stage saves its state and picks up after a kill, so that the resumed run ends
bit-identical (on CPU) to the run that was never interrupted (issue 34).

Two rules make a resume exact, whatever the stage:

1. **What a step consumes is a function of (seed, step, rank).** A step draws its batch from
   ``step_rng(seed, step)`` (the same generator on every rank: ranks shard one global batch) and seeds
   torch, for dropout, sampling and field dropout, with ``step_seed(seed, step, rank)``. A resumed process
   therefore draws exactly what the uninterrupted one drew at that step, however the process got there,
   and exactness does not depend on saving generator states. What cannot be derived (weights, optimiser
   moments, the LR schedule's position, the step, the history) is in the checkpoint.
2. **A checkpoint is whole or absent.** ``write_checkpoint`` writes a hidden staging sibling, fsyncs it and
   renames it onto the checkpoint's name (``stockr1.outdir.commit``): the rename is the marker that the
   write finished, and it is the last thing written. ``last_checkpoint`` returns only a committed
   checkpoint, never a staging file, so a kill in the middle of a write (``tests/test_resume_kill.py``)
   resumes from the checkpoint before it.

Every training command has the same two flags, checked by ``start_or_resume``: ``--resume`` continues
from the last complete checkpoint in the command's output (a fresh start when there is none yet);
``--overwrite`` deletes that output and starts over; with neither, a command whose output already holds a
checkpoint refuses to start and names both flags (README, "Resume").

``STOCKR1_TEST_PAUSE_BEFORE_COMMIT=N`` (tests only) makes the process stop inside its N-th checkpoint
write, after the data went to the staging file and before the rename, and print one line saying so; the
kill test SIGKILLs it there.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from stockr1.outdir import commit, moved_aside, remove

PAUSE_ENV = "STOCKR1_TEST_PAUSE_BEFORE_COMMIT"
PAUSED = "paused before committing checkpoint"  # the line the kill test waits for
_writes = 0  # checkpoint writes of this process, for PAUSE_ENV


def step_rng(seed: int, step: int) -> np.random.Generator:
    """The generator of step ``step``'s global batch (identical on every rank)."""
    return np.random.default_rng([seed, step])


def step_seed(seed: int, step: int, rank: int = 0, *more: int) -> int:
    """The torch seed of step ``step`` on ``rank`` (``more``: further keys, e.g. a batch index)."""
    return int(np.random.default_rng([seed, step, rank, *more]).integers(2**62))


def seed_step(seed: int, step: int, rank: int = 0, *more: int) -> int:
    """Seed torch's global generator (CPU and every CUDA device) for one step; returns the seed."""
    import torch

    s = step_seed(seed, step, rank, *more)
    torch.manual_seed(s)
    return s


def staging(path: Path) -> Path:
    """Where a checkpoint of ``path`` is written before it is committed: the same directory (the rename is
    atomic there), a hidden name no reader looks for, and the same name on every rank (a sharded
    strategy writes its parts into it from several processes)."""
    return path.with_name(f".{path.name}.partial")


def write_checkpoint(path: str | Path, write: Callable[[Path], Any], is_writer: bool = True,
                     barrier: Callable[[], Any] | None = None) -> Path:
    """Save a checkpoint at ``path`` so that a kill at any moment leaves the previous one loadable.

    ``write(tmp)`` writes the state to the staging path (a file, or a directory for sharded strategies)
    and runs on every rank; after ``barrier`` the rank with ``is_writer`` commits it (fsync, rename,
    fsync of the directory). Returns ``path``."""
    global _writes
    path = Path(path)
    tmp = staging(path)
    if is_writer:
        path.parent.mkdir(parents=True, exist_ok=True)
        remove(tmp)  # a staging file left by a killed writer
    if barrier is not None:
        barrier()
    write(tmp)
    if barrier is not None:
        barrier()
    if is_writer:
        _writes += 1
        if os.environ.get(PAUSE_ENV) and _writes == int(os.environ[PAUSE_ENV]):
            print(f"{PAUSED} {path} (staging {tmp})", file=sys.stderr, flush=True)
            while True:  # the kill test SIGKILLs the process here
                time.sleep(1)
        commit(tmp, path)
    if barrier is not None:
        barrier()
    return path


def last_checkpoint(path: str | Path) -> Path | None:
    """``path`` if a complete checkpoint is there, else None. Staging files of killed writes are never
    returned; a directory checkpoint that ``commit`` had moved aside when the kill came is moved back."""
    path = Path(path)
    aside = moved_aside(path)
    if not path.exists() and aside.exists():
        with contextlib.suppress(FileNotFoundError):  # another rank moved it back first
            os.replace(aside, path)
    return path if path.exists() else None


def start_or_resume(out: str | Path, checkpoint: Path | None, resume: bool, overwrite: bool,
                    command: str) -> Path | None:
    """The ``--resume`` / ``--overwrite`` rule of every training command. ``checkpoint``: the last
    complete checkpoint in ``out`` (``last_checkpoint``), None when there is none.

    - ``resume``: returns ``checkpoint`` (None: nothing to resume yet, the run starts fresh);
    - ``overwrite``: deletes ``out`` and returns None;
    - neither: FileExistsError when ``out`` holds a checkpoint, naming both flags; else None."""
    if resume and overwrite:
        raise ValueError(f"{command}: --resume continues the run in {out}, --overwrite deletes it; pass one")
    if resume:
        return checkpoint
    if overwrite:
        remove(Path(out))
        return None
    if checkpoint is not None:
        raise FileExistsError(f"{checkpoint} exists: rerun {command} with --resume to continue that run, or with "
                              f"--overwrite to delete {out} and start over")
    return None

