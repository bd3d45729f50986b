"""One progress line format for every long loop: ``step 50/2000 (2.5%) 1.21 s/step, ETA 39m``."""

from __future__ import annotations

import time


def eta(seconds: float) -> str:
    """``37s``, ``12m``, ``2h05m``."""
    seconds = max(0.0, float(seconds))
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds / 60:.0f}m"
    return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"


def progress(step: int, total: int, elapsed_s: float, steps_done: int, unit: str = "step") -> str:
    """Step ``step`` of ``total``; the rate is over the ``steps_done`` steps this process ran in
    ``elapsed_s`` (a resumed run's earlier steps do not count toward the rate)."""
    rate = elapsed_s / steps_done if steps_done > 0 else float("nan")
    left = (total - step) * rate if steps_done > 0 else float("nan")
    tail = f"{rate:.2f} s/{unit}, ETA {eta(left)}" if steps_done > 0 else "measuring"
    return f"{unit} {step}/{total} ({100 * step / max(total, 1):.1f}%) {tail}"


class Progress:
    """Counts done units of a loop and prints ``label unit k/N (x%) r s/unit, ETA t`` after each
    ``advance`` (flushed, so a log shows it while the loop runs)."""

    def __init__(self, total: int, label: str, unit: str = "step", start: int = 0) -> None:
        self.total, self.label, self.unit, self.done, self.first = total, label, unit, start, start
        self.t0 = time.perf_counter()

    def advance(self, n: int = 1) -> str:
        self.done += n
        line = f"{self.label} " + progress(self.done, self.total, time.perf_counter() - self.t0,
                                           self.done - self.first, self.unit)
        print(line, flush=True)
        return line
