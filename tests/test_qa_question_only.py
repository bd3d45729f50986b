"""QA answers balanced within each parameter cell; question-only baselines fitted on train only,
checked by hand; single-answer templates; the no-policy `bench qa_baselines` command."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import yaml

from llm.qa import TEMPLATES_BY_KEY, QAConfig, QAGenerator, QAItem, is_correct
from llm.qa.baselines import baseline_report
from llm.qa.question_only import (
    QuestionOnlyClassifier,
    QuestionOnlyLookup,
    cell_spread,
    single_answer_templates,
    tolerance_mode,
)
from stockr1.metrics.stats import wilson_interval
from tests.test_qa_generator import context_fn, make_windows


def generate(balance: str, seed: int = 0) -> list[QAItem]:
    cfg = QAConfig(n_train=300, n_val=50, n_test=100, seed=seed, balance=balance)
    return QAGenerator(make_windows(), context_fn).generate(cfg)[0]


def test_answers_balanced_within_every_cell() -> None:
    """Every (template, parameters) cell of every split: answer classes differ by at most one item.
    The earlier per-template sampler fails this (e.g. "rise > 5% within 3 days" is all No)."""
    items = generate("cell")
    assert len(items) == 450
    for split in ("train", "val", "test"):
        spread = cell_spread([it for it in items if it.split == split])
        assert spread and max(spread.values()) <= 1, (split, {c: s for c, s in spread.items() if s > 1})
    old = cell_spread([it for it in generate("template") if it.split == "train"])
    assert max(old.values()) > 1


def test_balanced_generation_is_deterministic_and_point_in_time() -> None:
    a, b = generate("cell"), generate("cell")
    assert a == b
    assert a != generate("cell", seed=1)
    assert len({(it.window, it.template, tuple(sorted(it.params.items()))) for it in a}) == len(a)
    w = make_windows()
    for it in a[:40]:  # the text is the decision-time rendering; the answer is the realised label
        t = TEMPLATES_BY_KEY[it.template]
        assert QAGenerator(w, context_fn).make_item(it.window, t, it.params, it.split, it.id) == it


def test_numeric_answer_class_is_a_tolerance_wide_bin() -> None:
    pct, mdd = TEMPLATES_BY_KEY["fq_pct_change_paper"], TEMPLATES_BY_KEY["fq_mdd_paper"]
    p = {"x": 3}  # pct tol 0.35*sqrt(3) = 0.61 -> bins of 1.22; mdd tol 0.52 -> bins of 1.04
    assert [pct.answer_class(v, p) for v in ("-5.00", "-1.50", "-0.10", "0.00", "1.21", "1.23")] == [
        "bin-2", "bin-2", "bin-1", "bin0", "bin0", "bin1"]
    assert [mdd.answer_class(v, p) for v in ("0.00", "1.03", "1.05", "3.20", "9.00")] == [
        "bin0", "bin0", "bin1", "bin3", "bin3"]
    assert mdd.answer_classes() == ("bin0", "bin1", "bin2", "bin3") and len(pct.answer_classes()) == 4


def item(template: str, params: dict, answer: str, split: str = "train", n: int = 0) -> QAItem:
    t = TEMPLATES_BY_KEY[template]
    return QAItem(id=f"{split}-{template}-{n}", family=t.family, template=template, question="?", answer=answer,
                  answer_type=t.answer_type, window=0, ticker="X", date="2020-01-01", split=split,
                  choices=t.choices, tolerance=t.tol(params), params=params)


HAND = [
    *(item("ev_drop_paper", {"x": 3, "k": 1}, a, n=n) for n, a in enumerate(["Yes", "Yes", "No"])),
    *(item("ev_drop_paper", {"x": 3, "k": 5}, a, n=10 + n) for n, a in enumerate(["No", "No"])),
    *(item("ev_close_above", {"x": 3}, a, n=n) for n, a in enumerate(["Yes", "No"])),
    *(item("fq_pct_change_paper", {"x": 3}, a, n=n) for n, a in enumerate(["1.00", "2.00", "4.00"])),
]


def test_lookup_by_hand() -> None:
    q = QuestionOnlyLookup().fit(HAND)
    assert q.answer(item("ev_drop_paper", {"x": 3, "k": 1}, "No", "test")) == "Yes"  # cell 2 of 3
    assert q.answer(item("ev_drop_paper", {"x": 3, "k": 5}, "Yes", "test")) == "No"
    assert q.answer(item("ev_close_above", {"x": 3}, "Yes", "test")) == "No"  # 1-1 tie: alphabetical
    assert q.answer(item("ev_drop_paper", {"x": 10, "k": 2}, "Yes", "test")) == "No"  # template: 2 Yes, 3 No
    assert q.answer(item("ev_rise_paper", {"x": 3, "k": 1}, "Yes", "test")) == "No"  # yes/no overall: 3 vs 4
    assert q.answer(item("fq_pct_change_paper", {"x": 3}, "0.00", "test")) == "2.00"  # median


def test_classifier_by_hand() -> None:
    """Tolerance mode: the window [1.00, 2.22] holds two of {1, 2, 4}: guess 1.61 (tol 0.61).
    Logistic regression with k standardised to -1/+1 and 3:1 / 1:3 answers: P(Yes) = 3/4, 1/4, and
    1/2 at the unseen middle value (logit a + b·z with a = 0, b = ln 3)."""
    assert tolerance_mode([1.0, 2.0, 4.0], 0.61) == "1.61"
    num = [it for it in HAND if it.answer_type == "numeric"]
    clf = QuestionOnlyClassifier(l2=0.0, lr=1.0, steps=3000)
    train = num + [item("ev_drop_paper", {"x": 3, "k": k}, a, n=n)
                   for k, answers in ((1, "Yes Yes Yes No"), (5, "No No No Yes")) for n, a in enumerate(answers.split())]
    clf.fit(train)
    guess = clf.answer(item("fq_pct_change_paper", {"x": 3}, "1.00", "test"))
    assert guess == "1.61" and all(is_correct(it, guess) for it in num[:2]) and not is_correct(num[2], guess)
    probe = [item("ev_drop_paper", {"x": 3, "k": k}, "Yes", "test") for k in (1, 3, 5)]
    p_yes = clf.proba(probe)[:, clf.classes.index("Yes")]
    np.testing.assert_allclose(p_yes, [0.75, 0.5, 0.25], atol=0.01)
    assert [clf.answer(it) for it in (probe[0], probe[2])] == ["Yes", "No"]
    # the middle value is a tie to within float rounding: it goes to the first class in sorted order, "No"
    assert clf.classes[:2] == ["No", "Yes"] and clf.answer(probe[1]) == "No"


def other_answer(it: QAItem) -> str:
    """A different answer of the same kind (next choice, or the number moved by 3)."""
    if not it.choices:
        return f"{float(it.answer) + 3:.2f}"
    return it.choices[(it.choices.index(it.answer) + 1) % len(it.choices)]


def test_question_only_fits_on_train_only() -> None:
    """Fitting on non-train items is refused; the fit (from the split's train items, as `bench qa`
    selects them) and every test prediction are unchanged when all test answers change."""
    items = generate("template")
    perturbed = [dataclasses.replace(it, answer=other_answer(it)) if it.split == "test" else it for it in items]
    test = [it for it in items if it.split == "test"]
    for cls in (QuestionOnlyLookup, QuestionOnlyClassifier):
        with pytest.raises(ValueError, match="train items only"):
            cls().fit(items)
        a = cls().fit([it for it in items if it.split == "train"])
        b = cls().fit([it for it in perturbed if it.split == "train"])
        assert [a.answer(it) for it in test] == [b.answer(it) for it in perturbed if it.split == "test"]
    a, b = (QuestionOnlyLookup().fit([it for it in s if it.split == "train"]) for s in (items, perturbed))
    assert a.by_cell == b.by_cell and a.by_template == b.by_template


def test_single_answer_templates() -> None:
    items = [item("nw_negative_recover_paper", {"x": x}, "Yes", "test", x) for x in (3, 5, 10)]
    items += [item("ev_close_above", {"x": 3}, a, "test", n) for n, a in enumerate(["Yes", "No"])]
    items += [item("fq_mdd_paper", {"x": 3}, a, "test", n) for n, a in enumerate(["0.00", "0.80"])]  # one bin
    assert single_answer_templates(items) == {"fq_mdd_paper": "bin0", "nw_negative_recover_paper": "Yes"}


def test_baseline_report_intervals_and_counts() -> None:
    w = make_windows()
    items = generate("cell")
    train, test = [i for i in items if i.split == "train"], [i for i in items if i.split == "test"]
    rep = baseline_report(train, test, w, n_boot=200)
    assert sum(rep["counts"].values()) == rep["n"] == len(test)
    assert set(rep["rows"]) == {"majority", "random_walk", "question_only_lookup", "question_only_classifier"}
    for rows in rep["rows"].values():
        for fam, r in rows.items():
            assert r["ci_lo"] <= r["acc"] <= r["ci_hi"]
            if fam != "overall":
                k = round(r["acc"] * r["n"] / 100)
                assert (r["wilson_lo"], r["wilson_hi"]) == pytest.approx(
                    tuple(100 * v for v in wilson_interval(k, r["n"])))
    assert rep["single_answer_templates"] == {}
    assert wilson_interval(8, 10) == pytest.approx((0.4902, 0.9433), abs=1e-4)


def test_bench_qa_baselines_command(tmp_path) -> None:
    from benchmarks.qa.baselines import main

    data = {"source": "synthetic", "n_tickers": 2, "n_days": 400, "seed": 0, "lookback": 90, "horizon": 10}
    cfg = tmp_path / "sft.yaml"
    cfg.write_text(yaml.safe_dump({"data": data, "qa": {"n_train": 150, "n_val": 0, "n_test": 40, "seed": 0}}))
    out = tmp_path / "out"
    assert main(["--config", str(cfg), "--n-test", "60", "--n-eval", "30", "--n-boot", "50", "--out", str(out)]) == 0
    m = json.loads((out / "metrics.json").read_text())
    assert list(m["sets"]) == ["before_config", "before", "after"]
    assert m["sets"]["before_config"]["n_evaluated"] == 30 and m["sets"]["after"]["report"]["n"] == 60
    assert m["sets"]["after"]["qa"]["balance"] == "cell" and m["sets"]["before"]["qa"]["balance"] == "template"
    assert m["sets"]["after"]["cell_balance"]["test_cells_off_by_more_than_1"] == 0
    assert set(m["target_by_family"]) == set(m["sets"]["after"]["report"]["counts"])
    text = (out / "README.md").read_text()
    assert "Generated by `stockr1 bench qa_baselines" in text and "## after" in text
