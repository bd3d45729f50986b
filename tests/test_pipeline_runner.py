"""Stage runner logic with trivial fake stages: skip finished stages, resume an interrupted one,
--only / --from / --fresh, missing inputs and outputs, the run manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stockr1.pipeline.demo import write_run_manifest
from stockr1.pipeline.runner import DONE, Stage, StageContext, StageInputError, StageRunner, select


class Interrupted(Exception):
    pass


def make_stages(calls: list[tuple[str, bool]], crash_at: dict[str, int] | None = None) -> list[Stage]:
    """a -> b -> c. b counts to 3 in b/progress.txt (one unit per call unless it crashes first), like a
    trainer that checkpoints; crash_at['b'] = k raises after writing progress k."""
    crash_at = crash_at if crash_at is not None else {}

    def run_a(ctx: StageContext):
        calls.append(("a", ctx.resume))
        (ctx.stage_dir / "out.txt").write_text(f"seed={ctx.seed} x={ctx.cfg.get('x')}")
        return ["fake", "a"]

    def run_b(ctx: StageContext):
        calls.append(("b", ctx.resume))
        prog = ctx.stage_dir / "progress.txt"
        k = int(prog.read_text()) if prog.exists() else 0
        while k < 3:
            k += 1
            prog.write_text(str(k))
            if crash_at.get("b") == k:
                crash_at.pop("b")
                raise Interrupted(f"killed at {k}")
        (ctx.stage_dir / "model.txt").write_text(ctx.path("a/out.txt").read_text() + " trained")
        return ["fake", "b"]

    def run_c(ctx: StageContext):
        calls.append(("c", ctx.resume))
        (ctx.stage_dir / "metrics.json").write_text(json.dumps({"m": len(ctx.path("b/model.txt").read_text())}))

    return [Stage("a", run_a, (), ("a/out.txt",)), Stage("b", run_b, ("a/out.txt",), ("b/model.txt",)),
            Stage("c", run_c, ("b/model.txt",), ("c/metrics.json",))]


def test_runs_all_then_skips_finished(tmp_path: Path) -> None:
    calls: list = []
    stages = make_stages(calls)
    runner = StageRunner(stages, tmp_path, seed=7, cfg={"a": {"x": 3}}, log=lambda s: None)
    res = runner.run()
    assert [r.status for r in res] == ["done"] * 3
    assert (tmp_path / "a" / "out.txt").read_text() == "seed=7 x=3"
    done = json.loads((tmp_path / "b" / DONE).read_text())
    assert done["outputs"] == ["b/model.txt"] and done["argv"] == ["fake", "b"] and done["wall_s"] >= 0
    calls.clear()
    res = runner.run()
    assert calls == [] and [r.status for r in res] == ["skipped"] * 3


def test_interrupted_stage_resumes_and_matches_uninterrupted(tmp_path: Path) -> None:
    calls: list = []
    runner = StageRunner(make_stages(calls, {"b": 2}), tmp_path / "run", 0, {}, log=lambda s: None)
    with pytest.raises(Interrupted):
        runner.run()
    assert not (tmp_path / "run" / "b" / DONE).exists() and (tmp_path / "run" / "a" / DONE).exists()
    calls.clear()
    runner.run()
    assert calls == [("b", True), ("c", False)]  # a skipped; b picks up from its own progress
    ref = StageRunner(make_stages([]), tmp_path / "ref", 0, {}, log=lambda s: None)
    ref.run()
    for rel in ("b/model.txt", "c/metrics.json"):
        assert (tmp_path / "run" / rel).read_text() == (tmp_path / "ref" / rel).read_text()


def test_only_names_missing_input_and_its_producer(tmp_path: Path) -> None:
    runner = StageRunner(make_stages([]), tmp_path, 0, {}, log=lambda s: None)
    with pytest.raises(StageInputError) as e:
        runner.run(only="c")
    msg = str(e.value)
    assert "stage 'c'" in msg and str(tmp_path / "b" / "model.txt") in msg and "--only b" in msg
    assert not (tmp_path / "c").exists()  # nothing created for a stage that cannot start
    runner.run(only="a")
    runner.run(only="b")
    assert [r.status for r in runner.run(only="c")] == ["done"]


def test_from_reruns_later_stages_fresh_wipes_stage(tmp_path: Path) -> None:
    calls: list = []
    runner = StageRunner(make_stages(calls), tmp_path, 0, {}, log=lambda s: None)
    runner.run()
    (tmp_path / "b" / "stale.txt").write_text("x")
    (tmp_path / "c" / DONE).unlink()  # c looks interrupted, but its input is about to change: no resume
    calls.clear()
    runner.run(start="b")
    assert calls == [("b", False), ("c", False)]  # --from reruns from scratch
    assert not (tmp_path / "b" / "stale.txt").exists()
    (tmp_path / "c" / "stale.txt").write_text("x")
    calls.clear()
    runner.run(only="c", fresh=True)
    assert calls == [("c", False)] and not (tmp_path / "c" / "stale.txt").exists()


def test_missing_output_is_an_error_and_no_marker(tmp_path: Path) -> None:
    bad = Stage("bad", lambda ctx: None, (), ("bad/never.txt",))
    runner = StageRunner([bad], tmp_path, 0, {}, log=lambda s: None)
    with pytest.raises(RuntimeError, match="did not write"):
        runner.run()
    assert not (tmp_path / "bad" / DONE).exists()


def test_selection_errors() -> None:
    stages = make_stages([])
    assert [s.name for s in select(stages, start="b")] == ["b", "c"]
    with pytest.raises(ValueError, match="unknown stage 'z'"):
        select(stages, only="z")
    with pytest.raises(ValueError, match="duplicate"):
        StageRunner(stages + stages[:1], ".", 0, {})


def test_corrupt_marker_means_not_done(tmp_path: Path) -> None:
    calls: list = []
    runner = StageRunner(make_stages(calls), tmp_path, 0, {}, log=lambda s: None)
    runner.run()
    (tmp_path / "c" / DONE).write_text("{truncated")
    calls.clear()
    runner.run()
    assert calls == [("c", True)]


def test_manifest_content(tmp_path: Path) -> None:
    stages = make_stages([])
    StageRunner(stages, tmp_path, 5, {}, log=lambda s: None).run()
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "manifest.json").write_text(json.dumps({"content_hash": "abc123"}))
    cfg = {"seed": 5, "a": {"x": 1}}
    man = write_run_manifest(tmp_path, 5, cfg, "configs/demo.yaml", stages, ["--seed", "5"])
    on_disk = json.loads((tmp_path / "manifest.json").read_text())
    assert on_disk == json.loads(json.dumps(man, default=str))
    assert on_disk["seed"] == 5 and on_disk["config"] == cfg and on_disk["data_hash"] == "abc123"
    assert on_disk["command"] == ["stockr1", "demo", "--seed", "5"]
    assert {"torch", "python"} <= set(on_disk["versions"]) and on_disk["git_commit"]
    assert set(on_disk["stages"]) == {"a", "b", "c"}
    assert on_disk["total_wall_s"] == pytest.approx(sum(s["wall_s"] for s in on_disk["stages"].values()), abs=0.2)


@pytest.mark.parametrize(("wall_s", "words"), [(540.0, "9.0 min wall"), (720.0, "2.0 min over it")])
def test_report_states_the_demo_time_against_its_target(tmp_path: Path, wall_s: float, words: str) -> None:
    from stockr1.pipeline.report import learned

    (tmp_path / "manifest.json").write_text(json.dumps({"total_wall_s": wall_s, "stages": {"a": {}, "b": {}}}))
    text = "\n".join(learned(tmp_path))
    assert words in text and "The target for the default demo is 10 min on 2 idle cores" in text
    assert ("within it" in text) == (wall_s <= 600)
