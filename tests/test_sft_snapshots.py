"""`stockr1 sft` with ``train.snapshot_every`` and ``traces.counterfactual``, end to end on a tiny config:
the snapshots are loadable runs of their step, and taking them changes nothing the run trains."""

from __future__ import annotations

import json

import pytest
import yaml
from safetensors.torch import load_file

from llm.ask import load_run
from llm.sft import run_sft
from llm.traces import load_traces
from tests.resume_check import assert_identical
from tests.test_sft_resume import DECODER as RESUME_DECODER
from tests.tiny_runs import tiny_sft_config

# a decoder warmed up long enough to follow its action, so that another action's trajectory can imply another answer
DECODER = {**RESUME_DECODER, "warmup_steps": 60}
TRAIN = {"max_steps": 4, "ckpt_every": 2, "lr": 3e-3, "decoder_lr": 1e-3, "warmup_steps": 1}


def tensors(run_dir, sub: str) -> dict:
    out = {}
    for f in sorted((run_dir / sub).rglob("*.safetensors")):
        out.update({f"{f.name}:{k}": v for k, v in load_file(f).items()})
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The same tiny SFT run twice: without and with snapshots every 2 of its 4 steps."""
    tmp_path = tmp_path_factory.mktemp("snap")
    qa = {"n_train": 12, "n_val": 6, "n_test": 2}
    plain = tiny_sft_config(tmp_path, qa, DECODER, TRAIN)
    plain["traces"] = {**plain.get("traces", {}), "counterfactual": 0.5}
    snap = {**plain, "train": {**plain["train"], "snapshot_every": 2}}
    for name, cfg in (("plain", plain), ("snap", snap)):
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(cfg))
        run_sft(tmp_path / f"{name}.yaml", out_root=tmp_path / name)
    return tmp_path / "plain" / "s", tmp_path / "snap" / "s"


def test_snapshots_are_runs_of_their_step_and_do_not_change_training(runs) -> None:
    a, b = runs

    # counterfactual traces were written (their rationale and action masked) and trained on
    report = json.loads((b / "trace_report.json").read_text())
    traces = load_traces(b / "traces.jsonl")
    assert report["counterfactual"] > 0 and len(traces) == report["kept"] + report["counterfactual"]
    assert [s[1] for s in traces[-1].segments] == [False, False, True]

    # the snapshot taken at step 2 is a finished run of step 2: it loads, and its weights are not the final ones
    s2 = b / "snapshots" / "step_00002"
    assert json.loads((s2 / "summary.json").read_text())["steps"] == 2
    assert all((s2 / f).exists() for f in ("config.yaml", "qa.jsonl", "thresholds.json"))
    policy, decoder = load_run(s2)
    assert policy is not None and decoder is not None
    p2, pf = tensors(s2, "policy"), tensors(b, "policy")
    assert p2.keys() == pf.keys() and any(not (p2[k] == pf[k]).all() for k in p2)
    assert not (b / "snapshots" / "step_00004").exists()  # the last step is the run itself

    # taking snapshots changed nothing the run trained or saved (the decoder's U refit is on a copy)
    for sub in ("policy", "decoder"):
        assert assert_identical(tensors(a, sub), tensors(b, sub)) > 0, sub


def test_select_sft_grades_every_candidate_on_the_same_validation_questions(runs, tmp_path) -> None:
    from benchmarks.select_sft import main
    from benchmarks.sft_recipe import export_step

    plain, run = runs
    assert main(["--run", str(run), "--baseline", str(plain), "--n", "4", "--max-new-tokens", "48",
                 "--threads", "1", "--out", str(tmp_path / "sel")]) == 0
    res = json.loads((tmp_path / "sel" / "metrics.json").read_text())
    assert set(res["candidates"]) == {"2", "4"} and res["candidates"]["2"]["dir"].endswith("step_00002")
    ids = res["candidates"]["2"]["ids"]
    assert len(ids) == 4 and all(c["ids"] == ids for c in res["candidates"].values()) and res["baseline"]["ids"] == ids
    from llm.qa import load_items

    split = {it.id: it.split for it in load_items(run / "qa.jsonl")}
    assert {split[i] for i in ids} == {"val"}  # model selection never reads a test question
    assert res["chosen"] == export_step(res["candidates"])  # the rule, on the numbers it wrote
    assert res["chosen_dir"] == res["candidates"][res["chosen"]]["dir"]
    c, b = res["candidates"][res["chosen"]], res["baseline"]
    better = (c["action_and_answer_rate"], c["overall"]) >= (b["action_and_answer_rate"], b["overall"])
    assert res["ship"] == ("chosen" if better else "baseline")
    text = (tmp_path / "sel" / "README.md").read_text()
    assert f"**Chosen: step {res['chosen']}**" in text and "validation" in text and "nan" not in text


def test_paired_difference_in_points_skips_questions_without_an_observation() -> None:
    from benchmarks.select_sft import paired

    a = {"hits": [1.0, 1.0, 0.0, 0.0], "follows": [1.0, None, 1.0, 0.0]}
    b = {"hits": [0.0, 1.0, 0.0, 0.0], "follows": [0.0, 1.0, None, 0.0]}
    diff, lo, hi = paired(a, b, "hits")
    assert diff == pytest.approx(25.0) and lo <= diff <= hi
    diff, _, _ = paired(a, b, "follows")  # only questions 1 and 4 have both: (1 + 0)/2 - (0 + 0)/2
    assert diff == pytest.approx(50.0)

def test_release_check_records_the_selection_graders_numbers_and_the_data_hash(runs) -> None:
    """The manifest's validation record and select_sft's choice read one grader on the same questions."""
    from benchmarks.release_check import validation_metrics
    from benchmarks.select_sft import KEEP, grade, run_windows
    from stockr1.data import content_hash

    _, run = runs
    rec = validation_metrics(run, n=4, max_new_tokens=48)
    m = grade(run, None, 4, 48)
    assert rec["validation"] == {"n_questions": 4, **{k: round(m[k], 2) for k in KEEP}}
    assert rec["data_hash"] == content_hash(run_windows(run)) and len(rec["data_hash"]) >= 16
