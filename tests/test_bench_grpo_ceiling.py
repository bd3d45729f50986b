"""`stockr1 bench grpo_ceiling` end to end on the shipped tiny release: what it writes, each half's reading
against the start recomputed from its records, the README's claims read from their intervals, the check's
cached contexts used, and a rerun with more steps that resumes the oracle instead of starting over."""

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from transformers import AutoTokenizer

from benchmarks.grpo_check.ceiling import main, observed_move
from rl.ceiling import gold_sign
from stockr1.metrics.verdict import verdict

ROOT = Path(__file__).parents[1]


def _observed(tmp_path: Path) -> Path:
    """A finished check's summary, as much of it as the ceiling reads."""
    d = tmp_path / "check"
    d.mkdir()
    (d / "summary.json").write_text(json.dumps({"steps": 5, "logodds_split": {"toward_gold": {
        "diff": 0.13, "ci_low": 0.03, "ci_high": 0.23, "verdict": "holds", "level": 0.95}}}))
    return d


def test_observed_move_refuses_a_check_without_its_split(tmp_path) -> None:
    (tmp_path / "summary.json").write_text(json.dumps({"steps": 5, "logodds_split": None}))
    with pytest.raises(ValueError, match="no logodds_split"):
        observed_move(tmp_path)


def test_grpo_ceiling_on_the_tiny_release_writes_its_steps_and_resumes(tmp_path) -> None:
    cfg = {"grpo": {"config": str(ROOT / "configs/grpo/tiny.yaml"),
                    "overrides": {"rollout": {"max_new_tokens": 640}, "train": {"group_size": 2, "lr": 1e-3}}},
           "sft_run_dir": str(ROOT / "release/tiny/sft"), "n_queries": 8, "balance_yes_no": True, "steps": 1,
           "seeds": [0, 1], "answer_contexts": 4, "work_dir": str(tmp_path / "work"), "n_boot": 200}
    path = tmp_path / "ceiling.yaml"
    path.write_text(yaml.safe_dump(cfg))
    # the check's context cache, seeded (as a work dir may be: checkpoints/README.md) with short contexts so the
    # oracle's passes stay cheap; drawing them is the check's own path (its slow test runs it)
    tok = AutoTokenizer.from_pretrained(ROOT / "release/tiny/sft/policy/tokenizer")
    ctx = [{"query": q, "gold": "Yes" if q % 2 else "No", "words": [" Yes", " No"], "given": "Yes",
            "ids": tok.encode(f"Question {q}: will it close higher? Reading {k}: the answer is", add_special_tokens=False)}
           for q in range(8) for k in range(3)]
    cache = tmp_path / "work/probe/answer-contexts-g4.json"
    cache.parent.mkdir(parents=True)
    cache.write_text(json.dumps({"contexts": ctx}))
    obs = _observed(tmp_path)
    out = tmp_path / "out"
    assert main(["--config", str(path), "--out", str(out), "--steps", "2", "--observed", str(obs)]) == 0
    s = json.loads((out / "summary.json").read_text())
    assert [r["step"] for r in s["per_step"]] == [0, 1, 2] and s["seed"] == 0
    assert s["n_contexts"]["train"] + s["n_contexts"]["read"] == len(ctx)
    first = s["per_step"][1]
    assert first["loss"] is not None and first["grad_norm"] > 0 and s["per_step"][-1]["loss"] is None
    for row in s["per_step"][1:]:
        for half in ("read", "train"):
            for side in ("toward_gold", "shared"):
                r = row[half][side]
                assert r["ci_low"] <= r["diff"] <= r["ci_high"] and r["verdict"] == verdict(r["diff"], r["ci_low"], r["ci_high"])
    info = json.loads((out / "run_info.json").read_text())
    assert info["oracle_s"] > 0 and info["timings_s"] == {}  # the contexts came from the cache
    readme = (out / "README.md").read_text()
    t = s["per_step"][-1]["read"]["toward_gold"]
    assert (f"After 2 oracle steps, held-out answers move toward their gold: {t['diff']:+.3f} [{t['ci_low']:+.3f}, "
            f"{t['ci_high']:+.3f}] nats: **{t['verdict']}**") in readme
    assert f"`{obs}` moved its answers toward their golds by +0.13 [+0.03, +0.23] nats over its 5 GRPO steps" in readme

    # more steps on the same work dir: the oracle resumes at step 2 (its first steps' records are kept as they
    # were), and the held-out half's p(gold) at the start is recomputed here from the contexts' golds
    out3 = tmp_path / "out3"
    assert main(["--config", str(path), "--out", str(out3), "--steps", "3"]) == 0
    s3 = json.loads((out3 / "summary.json").read_text())
    assert [r["step"] for r in s3["per_step"]] == [0, 1, 2, 3]
    assert s3["per_step"][1] == s["per_step"][1] and s3["observed"] == []
    assert s3["per_step"][2]["read"] == s["per_step"][2]["read"]
    assert s3["per_step"][2]["loss"] is not None  # step 3 was taken from it
    with pytest.raises(ValueError, match="already 3 steps in"):
        main(["--config", str(path), "--out", str(tmp_path / "out1"), "--steps", "1"])
    # the start's held-out p(gold) by hand from the raw records: per query the mean of sigma(s z) over its
    # contexts, then the golds' means averaged
    rec = json.loads((out3 / "records.json").read_text())
    assert [c["query"] for c in rec["contexts"]] == [c["query"] for c in ctx]
    z0, read = rec["records"][0]["read_logodds"], rec["records"][0]["read"]
    assert s3["per_step"][0]["read"]["n_contexts"] == len(read)
    by_q: dict[int, list[float]] = {}
    for i, z in zip(read, z0, strict=True):
        by_q.setdefault(int(ctx[i]["query"]), []).append(1 / (1 + np.exp(-gold_sign(ctx[i]["gold"]) * z)))
    sign = {int(c["query"]): gold_sign(c["gold"]) for c in ctx}
    p = [np.mean([np.mean(v) for q, v in by_q.items() if sign[q] == g]) for g in (1.0, -1.0)]
    assert s3["per_step"][0]["read"]["p_gold"] == pytest.approx((p[0] + p[1]) / 2, abs=1e-12)
    # and the last step's move toward gold: (mean change on gold-Yes queries - on gold-No ones) / 2
    zk = rec["records"][-1]["read_logodds"]
    d: dict[int, list[float]] = {}
    for i, a, b in zip(read, z0, zk, strict=True):
        d.setdefault(int(ctx[i]["query"]), []).append(b - a)
    move = [np.mean([np.mean(v) for q, v in d.items() if sign[q] == g]) for g in (1.0, -1.0)]
    assert s3["per_step"][-1]["read"]["toward_gold"]["diff"] == pytest.approx((move[0] - move[1]) / 2, abs=1e-12)
