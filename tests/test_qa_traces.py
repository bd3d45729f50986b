"""Cold-start traces: executed trajectory (not the realised future), filters, masks, teachers."""

from __future__ import annotations

import numpy as np

from forecast_action.derive import ActionThresholds
from forecast_action.render import render_observation
from llm.qa import QAConfig, QAGenerator
from llm.qa.prompt import answer_options, user_message
from llm.tools import ForecastTool
from llm.traces import (
    RECALL,
    OpenAITeacher,
    TemplateTeacher,
    TraceConfig,
    TraceWriter,
    load_traces,
    save_traces,
)
from stockr1.types import Forecast, Windows, train_only
from tests.test_qa_generator import context_fn, make_windows


class LinearDecoder:
    """Stand-in for ActionConditionedDecoder: a straight close path from start to the action's end."""

    def __init__(self, bias: float = 0.0) -> None:
        self.bias = bias
        self.calls = 0

    def forecast(self, windows: Windows, actions: list, n_samples: int = 8, generator=None) -> Forecast:
        self.calls += 1
        n, s = windows.future.shape[:2]
        start = windows.last_close
        end = np.array([a.end_value for a in actions]) * (1 + self.bias)
        close = start[:, None] + (end - start)[:, None] * np.arange(1, s + 1)[None] / s
        vol = np.repeat(windows.last_volume[:, None], s, 1)
        return Forecast(close, np.repeat(close[:, None], n_samples, 1), close * 1.01, close * 0.99, vol)


def render(fc: Forecast, i: int, error: str | None = None) -> str:
    """The compact layout, whatever the decoder stand-in carries (what the SFT and bench tests tokenise)."""
    return render_observation(fc, i, error, style="compact")


def setup(n: int = 60):
    w = make_windows()
    items, _ = QAGenerator(w, context_fn).generate(QAConfig(n_train=n, n_val=0, n_test=0, seed=3))
    return w, items, ActionThresholds.fit(train_only(w))


def test_traces_use_executed_trajectory_and_filter() -> None:
    w, items, th = setup()
    dec = LinearDecoder()
    traces, rep = TraceWriter(w, ForecastTool(dec, w, 8), th, context_fn=context_fn,
                              cfg=TraceConfig(drop_trivial=False)).write(items)
    assert rep.n_items == len(items) and rep.kept == len(traces) > 0
    assert rep.kept + sum(rep.dropped.values()) == len(items)
    assert rep.dropped["trajectory_contradicts_answer"] > 0  # a straight line cannot support every answer
    fc_close = dec.forecast(w.select(np.array([traces[0].window])), [_action(traces[0])], 8).close[0]
    t = traces[0]
    (before, m0), (obs, m1), (after, m2) = t.segments
    assert (m0, m1, m2) == (True, False, True)
    assert before.endswith("</forecast_action>") and obs.startswith("\n<forecast_ts>")
    used = [j for j, v in enumerate(fc_close) if f"{v:.2f}" in after]  # the decoder's numbers...
    assert used and all(f"{fc_close[j]:.2f}" in obs for j in used), after
    real = w.future[t.window, :, 3]
    for j in used:  # ...never the realised future's
        assert f"{real[j]:.2f}" not in after or abs(real[j] - fc_close[j]) < 0.005
    assert after.rstrip().endswith(f"<answer>{t.answer}</answer>")
    assert f"{w.hist[t.window, -1, 3]:.2f}" in before  # the rationale cites the context
    assert "Question:" in t.user and "<answer>" not in t.user


def _action(trace):
    from forecast_action.schema import ForecastAction

    return ForecastAction(**trace.action)


def test_trivial_filter_and_roundtrip(tmp_path) -> None:
    w, items, th = setup()
    all_, rep_all = TraceWriter(w, ForecastTool(LinearDecoder(), w, 8), th, context_fn=context_fn,
                                cfg=TraceConfig(drop_trivial=False)).write(items)
    some, rep = TraceWriter(w, ForecastTool(LinearDecoder(), w, 8), th, context_fn=context_fn).write(items)
    assert rep.dropped["trivial_random_walk"] > 0 and len(some) == len(all_) - rep.dropped["trivial_random_walk"]
    assert load_traces(save_traces(some, tmp_path / "t.jsonl")) == some


def test_openai_teacher_with_injected_client() -> None:
    w, items, th = setup(20)
    seen: list[str] = []

    def client(messages):
        seen.append(messages[-1]["content"])
        if "compute the answer" in messages[-1]["content"]:
            return "Computed from the trajectory. <answer>Nope</answer>"
        return "Momentum is constructive."

    traces, rep = TraceWriter(w, ForecastTool(LinearDecoder(), w, 8), th, teacher=OpenAITeacher(client),
                              context_fn=context_fn, cfg=TraceConfig(drop_trivial=False)).write(items)
    # the fake teacher never gives a valid answer -> every surviving sample is dropped by the filter
    assert traces == [] and rep.dropped["teacher_answer_wrong"] > 0 and seen
    good = TemplateTeacher()
    traces2, _ = TraceWriter(w, ForecastTool(LinearDecoder(), w, 8), th, teacher=good, context_fn=context_fn,
                             cfg=TraceConfig(drop_trivial=False)).write(items)
    assert len(traces2) == rep.dropped["teacher_answer_wrong"]


def test_explanations_state_the_statistic_each_template_uses() -> None:
    from llm.qa import TEMPLATES
    from llm.qa.core import decision_at, realised_path
    from llm.traces import explain
    from tests.test_qa_generator import fixed_windows

    w = fixed_windows()
    gen = QAGenerator(w, context_fn)
    d = decision_at(w, 0, context_fn(str(w.ticker[0]), w.date[0]))
    words = {"vol": "volatility", "volume": "volume", "mdd": "drawdown", "peak": "highest", "bounded": "lowest"}
    for t in TEMPLATES:
        if not t.usable(d):
            continue
        it = gen.make_item(0, t, t.grid[-1], "train", "q")
        text = explain(it, d, realised_path(w, 0))
        assert text.endswith(f"<answer>{it.answer}</answer>")
        # it opens by restating the prompt's question line (question + answer instruction), verbatim
        first = text.split("\n", 1)[0]
        assert first.startswith(RECALL) and first == user_message(it).splitlines()[-1], (t.key, first)
        assert it.question in first
        assert f"the answer ({answer_options(it)}) is {it.answer}." in text  # the type sits next to the answer
        assert answer_options(it) in first
        for key, word in words.items():
            if key in t.key and not (key == "vol" and "volume" in t.key):
                assert word in text, (t.key, text)


def test_counterfactual_traces_answer_what_their_observation_says() -> None:
    """A counterfactual trace executes another item's a*, its answer is the observed path's (never the
    truth), only its final reasoning is trained, and its decoder target stays the item's own a*."""
    from forecast_action.parser import parse_action
    from llm.qa.answers import extract_answer, is_correct, normalize_answer
    from llm.qa.core import observed_path
    from llm.qa.families import TEMPLATES_BY_KEY

    w, items, th = setup()
    tool = ForecastTool(LinearDecoder(), w, 8)
    base, rep0 = TraceWriter(w, tool, th, context_fn=context_fn, cfg=TraceConfig(drop_trivial=False)).write(items)
    cfg = TraceConfig(drop_trivial=False, counterfactual=1.0)
    traces, rep = TraceWriter(w, tool, th, context_fn=context_fn, cfg=cfg).write(items)
    assert traces[: len(base)] == base and rep.kept == rep0.kept == len(base)  # the plain traces are unchanged
    cf = traces[len(base):]
    assert rep.counterfactual == len(cf) > 0
    assert len(cf) + sum(rep.counterfactual_skipped.values()) == len(base)
    by_id = {it.id: it for it in items}
    own = {t.item_id: t for t in base}
    for t in cf:
        it = by_id[t.item_id]
        (before, b_trained), (obs, o_trained), (after, a_trained) = t.segments
        assert (b_trained, o_trained, a_trained) == (False, False, True)
        assert not is_correct(it, t.answer)  # the label is not the realised answer...
        path_answer = TEMPLATES_BY_KEY[it.template].answer(observed_path(obs), QAGenerator(w, context_fn).decision(it.window), it.params)
        assert normalize_answer(it, t.answer) == normalize_answer(it, path_answer)  # ...but the observation's
        assert normalize_answer(it, extract_answer(after)) == normalize_answer(it, t.answer)
        assert t.action == own[t.item_id].action  # L_TS still fits this window's a* to its future
        executed = parse_action(before).action
        assert executed is not None and executed != _action(own[t.item_id])  # the executed action is another one
    again, _ = TraceWriter(w, tool, th, context_fn=context_fn, cfg=cfg).write(items)
    assert again == traces  # seeded
    half, rep_half = TraceWriter(w, tool, th, context_fn=context_fn,
                                 cfg=TraceConfig(drop_trivial=False, counterfactual=0.5)).write(items)
    assert rep_half.counterfactual + sum(rep_half.counterfactual_skipped.values()) == round(0.5 * len(base))


def test_counterfactual_share_is_checked() -> None:
    import pytest

    with pytest.raises(ValueError, match="counterfactual"):
        TraceConfig(counterfactual=1.5)
