"""benchmarks.qa.answers: per-template answer counts, and the 'one answer throughout' diagnosis."""

from __future__ import annotations

from types import SimpleNamespace

from benchmarks.qa.answers import answer_spread, spread_md
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


def test_own_trajectory_reads_the_observation_the_policy_was_shown() -> None:
    """The answer a rollout's own ``<forecast_ts>`` path implies, and whether the policy gave it."""
    import numpy as np

    from benchmarks.qa.answers import follows_rate, own_trajectory_answers
    from forecast_action.render import render_observation
    from llm.qa import TEMPLATES_BY_KEY, QAGenerator
    from stockr1.types import CLOSE, VOLUME, Forecast
    from tests.test_qa_generator import context_fn, fixed_windows

    w = fixed_windows()
    pct = QAGenerator(w, context_fn).make_item(0, TEMPLATES_BY_KEY["fq_pct_change_paper"], {"x": 3}, "test", "b")
    fut = w.future[:1, :, CLOSE]  # 99 97 101 ... from today's close 100: the 3-day change is +1.00%
    fc = Forecast(close=fut, close_samples=fut[:, None], high=fut, low=fut, volume=w.future[:1, :, VOLUME])
    obs = render_observation(fc, 0)
    said = lambda answer, text=obs: SimpleNamespace(completion=f"rationale <forecast_action>{{}}</forecast_action>\n"  # noqa: E731
                                                    f"{text}\nreasoning <answer>{answer}</answer>", answer=answer)
    pairs = [(pct, said("1.00")), (pct, said("-3.00")), (pct, SimpleNamespace(completion="no tool call", answer="1.00"))]
    implied = own_trajectory_answers(pairs, w)
    assert implied == ["1.00", "1.00", None]
    assert follows_rate(pairs, implied) == 50.0  # of the two rollouts with an observation, one answered it
    # a different observed path implies a different answer: it is read from the text, not from the data
    up = fut * np.linspace(1.0, 1.1, fut.shape[1])
    fc_up = Forecast(close=up, close_samples=up[:, None], high=up, low=up, volume=w.future[:1, :, VOLUME])
    assert own_trajectory_answers([(pct, said("x", render_observation(fc_up, 0)))], w) != ["1.00"]
