"""Knowledge cutoff: a pretrained policy is not evaluated on dates it may have read about."""

import json

import pytest

from llm.policy import PolicyConfig
from stockr1.cutoff import cutoff_end, cutoff_line

DATES = ["2025-06-30", "2025-07-31", "2025-08-01"]


def test_cutoff_end_is_the_last_day_of_the_month() -> None:
    assert str(cutoff_end("2025-07")) == "2025-07-31" and str(cutoff_end("2024-02")) == "2024-02-29"


def test_dates_on_or_before_the_cutoff_are_refused_unless_allowed() -> None:
    with pytest.raises(ValueError, match="2 of 3 decision dates are on or before Q's knowledge cutoff 2025-07"):
        cutoff_line(True, "Q", "2025-07", DATES, allow=False)
    assert cutoff_line(True, "Q", "2025-07", DATES, allow=True).startswith("**2 of 3 decision dates are on or before")
    assert cutoff_line(True, "Q", "2025-07", DATES[2:], allow=False) == \
        "Knowledge cutoff 2025-07 of Q: all 1 decision dates are after it."
    with pytest.raises(ValueError, match="declares no knowledge_cutoff"):
        cutoff_line(True, "Q", None, DATES, allow=False)
    assert "not applicable" in cutoff_line(False, "tiny", None, DATES, allow=False)  # random init: nothing memorised


def test_policy_config_checks_the_cutoff_and_knows_what_is_pretrained() -> None:
    with pytest.raises(ValueError, match="YYYY-MM"):
        PolicyConfig(knowledge_cutoff="July 2025")
    assert not PolicyConfig().pretrained and not PolicyConfig(name_or_path="Qwen/Qwen3-8B", random_init_layers=2).pretrained
    assert PolicyConfig(name_or_path="Qwen/Qwen3-8B", knowledge_cutoff="2025-04").pretrained


def test_bench_qa_refuses_a_pretrained_policy_before_its_cutoff_before_any_rollout(tmp_path) -> None:
    from benchmarks.qa.command import main
    from llm.build import load_data
    from llm.qa import QAConfig, QAGenerator, save_items
    from tests.test_bench_qa_args import DATA

    windows, ctx = load_data(DATA)
    items, _ = QAGenerator(windows, ctx).generate(QAConfig(n_train=4, n_val=0, n_test=2, seed=0))
    run = tmp_path / "run"
    (run / "policy").mkdir(parents=True)
    save_items(items, run / "qa.jsonl")
    (run / "config.yaml").write_text(json.dumps({"data": DATA}))
    cfg = {"name_or_path": "Qwen/Qwen3-8B", "knowledge_cutoff": "2100-01"}  # after every synthetic date
    (run / "policy" / "policy_config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="on or before Qwen/Qwen3-8B's knowledge cutoff 2100-01"):
        main(["--checkpoint", str(run), "--out", str(tmp_path / "out"), "--n", "2"])
    assert not (tmp_path / "out").exists()


def test_bench_backtest_refuses_a_pretrained_checkpoint_before_its_cutoff_and_the_flag_overrides(tmp_path) -> None:
    from benchmarks.backtest import checkpoint_cutoff_line, main

    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text(json.dumps({"knowledge_cutoff": "2100-01"}))  # after every sample date
    with pytest.raises(ValueError, match="knowledge cutoff 2100-01"):
        main(["--checkpoint", str(ckpt), "--out", str(tmp_path / "out"), "--baselines"])  # before any fitting
    assert not (tmp_path / "out").exists()
    assert checkpoint_cutoff_line(str(ckpt), DATES, allow=True).startswith("**3 of 3 decision dates")
    (ckpt / "config.json").write_text(json.dumps({"format": "forecaster"}))  # trained here: nothing to check
    assert "not applicable" in checkpoint_cutoff_line(str(ckpt), DATES, allow=False)
    assert "not applicable" in checkpoint_cutoff_line(None, DATES, allow=False)
