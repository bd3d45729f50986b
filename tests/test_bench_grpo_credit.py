"""`stockr1 bench grpo_credit` end to end on the shipped tiny release: what it writes, verdicts read from
the intervals, and a rerun that reuses the cached draws."""

import json
from pathlib import Path

import yaml

from benchmarks.grpo_check.credit import (
    CREDIT_CONTRASTS,
    CREDIT_PART,
    PARTS,
    compared_credits,
    main,
    split_moves,
)
from stockr1.metrics.verdict import verdict

ROOT = Path(__file__).parents[1]


def test_split_moves_by_hand() -> None:
    # Yes queries move +1.0 and +3.0 (mean 2), No queries -1.0 (mean -1): toward gold (2 + 1) / 2, shared (2 - 1) / 2
    got = split_moves({"0": 1.0, "1": 3.0, "2": -1.0}, {"yes": [0, 1], "no": [2]})
    assert got == {"toward_gold": 1.5, "shared": 0.5}


def test_grpo_credit_on_the_tiny_release_writes_its_split_and_reuses_its_draws(tmp_path) -> None:
    cfg = {"grpo": {"config": str(ROOT / "configs/grpo/tiny.yaml"),
                    "overrides": {"rollout": {"max_new_tokens": 640}, "train": {"micro_batch": 8, "group_size": 2}}},
           "sft_run_dir": str(ROOT / "release/tiny/sft"), "n_queries": 8, "balance_yes_no": True, "steps": 1,
           "seeds": [0, 1], "answer_contexts": 1, "work_dir": str(tmp_path / "work"), "n_boot": 200}
    path = tmp_path / "credit.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "out"
    assert main(["--config", str(path), "--out", str(out), "--contexts-per-query", "1"]) == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["golds"] == {"yes": 4, "no": 4} and s["seeds"] == [0, 1] and s["lr"] > 0
    for p in PARTS:
        for kind in ("applied", "first_order"):
            for side in ("toward_gold", "shared"):
                r = s["parts"][p][kind][side]
                assert r["ci_low"] <= r["diff"] <= r["ci_high"]
                assert r["verdict"] == verdict(r["diff"], r["ci_low"], r["ci_high"])
    g = s["geometry"]
    assert all(0 < x < 0.2 for x in g["decision_token_share"])  # a few answer tokens among hundreds
    assert all(-1 <= c <= 1 for c in g["cos_full_decision"] + g["cos_full_rest"])
    readme = (out / "README.md").read_text()
    for p in PARTS:  # each generated claim carries the verdict of its own interval
        t = s["parts"][p]["applied"]["toward_gold"]
        assert f"{t['diff']:+.4f} [{t['ci_low']:+.4f}, {t['ci_high']:+.4f}] nats: **{t['verdict']}**" in readme
    # the same batch under each compared credit: the config's own (sequence) is the step's update itself,
    # the answer-span credits move the answers otherwise, and the README reads each from its interval
    assert [p for p in s["parts"] if p.startswith(CREDIT_PART)] == list(compared_credits(0.5))
    assert s["credit"] == "sequence"
    assert s["parts"]["credit:sequence"] == s["parts"]["full"]
    span, cancel = (s["parts"][f"credit:{c}"]["applied"]["toward_gold"] for c in ("answer_span", "answer_span,cancel"))
    assert span["diff"] != s["parts"]["full"]["applied"]["toward_gold"]["diff"] and cancel["diff"] != span["diff"]
    assert (f"under answer_span, answer prior cancelled credit: {cancel['diff']:+.4f} [{cancel['ci_low']:+.4f}, "
            f"{cancel['ci_high']:+.4f}] nats: **{cancel['verdict']}**") in readme
    for p in s["parts"]:  # the linear reading: every part, its own interval and verdict
        r = s["parts"][p]["linear"]["toward_gold"]
        assert r["ci_low"] <= r["diff"] <= r["ci_high"] and r["verdict"] == verdict(r["diff"], r["ci_low"], r["ci_high"])
    assert "update linear in the gradient" in readme
    lin, app = s["parts"]["full"]["linear"], s["parts"]["full"]["applied"]  # beside each other, per seed and pooled
    k = str(s["seeds"][0])
    assert (f"seed {k} toward gold {lin['per_seed'][k]['toward_gold']:+.3f} "
            f"({app['per_seed'][k]['toward_gold']:+.3f})") in readme
    t = lin["toward_gold"]
    assert f"the linear update {t['diff']:+.4f} [{t['ci_low']:+.4f}, {t['ci_high']:+.4f}]" in readme
    for p in s["parts"]:  # per seed, the split of each seed's moves averages to the interval's point estimate
        r = s["parts"][p]["applied"]
        for side in ("toward_gold", "shared"):
            mean = sum(v[side] for v in r["per_seed"].values()) / len(r["per_seed"])
            assert abs(mean - r[side]["diff"]) < 1e-9
    for hi, lo in CREDIT_CONTRASTS:  # paired per (seed, query): the difference of the means, its own interval
        r = s["credit_differences"][f"{hi} - {lo}"]
        for side in ("toward_gold", "shared"):
            want = s["parts"][hi]["applied"][side]["diff"] - s["parts"][lo]["applied"][side]["diff"]
            assert abs(r[side]["diff"] - want) < 1e-9 and r[side]["ci_low"] <= r[side]["diff"] <= r[side]["ci_high"]
    draws = sorted((tmp_path / "work" / "credit").glob("draw-s*.json"))
    assert [d.name for d in draws] == ["draw-s0.json", "draw-s1.json"]
    before = {d: d.stat().st_mtime_ns for d in draws}
    assert main(["--config", str(path), "--out", str(out), "--overwrite", "--contexts-per-query", "1"]) == 0
    assert {d: d.stat().st_mtime_ns for d in draws} == before  # cached: not drawn again
    assert json.loads((out / "summary.json").read_text())["parts"] == s["parts"]
