"""The resume tests' helpers: ``assert_identical`` (two saved training states are the same, every tensor bit
for bit) and ``kill_inside_write`` (SIGKILL a real process inside a checkpoint write)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Container, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from stockr1.resume import PAUSE_ENV, PAUSED, staging

REPO = Path(__file__).resolve().parents[1]


def assert_identical(a: Any, b: Any, where: str = "", skip: Container[str] = ()) -> int:
    """Walk two nested checkpoint structures (dicts, lists, tuples) and require every tensor to be
    ``torch.equal`` with the same dtype and every other leaf ``==``; keys in ``skip`` (wall times, paths)
    are not compared. Returns the number of tensors compared, so a caller can check it compared some."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape, where
        assert torch.equal(a, b), f"{where}: max |diff| {(a.double() - b.double()).abs().max().item():.3g}"
        return 1
    if isinstance(a, Mapping):
        assert isinstance(b, Mapping), where
        keys = [k for k in a if k not in skip]
        assert sorted(map(str, keys)) == sorted(str(k) for k in b if k not in skip), where
        return sum(assert_identical(a[k], b[k], f"{where}.{k}", skip) for k in keys)
    if isinstance(a, Sequence) and not isinstance(a, str):
        assert isinstance(b, Sequence) and len(a) == len(b), where
        return sum(assert_identical(x, y, f"{where}[{i}]", skip) for i, (x, y) in enumerate(zip(a, b, strict=True)))
    assert a == b or (a != a and b != b), f"{where}: {a!r} != {b!r}"  # NaN == NaN here
    return 0


def kill_inside_write(argv: Sequence[str], n: int, timeout: float = 600) -> Path:
    """Run ``python -m argv`` until it stops inside its ``n``-th checkpoint write (``STOCKR1_TEST_PAUSE_BEFORE_COMMIT``:
    the data are in the staging file, the rename has not happened), SIGKILL it there, and tear the staging
    file in half, as a kill inside ``torch.save`` would have left it. Returns the checkpoint it was writing."""
    # the killed process computes with this process's thread count: a CPU kernel's summation order may depend on
    # it (seen on these cores: 1 vs 2 threads differed by 4e-7 after 6 SFT steps), and the resume is compared
    # bit for bit with a run made here
    env = {**os.environ, PAUSE_ENV: str(n), "OMP_NUM_THREADS": str(torch.get_num_threads()), "WANDB_MODE": "disabled"}
    proc = subprocess.Popen([sys.executable, "-m", *map(str, argv)], cwd=REPO, env=env, stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True)
    deadline, line, tail = time.time() + timeout, "", []
    try:
        while PAUSED not in line:
            line = proc.stderr.readline()
            tail = (tail + [line])[-20:]
            assert line or proc.poll() is None, f"the run ended before write {n} (rc {proc.returncode}): {''.join(tail)}"
            assert time.time() < deadline, "timed out waiting for the checkpoint write"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    path = Path(line.split()[len(PAUSED.split())])
    part = staging(path)
    assert part.is_file()
    with open(part, "r+b") as f:
        f.truncate(part.stat().st_size // 2)
    return path
