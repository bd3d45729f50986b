"""benchmarks.qa_answers: per-template answer counts, and the 'one answer throughout' diagnosis."""

from __future__ import annotations

from types import SimpleNamespace

from benchmarks.qa_answers import answer_spread, spread_md
from llm.qa.core import QAItem


def item(i: int, template: str, answer: str, answer_type: str = "yes_no") -> QAItem:
    return QAItem(id=f"q{i}", family="event", template=template, question="?", answer=answer,
                  answer_type=answer_type, window=0, ticker="X", date="2020-01-02", split="test",
                  choices=("Yes", "No") if answer_type != "numeric" else ())


def test_a_constant_minority_answer_is_named_and_a_varying_one_is_not() -> None:
    gold = ["No", "No", "Yes"]
    pairs = [(item(i, "always_yes", g), SimpleNamespace(answer="Yes")) for i, g in enumerate(gold)]
    answers = ["No", "Yes", "Yes"]
    pairs += [(item(10 + i, "varies", g), SimpleNamespace(answer=a))
              for i, (g, a) in enumerate(zip(gold, answers, strict=True))]
    pairs += [(item(20, "numeric", "1.5", "numeric"), SimpleNamespace(answer="2.0"))]  # left out
    rows = answer_spread(pairs, reference=lambda it: "No")
    assert [r["template"] for r in rows] == ["always_yes", "varies"]
    always, varies = rows
    assert always["gold"] == {"No": 2, "Yes": 1} and always["policy"] == {"Yes": 3} and always["constant"]
    assert varies["policy"] == {"Yes": 2, "No": 1} and not varies["constant"]
    assert always["reference"] == {"No": 3}
    text = "\n".join(spread_md("p", rows))
    assert "In 1 of 2 such templates (3 of 6 questions) `p` gave one answer" in text
    assert "In 1 of them that answer is never the majority baseline's" in text
    assert "| always_yes (one answer) | event | 3 | No 2, Yes 1 | Yes 3 | No 3 |" in text
    # the constant answer is the majority's: not counted as off the majority
    assert "In 0 of them" in "\n".join(spread_md("p", answer_spread(pairs, reference=lambda it: "Yes")))
