"""What a long benchmark caches in its work dir: each stage's JSON result (the resume unit) and the wall
seconds it cost when it ran, so a resumed, split or re-rendered benchmark still reports what every cached
stage cost (``stockr1 bench ablation``, ``stockr1 bench grpo_check``)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


class Timings(dict):
    """Wall seconds per stage, persisted in ``<work_dir>/timings.json``."""

    def __init__(self, path: Path) -> None:
        super().__init__(json.loads(path.read_text()) if path.exists() else {})
        self.path = path

    def record(self, key: str, seconds: float) -> None:
        """Set one key in the file as it is now: the file is the truth (two invocations may split
        the stages between them), so a stale in-memory value never overwrites a newer one."""
        if self.path.exists():
            self.update(json.loads(self.path.read_text()))
        self[key] = float(seconds)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(dict(self), indent=1))


def cached(path: Path, fn: Callable[[], Any], timings: Timings, key: str) -> Any:
    """JSON result at ``path`` if present, else ``fn()`` written there, its wall time recorded as ``key``."""
    if path.exists():
        return json.loads(path.read_text())
    t0 = time.perf_counter()
    res = fn()
    timings.record(key, time.perf_counter() - t0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(res, indent=1, default=str))
    return res
