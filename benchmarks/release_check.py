"""The check an SFT run passes before it is shipped as ``release/tiny``: greedy rollouts on validation
questions of its own QA file (never test), graded by the QA benchmark's grader, recorded in the
release manifest. ``stockr1 demo --from-scratch --release DIR`` calls it before packing;

    stockr1 bench release_check --dir release/smollm2-135m [--n 40] [--max-mb 30]

runs it on a shipped release and records it (with the data's content hash) in that release's manifest."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def validation_metrics(sft_dir: str | Path, n: int = 40, max_new_tokens: int = 640) -> dict[str, Any]:
    """Protocol rate and accuracy of the run's policy on ``n`` family-balanced validation questions
    (`benchmarks.select_sft.grade`, the grader that chooses among SFT checkpoints), and the content hash of
    the windows it was trained on."""
    from benchmarks.select_sft import KEEP, grade, run_windows
    from stockr1.data import content_hash

    sft_dir = Path(sft_dir)
    m = grade(sft_dir, None, n, max_new_tokens)
    return {"data_hash": content_hash(run_windows(sft_dir)),
            "validation": {"n_questions": m["n_questions"], **{k: round(float(m[k]), 2) for k in KEEP if k in m}}}


def main(argv: list[str] | None = None) -> int:
    from stockr1.release import DEFAULT_DIR, MAX_MB, record, verify

    ap = argparse.ArgumentParser(prog="stockr1 bench release_check", description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=DEFAULT_DIR, help="a release folder (its sft/ run is graded)")
    ap.add_argument("--n", type=int, default=40, help="family-balanced validation questions of the run's QA file")
    ap.add_argument("--max-mb", type=float, default=MAX_MB, help="refuse a release larger than this (MB)")
    a = ap.parse_args(argv)
    verify(a.dir)  # before spending the rollouts
    man = record(a.dir, validation_metrics(Path(a.dir) / "sft", a.n), a.max_mb)
    print(f"{a.dir}: validation {man['validation']} recorded in its manifest")
    return 0
