"""Calling a stage's CLI: the exact ``stockr1 ...`` (or ``python -m ...``) command a user would type.

In-process (``stockr1.cli.main(argv)``) is the default: it saves ~6 s of CPU per stage on importing
torch/transformers. ``isolate=True`` runs the command as a subprocess instead - used for the trainers
(Lightning / Fabric), which set process-wide state (seeds, deterministic flags, thread counts) that
must not leak into the next stage. Either way the output also goes to ``<stage>/log.txt``.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO


class StageFailed(RuntimeError):
    """A stage's command exited with a non-zero status."""


class _Tee:
    def __init__(self, *streams: TextIO) -> None:
        self.streams = streams

    def write(self, s: str) -> int:
        for st in self.streams:
            st.write(s)
        return len(s)

    def flush(self) -> None:
        for st in self.streams:
            st.flush()

    def isatty(self) -> bool:
        return False


def stage_env(threads: int) -> dict[str, str]:
    """Environment for subprocess stages: fixed thread counts (results depend on reduction order) and
    W&B offline unless the user chose otherwise."""
    env = dict(os.environ)
    env.setdefault("WANDB_MODE", "offline")
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "STOCKR1_THREADS"):
        env[var] = str(threads)
    env.setdefault("PYTHONHASHSEED", "0")
    env["PYTHONUNBUFFERED"] = "1"  # the stage's progress reaches the console and log.txt as it happens
    return env


def run_command(argv: Sequence[str], log_path: Path, isolate: bool = False, module: str = "stockr1.cli",
                threads: int = 2, seed: int = 0) -> list[str]:
    """Run ``module``'s ``main(argv)``; return the command line as a user would type it.

    module: ``"stockr1.cli"`` (the ``stockr1`` entry point) or another module with ``main(argv)``
    (e.g. ``forecast_action.train``). In-process, the global RNGs are reseeded with ``seed`` first, so a
    stage's result does not depend on what ran before it. Raises ``StageFailed`` naming the log on a non-zero exit.
    """
    argv = [str(a) for a in argv]
    shown = (["stockr1"] if module == "stockr1.cli" else ["python", "-m", module]) + argv
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "a", encoding="utf-8") as log:
        log.write("$ " + " ".join(shown) + "\n")
        log.flush()
        if isolate:
            rc = _run_subprocess([sys.executable, "-m", module, *argv], log, threads)
        else:
            rc = _run_in_process(module, argv, log, threads, seed)
    if rc != 0:
        raise StageFailed(f"`{' '.join(shown)}` exited with status {rc}; see {log_path}")
    return shown


def _run_subprocess(cmd: list[str], log: TextIO, threads: int) -> int:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=stage_env(threads),
                            bufsize=1)
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            sys.stdout.write(line)
            log.write(line)
        return proc.wait()
    except BaseException:  # Ctrl-C: stop the child too; the stage stays unfinished and resumes later
        proc.terminate()
        proc.wait()
        raise


def _run_in_process(module: str, argv: list[str], log: TextIO, threads: int, seed: int) -> int:
    import importlib
    import random

    import numpy as np
    import torch

    torch.set_num_threads(threads)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    main = importlib.import_module(module).main
    with contextlib.redirect_stdout(_Tee(sys.stdout, log)), contextlib.redirect_stderr(_Tee(sys.stderr, log)):
        try:
            rc = main(argv)
        except SystemExit as e:  # argparse errors and CLIs that exit
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return int(rc or 0)
