"""The check an SFT run passes before it is shipped as ``release/tiny``: greedy rollouts on validation
questions of its own QA file (never test), graded by the QA benchmark's grader, recorded in the
release manifest. ``stockr1 demo --from-scratch --release DIR`` calls it before packing."""

from __future__ import annotations

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
