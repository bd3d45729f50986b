"""`bench sft_speed`: per-step seconds from a run's metrics.jsonl and the ratios its README reports."""

import argparse
import json

from benchmarks.sft_speed import readme, step_seconds


def test_step_seconds_are_differences_of_the_cumulative_clock_after_warmup(tmp_path) -> None:
    m = tmp_path / "metrics.jsonl"
    m.write_text("".join(json.dumps({"step": i + 1, "sec": s}) + "\n" for i, s in enumerate([5.0, 6.0, 7.5, 9.0, 10.0])))
    assert step_seconds(m, 0) == [1.0, 1.5, 1.5, 1.0]
    assert step_seconds(m, 2) == [1.5, 1.0]


def test_readme_ratios_are_against_one_thread() -> None:
    res = {"config": "c.yaml", "batch_size": 4, "steps": 10,
           "modes": {"1x1": {"rounds": [2.0, 2.2], "median": 2.1}, "1x2": {"rounds": [1.5], "median": 1.5},
                     "2x1": {"rounds": [1.4], "median": 1.4}}}
    text = readme(res, argparse.Namespace(steps=10, skip=2, rounds=2), ["--out", "x"])
    assert "| 1x1 | 1 x 1 | 2.000, 2.200 | 2.100 | 1.00x |" in text
    assert "| 2x1 | 2 x 1 | 1.400 | 1.400 | 1.50x |" in text and "Fastest here: **2x1** (1.50x" in text
