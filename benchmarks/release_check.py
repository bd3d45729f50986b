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
    """Protocol rate and accuracy of the run's policy on ``n`` family-balanced validation questions, and
    the content hash of the windows it was trained on."""
    from benchmarks.sft_recipe import val_slice
    from llm.ask import load_run
    from llm.build import load_data
    from llm.qa import load_items
    from llm.qa.evaluate import grade_rollouts, rollout_items
    from stockr1.config import load_yaml
    from stockr1.data import content_hash

    sft_dir = Path(sft_dir)
    cfg = load_yaml(sft_dir / "config.yaml")
    windows, _ = load_data(cfg.get("data", {}))
    policy, decoder = load_run(sft_dir)
    val = val_slice(load_items(sft_dir / "qa.jsonl"), n)
    m = grade_rollouts(rollout_items(policy, decoder, windows, val, max_new_tokens=max_new_tokens,
                                     max_context_chars=cfg.get("max_context_chars")))
    keep = ("action_and_answer_rate", "action_success_rate", "answer_parse_rate", "overall")
    return {"data_hash": content_hash(windows),
            "validation": {"n_questions": len(val), **{k: round(float(m[k]), 2) for k in keep if k in m}}}


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
