"""`stockr1 bench grpo_precision`: the log-prob gap by hand, its timed step against the trainer's own step, and
the command end to end on the shipped tiny release (what it writes, the ratios recomputed from its rows)."""

import json
from pathlib import Path

import pytest
import torch
import yaml

from benchmarks.grpo_check.command import GRPOCheckConfig, run_overrides
from benchmarks.grpo_check.precision import PHASES, main, ratios, schedule, timed_step
from rl.setup import build_trainer, load_config

ROOT = Path(__file__).parents[1]


def _check_config(tmp_path: Path, max_new_tokens: int = 256) -> dict:
    """The tiny release's check. 256 new tokens stop before the answer (cheap, for the timings); a step that
    must learn needs the whole trace (640), or every rollout earns the same reward and no weight moves."""
    return {"grpo": {"config": str(ROOT / "configs/grpo/tiny.yaml"),
                     "overrides": {"rollout": {"max_new_tokens": max_new_tokens},
                                   "train": {"group_size": 2, "lr": 1e-3}}},
            "sft_run_dir": str(ROOT / "release/tiny/sft"), "n_queries": 8, "steps": 1, "seeds": [0, 1],
            "work_dir": str(tmp_path / "work"), "n_boot": 200}


def test_rounds_alternate_which_precision_goes_first() -> None:
    assert schedule(3) == [(0, "32-true"), (0, "bf16-mixed"), (1, "bf16-mixed"), (1, "32-true"), (2, "32-true"),
                           (2, "bf16-mixed")]


def test_ratios_are_bf16_over_fp32_per_round_and_of_the_medians() -> None:
    runs = [{"precision": p, **{ph: v for ph in PHASES}} for p, v in
            (("32-true", 10.0), ("bf16-mixed", 5.0), ("bf16-mixed", 8.0), ("32-true", 20.0), ("32-true", 12.0),
             ("bf16-mixed", 6.0))]
    r = ratios(runs)["step_s"]
    assert r["per_round"] == pytest.approx([0.5, 0.4, 0.5]) and r["ratio_of_medians"] == pytest.approx(6.0 / 12.0)


def test_timed_step_is_the_trainers_step_with_its_phases(tmp_path) -> None:
    """The same start and seed: timed_step leaves the weights train_step leaves, runs its hook on the batch
    before the update, and reports the step's own phase times."""
    cfg = GRPOCheckConfig.from_dict(_check_config(tmp_path, 640))
    full = load_config(cfg.grpo.config, run_overrides(cfg, 0))
    sft = Path(cfg.sft_run_dir)
    ours, _ = build_trainer(full, sft, tmp_path / "a")
    theirs, _ = build_trainer(full, sft, tmp_path / "b")
    before = ours.trainable_state()
    t, _ = timed_step(ours, lambda sb: (len(sb.rollouts), ours.trainable_state()))
    theirs.train_step()
    after, ref = ours.trainable_state(), theirs.trainable_state()
    n_rollouts, at_hook = t["after"]
    assert n_rollouts == 16 and all(torch.equal(at_hook[n], before[n]) for n in before)  # the hook saw the start
    assert set(t) == {*PHASES, "scoring_s", "after"} - {"rollout_s_per_1k_tokens"}
    assert t["step_s"] >= t["rollout_s"] + t["loss_s"] > 0
    changed = [n for n in after if not torch.equal(after[n], before[n])]
    assert changed and all(torch.allclose(after[n], ref[n], atol=1e-6) for n in after)


def test_grpo_precision_on_the_tiny_release(tmp_path) -> None:
    path = tmp_path / "precision.yaml"
    path.write_text(yaml.safe_dump(_check_config(tmp_path)))
    out = tmp_path / "out"
    assert main(["--config", str(path), "--out", str(out), "--rounds", "1"]) == 0  # the order: schedule's test
    res = json.loads((out / "results.json").read_text())
    assert [(r["round"], r["precision"]) for r in res["runs"]] == schedule(1)
    assert res["ratios"] == ratios(res["runs"])
    for r in res["runs"]:
        assert r["rollouts"] == 16 and r["generated_tokens"] > 0 and r["step_s"] > r["rollout_s"] > 0
    g = res["gap"]
    assert g["tokens"] == res["runs"][0]["generated_tokens"]  # the first fp32 batch's generated tokens
    assert 0 < g["token_mean"] <= g["token_p99"] <= g["token_max"]  # bf16 does change the log-probs, a little
    assert g["token_mean"] < 0.5
    readme = (out / "README.md").read_text()
    s = res["ratios"]["step_s"]
    assert f"a step under bf16 autocast took x{s['ratio_of_medians']:.2f} of the fp32 step's time" in readme
    assert f"mean {g['token_mean']:.4f}" in readme
    with pytest.raises(FileExistsError, match="--overwrite"):  # results are not overwritten unasked
        main(["--config", str(path), "--out", str(out)])
