"""One progress line format for every long loop: ``step 50/2000 (2.5%) 1.21 s/step, ETA 39m``; and the
filters that keep known third-party start-up noise out of a command's console output."""

from __future__ import annotations

import logging
import time
import warnings


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


def _not_litlogger_tip(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith("💡 Tip: For seamless cloud logging")


def silence_known_noise() -> None:
    """Narrow filters for third-party start-up messages that say nothing about the run, so a command's
    first lines are its own. Each names one message; nothing else is hidden."""
    # Lightning 2.6's utilities/_pytree.py builds torch's LeafSpec, deprecated since torch 2.9: their code, not ours.
    warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated", category=FutureWarning)
    # Lightning advertises its hosted LitLogger at every Trainer start that uses another logger.
    logging.getLogger("lightning.pytorch.utilities.rank_zero").addFilter(_not_litlogger_tip)
