"""`bench ablation` end to end on a tiny synthetic SFT run: every row trains / evaluates / probes and
the command writes summary.json in the documented schema, a generated README and the curves."""

import json

import pytest
import yaml

from benchmarks.ablation.command import AblationConfig, run_ablation, write_results
from llm.sft import run_sft
from tests.tiny_runs import DATA, DECODER_TS, tiny_sft_config


@pytest.fixture(scope="module")
def sft_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("abl")
    cfg = tiny_sft_config(root, {"n_train": 12, "n_val": 4, "n_test": 6},
                          {"seed": 0, "warmup_steps": 2, "tool_samples": 4, "ts": DECODER_TS,
                           "action": {"cond_dim": 8, "emb_dim": 2, "hidden": 16}}, {})
    (root / "sft.yaml").write_text(yaml.safe_dump(cfg))
    run_sft(root / "sft.yaml", out_root=root / "sft")
    grpo = {"run": "g", "seed": 0, "data": DATA, "rollout": {"max_new_tokens": 8, "temperature": 1.0},
            "train": {"group_size": 2, "queries_per_step": 1, "max_steps": 1, "lr": 1e-4, "warmup_steps": 1,
                      "num_iterations": 2, "micro_batch": 4, "accelerator": "cpu", "ckpt_every": 10,
                      "loss": {"beta": 0.04}}}
    (root / "grpo.yaml").write_text(yaml.safe_dump(grpo))
    return root


def test_every_row_is_trained_graded_probed_and_summarised(sft_run, tmp_path) -> None:
    root = sft_run
    cfg = AblationConfig.from_dict({
        "seeds": [0, 1], "threads": 1, "work_dir": str(tmp_path / "work"), "variants": ["sft", "grpo", "ugrpo"],
        "n_boot": 50, "sft": {"config": str(root / "sft.yaml"), "run_dir": str(root / "sft" / "s")},
        "grpo": {"config": str(root / "grpo.yaml"), "overrides": {"qa": {"max_train_queries": 2}}},
        "eval": {"n": 4, "max_new_tokens": 8, "split": "test"}, "probe": {"group_size": 2}})
    res = run_ablation(cfg, tmp_path / "out", log=lambda *_: None)
    write_results(res, cfg, tmp_path / "out", "c.yaml")
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert s["n_questions"] == 4 and s["seeds"] == [0, 1] and set(s["rows"]) == {"sft", "grpo", "ugrpo"}
    for row in s["rows"].values():
        for m in ("qa_acc", "action_acc", "answer_parse_rate", "protocol_rate"):
            assert set(row[m]) == {"mean", "std", "ci_low", "ci_high", "interval"}
        assert "probe_reward_total" in row
    assert set(s["differences"]) == {"grpo-sft", "ugrpo-sft", "ugrpo-grpo"}
    for d in s["differences"].values():  # every verdict is read from the interval that includes the seeds
        assert d["qa_acc"]["verdict"] in {"holds", "tie", "worse"} and d["qa_acc"]["n_seeds"] == 2
    assert s["policy_base"] == "tiny" and len(s["sft_release_hash"]) == 12  # the SFT start it was run from
    assert set(s["training"]) == {"grpo", "ugrpo"} and "policy/kl" in s["training"]["ugrpo"]
    readme = (tmp_path / "out" / "README.md").read_text()
    assert "## What holds" in readme and "costs at most 2 points of the protocol rate" in readme
    assert "What the advantages are made of" in readme and "r_ans" in s["rows"]["sft"]["probe_variance_share"]
    assert (tmp_path / "out" / "training.png").exists()
    for name in ("grpo-s0", "ugrpo-s1"):  # every GRPO run logged its recipe diagnostics per step
        rec = json.loads((tmp_path / "work" / "grpo" / name / "metrics.jsonl").read_text().splitlines()[-1])
        assert {"policy/kl", "policy/clip_region", "reward/frac_zero_spread", "lr"} <= set(rec)
    again = run_ablation(cfg, tmp_path / "out", log=lambda *_: None)  # everything cached: same numbers
    assert again["per_seed"]["grpo"][1]["overall"] == res["per_seed"]["grpo"][1]["overall"]
