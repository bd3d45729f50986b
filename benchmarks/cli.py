"""`stockr1 bench <name>`: dispatch to one benchmark module's ``main(argv)``."""

from __future__ import annotations

import sys

from stockr1.commands import dispatch

BENCHMARKS: dict[str, tuple[str, str]] = {
    "forecast": ("benchmarks.forecast.command:main", "TS encoder vs baselines on held-out windows (Table 2)"),
    "forecast_search": ("benchmarks.forecast.search:main", "choose the encoder / ensemble / calibration on validation"),
    "action": ("benchmarks.action:main", "oracle gain and per-field controllability of the decoder"),
    "qa": ("benchmarks.qa.command:main", "QA accuracy per task family (Table 1)"),
    "qa_baselines": ("benchmarks.qa.baselines:main", "question-only vs majority / random walk on QA (no policy)"),
    "backtest": ("benchmarks.backtest:main", "z-score signal backtest (Table 6)"),
    "ablation": ("benchmarks.ablation.command:main", "SFT vs GRPO vs u-GRPO and reward ablations (Table 3)"),
    "ablation_reach": ("benchmarks.ablation.reach:main", "can the ablation's target be met through the tools (readers vs SFT)"),
    "grpo_check": ("benchmarks.grpo_check.command:main", "does GRPO raise the reward of its own training queries (seeds x queries)"),
    "grpo_checks": ("benchmarks.grpo_check.side_by_side:main", "every grpo_check report of a folder side by side (verdicts, log-odds split, KL)"),
    "grpo_credit": ("benchmarks.grpo_check.credit:main", "one GRPO step's update split: the answer tokens' part vs the rest, moved answer log-odds"),
    "grpo_precision": ("benchmarks.grpo_check.precision:main", "one check step in fp32 and under bf16 autocast: each phase timed, log-prob gap"),
    "grpo_ceiling": ("benchmarks.grpo_check.ceiling:main", "the check's optimiser on the gold answer's own gradient: how fast answers could move"),
    "compare": ("benchmarks.compare.command:main", "Stock-R1 vs Trading-R1 vs Trade-R1 vs AlphaQuanter"),
    "throughput": ("benchmarks.throughput:main", "GRPO step time vs TRL, decoder share of rollout time"),
    "sft_recipe": ("benchmarks.sft_recipe:main", "which tiny SFT recipe learns the protocol (val parse rate by step)"),
    "tokens": ("benchmarks.tokens:main", "tokens per SFT example in a pretrained tokenizer; cost of the compact observation"),
    "index": ("benchmarks.index:main", "results/README.md: every result folder, the command that wrote it"),
    "sft_speed": ("benchmarks.sft_speed:main", "joint SFT s/step: 1 thread vs 2 threads vs 2 DDP processes"),
    "accelerator": ("benchmarks.accelerator.command:main", "TS encoder, SFT, rollout and GRPO steps at 4B scale (needs arch)"),
    "gpu_check": ("benchmarks.gpu_check.command:main", "the prepared GPU check: 4B on the GPU, ~300 SFT + 3 u-GRPO steps in 9 min"),
    "release_check": ("benchmarks.release_check:main", "grade a release's SFT run on validation questions, record it in its manifest"),
    "select_sft": ("benchmarks.select_sft:main", "the checkpoint of an SFT run to ship: its snapshots graded on validation"),
    "decode_profile": ("benchmarks.decode_profile:main", "where a decode step of the reference rollout backend spends its time (GPU)"),
    "rollout_batch": ("benchmarks.rollout_batch:main", "decode time with and without dropping finished rows (or a merged LoRA twin, fp32 or bf16)"),
    "cost_model": ("benchmarks.accelerator.readme:main", "results/accelerator/README.md: FLOPs and memory of the 4B/8B recipes"),
}


def main(argv: list[str] | None = None) -> int:
    usage = "usage: stockr1 bench <name> [args...]\n\nbenchmarks:\n" + "\n".join(
        f"  {k:<11} {v[1]}" for k, v in BENCHMARKS.items()
    )
    return dispatch(BENCHMARKS, sys.argv[1:] if argv is None else argv, usage)
