"""The tiny Trading-R1 curriculum of ``tests/test_curriculum_resume.py``, runnable in its own process:
``python -m tests.curriculum_run OUT INIT`` (the test SIGKILLs that process inside a checkpoint write)."""

from __future__ import annotations

import sys
from pathlib import Path

from rl.methods.trading_r1.backend import SharedStackBackend
from rl.methods.trading_r1.curriculum import STAGE_TARGET, CurriculumConfig, run_curriculum
from rl.methods.trading_r1.stages import StageConfig

THESIS = "<conclusion>c{k}</conclusion>\nDECISION: [[[{name}]]]"
EXAMPLES = [{"prompt": f"Ticker A{i}", "label": lab, "excess_return": 0.01 * (lab - 2),
             **{f"target_{s}": THESIS.format(k=k, name=name) for s, k in STAGE_TARGET.items()}}
            for i, (lab, name) in enumerate([(3, "BUY"), (1, "SELL"), (3, "BUY"), (1, "SELL")])]
# per stage: 2 SFT steps and 2 RFT steps, a checkpoint after each: 4 checkpoint writes a stage, 12 in all
SFT = {"epochs": 1, "lr": 3e-3, "batch_size": 2, "ckpt_every": 1}
RFT = {"steps": 2, "group_size": 2, "queries_per_step": 2, "lr": 1e-3, "max_new_tokens": 8, "ckpt_every": 1}
REWARDS = {"structure": {"structure": 1.0, "placement": 0.1}, "claims": {"evidence": 1.0, "placement": 0.1},
           "decision": {"decision": 1.0, "placement": 0.1}}


def config(out: str | Path, init: str | Path) -> CurriculumConfig:
    stages = tuple(StageConfig(s, REWARDS[s], dict(SFT), dict(RFT)) for s in STAGE_TARGET)
    return CurriculumConfig("resume_test", str(init), str(out), stages, len(EXAMPLES))


def run(out: str | Path, init: str | Path) -> list[dict]:
    return run_curriculum(config(out, init), EXAMPLES, SharedStackBackend())


if __name__ == "__main__":
    import torch

    torch.set_num_threads(1)
    run(sys.argv[1], sys.argv[2])
