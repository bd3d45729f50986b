"""`stockr1 bench ablation_reach` (benchmarks.ablation.reach): an oracle tool's reader scores full marks on
answer and action, a reader reads its item's own window, gains and their verdict words by hand, and the
SFT rollouts come only from a `bench qa` folder of the same run."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks.ablation.reach import (
    Answerer,
    compare_rows,
    conclusion,
    consensus_actions,
    reader_row,
    readme,
    sft_pairs,
    sft_row,
    stored_sft,
)
from benchmarks.qa.reuse import StoredRollout
from forecast_action.derive import ActionThresholds, actions_from_windows
from llm.qa import QAConfig, QAGenerator
from llm.qa.tool_reader import ToolReader
from stockr1.types import Windows, train_only
from tests.test_qa_generator import make_windows
from tests.test_qa_tool_reader import _oracle


def _setup(n_test: int = 60):
    w = make_windows()
    items, _ = QAGenerator(w).generate(QAConfig(n_train=0, n_val=0, n_test=n_test))
    th = ActionThresholds.fit(train_only(w))
    targets = actions_from_windows(w.select(np.array([it.window for it in items])), th)
    return w, items, th, targets


def test_an_oracle_tools_reader_answers_and_acts_with_full_marks() -> None:
    w, items, th, targets = _setup()
    reader = ToolReader(_oracle, w, items)
    row = reader_row("oracle", [(reader, consensus_actions(reader, th))] * 2, items, targets, own_tool=False)
    assert row.qa.shape == row.action.shape == (2, len(items))
    assert row.qa.min() == 1.0
    np.testing.assert_allclose(row.action, 1.0)
    # the reader must read each item's own window: with the futures rolled, the action scores fall
    perm = np.roll(np.arange(len(w)), 7)
    shuffled = Windows(w.ticker, w.date, w.x, w.y, w.hist, w.future[perm], w.split, w.context)
    rolled = ToolReader(_oracle, shuffled, items)
    wrong = reader_row("rolled", [(rolled, consensus_actions(rolled, th))], items, targets, own_tool=False)
    assert wrong.action.mean() < 0.9 and wrong.qa.mean() < 1.0


def test_sft_row_grades_answers_and_actions_like_the_ablation() -> None:
    _, items, _, targets = _setup(4)
    pairs = [(items[0], StoredRollout("", items[0].answer, targets[0], 10)),  # right answer, a* itself
             (items[1], StoredRollout("", None, None, 10))]  # nothing parsed: wrong, action score 0
    row = sft_row(pairs, targets[:2])
    np.testing.assert_allclose(row.qa, [[1.0, 0.0]])
    np.testing.assert_allclose(row.action, [[1.0, 0.0]])


def _rows() -> list[Answerer]:
    sft = np.tile([1.0, 0.0], 50)[None]  # 50% right, 100 questions
    return [Answerer("sft", "start", sft, sft * 0.5, own_tool=True),
            Answerer("same", "as sft", np.repeat(sft, 2, 0), np.repeat(sft * 0.5, 2, 0), own_tool=True),
            Answerer("better", "draws 100% and 50%", np.stack([np.ones(100), sft[0]]), None, own_tool=False)]


def test_gains_over_sft_by_hand_with_draws_as_seeds() -> None:
    res = compare_rows(_rows(), n_boot=500)
    qa = res["qa_acc"]
    assert qa["sft"]["value"] == pytest.approx(50.0) and "minus_sft" not in qa["sft"]
    assert qa["same"]["minus_sft"]["diff"] == pytest.approx(0.0) and qa["same"]["minus_sft"]["verdict"] == "tie"
    assert qa["better"]["value"] == pytest.approx(75.0)
    assert qa["better"]["draw_std"] == pytest.approx(np.std([100.0, 50.0], ddof=1))
    assert qa["better"]["minus_sft"]["diff"] == pytest.approx(25.0)
    # its draws disagree (+50 and 0 over sft): resampling the draws reaches 0, so the gain is a tie
    assert qa["better"]["minus_sft"]["ci_low"] == pytest.approx(0.0) and qa["better"]["minus_sft"]["verdict"] == "tie"
    assert "better" not in res["action_acc"]  # a row without actions has no action gain
    assert res["action_acc"]["same"]["value"] == pytest.approx(25.0)


def _metrics(own: str, other: str) -> dict:
    def gain(v: str) -> dict:
        return {"diff": 5.0, "ci_low": 1.0 if v == "holds" else -1.0, "ci_high": 9.0, "verdict": v}
    return {m: {"sft": {"own_tool": True},
                "reader_decoder": {"own_tool": True, "minus_sft": gain(own)},
                "reader_garch": {"own_tool": False, "minus_sft": gain(other)}} for m in ("qa_acc", "action_acc")}


def test_the_conclusion_reads_the_verdicts_of_own_and_other_tools() -> None:
    own = "\n".join(conclusion(_metrics("holds", "tie"), 300, 50.7))
    assert "within reach through the policy's own tool" in own and "50.7%" in own
    other = "\n".join(conclusion(_metrics("tie", "holds"), 300, 50.7))
    assert "own tool does not carry enough" in other and "**holds** for `reader_garch`" in other
    assert "no gain over SFT holds" in other and "+5.0 [-1.0, +9.0] tie" in other
    none = "\n".join(conclusion(_metrics("tie", "tie"), 300, 50.7))
    assert "no tool here carries enough" in none and "**holds** for" not in none


def test_the_readme_is_generated_from_the_summary() -> None:
    rows = _rows()
    close = np.ones((2, 100))
    close[1, :10] = 0.0  # draws at 100% and 90%
    rows[2] = Answerer("better", "draws 100% and 90%", close, None, own_tool=False)
    res = compare_rows(rows, n_boot=200)
    for m in res.values():  # "better" is another tool; "same" stands for the policy's own
        for name, rec in m.items():
            rec["own_tool"] = name != "better"
    summary = {"command": "stockr1 bench ablation_reach ...", "commit": "0123456789ab", "date": "2026-12-05",
               "qa_dir": "results/qa", "reader_draws": 2, "n_boot": 200,
               "start": {"sft_run_dir": "release/x/sft", "policy_base": "pypi:x", "sft_release_hash": "abcdef0123456"},
               "slices": {"ablation": {"label": "the ablation's questions", "n": 100, "follows_rate": 40.0,
                                       "metrics": res}}}
    text = readme(summary)
    assert "| `better` | draws 100% and 90% | 95.0 ± 7.1 | +45.0 [" in text
    assert "**holds** for `better`" in text and "own tool does not carry enough" in text


def test_sft_rollouts_come_only_from_a_qa_folder_of_the_same_run(tmp_path) -> None:
    _, items, _, targets = _setup(4)
    with pytest.raises(FileNotFoundError, match="not a `stockr1 bench qa` output folder"):
        stored_sft(tmp_path, "abc")
    (tmp_path / "reuse.json").write_text(json.dumps({"fingerprints": {"sft-row": "abc", "other": "def"}}))
    recs = [{"policy": "sft-row", "id": it.id, "completion": "c", "model_answer": it.answer, "n_generated": 3,
             "action": targets[0].model_dump(exclude_none=True)} for it in items[:3]]
    recs.append({"policy": "other", "id": items[3].id, "completion": "c", "model_answer": None, "n_generated": 3,
                 "action": None})  # another row's rollout is not the start's
    (tmp_path / "rollouts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    with pytest.raises(ValueError, match="no policy row"):
        stored_sft(tmp_path, "other-run")
    row, stored = stored_sft(tmp_path, "abc")
    assert row == "sft-row" and set(stored) == {it.id for it in items[:3]}
    with pytest.raises(ValueError, match="lacks 1 of the 4 questions"):
        sft_pairs(row, stored, items)
    pairs = sft_pairs(row, stored, items[2::-1])  # by id, in the order asked
    assert [it.id for it, _ in pairs] == [it.id for it in items[2::-1]]
    assert pairs[0][1].answer == items[2].answer and pairs[0][1].action == targets[0]
