"""benchmarks.qa.targets and llm.qa.baselines.family_differences: issue 31's targets read off intervals."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.qa.targets import family_comparisons, targets, targets_md
from llm.qa.baselines import family_differences
from llm.qa.core import QAItem


def item(i: int, family: str, template: str = "t", answer: str = "Yes") -> QAItem:
    return QAItem(id=f"q{i}", family=family, template=template, question="?", answer=answer, answer_type="yes_no",
                  window=0, ticker="X", date="2020-01-02", split="test", choices=("Yes", "No"))


def test_family_differences_by_hand_and_their_verdicts() -> None:
    # event: policy 3/4, majority 1/4 -> +50; news: policy 1/2, majority 1/2 -> 0; overall = mean of families
    items = [item(i, "event") for i in range(4)] + [item(4 + i, "news") for i in range(2)]
    pol = np.array([1, 1, 1, 0, 1, 0])
    maj = np.array([1, 0, 0, 0, 0, 1])
    ident = [np.arange(6)] * 3  # resamples that all equal the data: every interval collapses to its point
    d = family_differences(items, pol, maj, ident)
    assert d["event"]["diff"] == pytest.approx(50.0) and d["event"]["verdict"] == "holds"
    assert d["news"]["diff"] == pytest.approx(0.0) and d["news"]["verdict"] == "tie"
    assert d["overall"]["diff"] == pytest.approx(25.0)
    # resamples that drop the event questions leave that family out of those draws, not at 0
    only_news = [np.array([4, 5, 4, 5])] * 2 + [np.arange(6)]
    d2 = family_differences(items, pol, maj, only_news)
    assert d2["event"]["ci_lo"] == pytest.approx(50.0) and d2["event"]["ci_hi"] == pytest.approx(50.0)
    # a family no resample draws has no interval: undecided, and the overall difference still gets one
    never = family_differences(items, pol, maj, [np.array([4, 5])] * 3)
    assert never["event"]["verdict"] == "undecided" and np.isnan(never["event"]["ci_lo"])
    assert never["overall"]["verdict"] in {"holds", "tie", "worse"}
    # swapping the answerers flips every sign and the verdict
    assert family_differences(items, maj, pol, ident)["event"]["verdict"] == "worse"


def _comp(items, pol, base, rs):
    comp = family_comparisons(items, pol, base, rs)
    comp["reader_accuracy"] = {b: 100 * float(h.mean()) for b, h in base.items() if b.startswith("tool_reader_")}
    return comp


def test_targets_name_the_families_a_reader_beats_and_the_policy_misses() -> None:
    items = [item(i, "event") for i in range(4)] + [item(4 + i, "news") for i in range(4)]
    rs = [np.arange(8)] * 5
    base = {"majority": np.array([0, 0, 0, 0, 1, 1, 0, 0]),
            "tool_reader_a": np.array([1, 1, 1, 0, 1, 1, 0, 0]),  # beats majority on event only
            "tool_reader_b": np.array([0, 0, 0, 0, 1, 1, 0, 0])}
    pol = np.array([0, 0, 0, 0, 1, 1, 1, 0])  # ties majority on event, beats it on news
    comp = _comp(items, pol, base, rs)
    metrics = {"action_and_answer_rate": 96.0, "start_value_read_rate": 80.0}
    rows = {r["target"].split(" (")[0].split(" on >=")[0]: r for r in targets(metrics, comp)}
    assert rows["protocol"]["met"] == "yes"
    assert rows["`start_value` = last close"]["met"] == "no"
    assert rows["above majority overall, beyond the interval"]["met"] == "yes"  # +12.5 with a point interval
    fam = rows["above majority on every family where a tool-reader is"]
    assert fam["met"] == "no (1 of 1)" and fam["measured"].startswith("Event Detection +0.0")
    best = next(r for k, r in rows.items() if k.startswith("within 3 points"))
    assert "tool_reader_a" in best["target"] and best["met"] == "no"  # policy 37.5 vs reader 62.5: -25
    spread = [{"template": "t", "family": "event", "n": 4, "constant": True, "policy": {"Yes": 4}},
              {"template": "u", "family": "news", "n": 2, "constant": False, "policy": {"Yes": 1, "No": 1}}]
    text = "\n".join(targets_md("p", targets(metrics, comp), comp, spread, {"event": 4, "news": 4}))
    assert "- Event Detection: +0.0 [+0.0, +0.0] tie" in text and "t: always Yes" in text
    assert "- News Analysis: +25.0" in text and "2 numeric questions" in text


def test_no_family_to_meet_when_no_reader_beats_majority() -> None:
    items = [item(i, "event") for i in range(4)]
    rs = [np.arange(4)] * 3
    base = {"majority": np.array([1, 1, 0, 0]), "tool_reader_a": np.array([1, 0, 1, 0])}
    comp = _comp(items, np.array([1, 1, 1, 0]), base, rs)
    rows = targets({"action_and_answer_rate": 90.0, "start_value_read_rate": 95.0}, comp)
    assert rows[0]["met"] == "no" and rows[1]["met"] == "yes"
    assert rows[3]["met"] == "nothing to meet"
    assert rows[4]["met"] == "yes (point estimate)"  # +25 above the reader


def test_own_trajectory_paragraph_says_how_often_the_answer_follows_it() -> None:
    items = [item(i, "event") for i in range(4)]
    rs = [np.arange(4)] * 3
    comp = _comp(items, np.array([1, 0, 0, 0]), {"majority": np.array([1, 1, 0, 0])}, rs)
    comp["own_trajectory"] = {"readable": 4, "n": 4, "follows_rate": 50.0,
                              "accuracy": {"acc": 75.0, "ci_lo": 70.0, "ci_hi": 80.0},
                              "policy_minus": {"diff": -50.0, "ci_lo": -60.0, "ci_hi": -40.0, "verdict": "worse"}}
    rows = targets({"action_and_answer_rate": 100.0, "start_value_read_rate": 100.0}, comp)
    text = "\n".join(targets_md("p", rows, comp, [], {"event": 4}))
    assert "in 50.0% of the 4 rollouts with a readable observation" in text
    assert "would score 75.0 [70.0, 80.0]; the policy − that: -50.0 [-60.0, -40.0] worse" in text
