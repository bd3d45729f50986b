"""QA evaluation through the real rollout engine with a scripted policy: metrics by hand."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from benchmarks.qa.command import restatement, table
from forecast_action.decoder import ActionConditionedDecoder
from forecast_action.derive import ActionThresholds
from forecast_action.encoder import ActionEncoderConfig
from llm.qa import QAConfig, QAGenerator
from llm.qa.baselines import overall_difference
from llm.qa.core import QAItem, decision_at
from llm.qa.evaluate import evidence_read_rate, failure_kinds, grade_rollouts, item_hits, rollout_items
from llm.qa.prompt import SYSTEM_PROMPT, user_message
from llm.scripted import ScriptedPolicy
from llm.special_tokens import ts_placeholders
from llm.tokenizer import chat_prompt, train_tokenizer
from llm.tools import ForecastTool
from llm.traces import TraceConfig, TraceWriter, price_evidence
from stockr1.types import train_only
from tests.test_qa_generator import L, context_fn, make_windows
from tests.test_qa_traces import LinearDecoder, render
from ts_encoder.config import TSEncoderConfig


def test_grade_scripted_rollouts(tmp_path) -> None:
    w = make_windows(120)
    w = type(w)(w.ticker, w.date, np.random.default_rng(0).normal(0, 0.01, w.x.shape).astype(np.float32),
                w.y, w.hist, w.future, w.split, w.context)
    items, _ = QAGenerator(w, context_fn).generate(QAConfig(n_train=0, n_val=0, n_test=20, seed=0))
    torch.manual_seed(0)
    dec = ActionConditionedDecoder(TSEncoderConfig(lookback=L, horizon=10, patch_len=5, d_model=16, n_layers=1,
                                                   n_heads=2, ffn_dim=32, d_llm=8, cond_dim=8),
                                   ActionEncoderConfig(cond_dim=8, emb_dim=4, hidden=16), tool_samples=4)
    ph = ts_placeholders(dec.ts_cfg.n_tokens)
    traces, _ = TraceWriter(w, ForecastTool(LinearDecoder(), w, 4, render=render), ActionThresholds.fit(train_only(w)),
                            context_fn=context_fn, ts_placeholder=ph, cfg=TraceConfig(drop_trivial=False)).write(items)
    by_id = {t.item_id: t for t in traces}
    kept = [it for it in items if it.id in by_id][:6]
    assert len(kept) >= 4
    tok = train_tokenizer([t.user + t.completion for t in traces] + [SYSTEM_PROMPT], 600, tmp_path / "tok")
    scripts = {}
    for k, it in enumerate(kept):
        t = by_id[it.id]
        prompt = chat_prompt(tok, user_message(it, "", ph), SYSTEM_PROMPT)
        before, after = t.segments[0][0], t.segments[2][0]
        if k == 0:  # a malformed action and a missing answer
            before, after = "no action here <forecast_action>{oops}</forecast_action>", "I cannot tell."
        if k == 1:  # a good action, then an answer outside every answer space
            after = "So the answer is maybe.\n<answer>maybe-ish</answer>"
        scripts[prompt] = [before, after + "<|im_end|>"]
    pol = ScriptedPolicy(tok, scripts, filler="<|endoftext|>")
    pol.tokenizer = tok
    pairs = rollout_items(pol, dec, w, kept, max_new_tokens=1500)  # room for the longest scripted trace
    m = grade_rollouts(pairs)
    n = len(kept)
    assert m["answer_parse_rate"] == pytest.approx(100.0 * (n - 2) / n)
    assert m["action_success_rate"] == pytest.approx(100.0 * (n - 1) / n)
    kinds = failure_kinds(pairs)
    assert kinds == {"ok": n - 2, "no_action": 1, "incomplete_action": 0, "no_answer": 0, "answer_outside_space": 1}
    assert m["correct_of_parsed"] == 100.0  # the scripts copy answers computed from trajectories
    assert item_hits(pairs).tolist() == [0.0, 0.0] + [1.0] * (n - 2)  # unparsed and outside-space score 0
    assert m["tokens_per_answer"] > 10
    # the scripts for k >= 1 copy the trace's price sentence, built from the window; k = 0 writes none.
    # One changed digit in that sentence (a misread return) is a miss.
    assert evidence_read_rate(pairs, w) == pytest.approx(100.0 * (n - 1) / n)
    it1, r1 = pairs[1]
    sentence = price_evidence(decision_at(w, it1.window))
    assert sentence in r1.completion and "% over 5 sessions" in sentence
    misread = SimpleNamespace(completion=r1.completion.replace(sentence, sentence.replace("% over 5", "1% over 5")))
    assert evidence_read_rate([(it1, r1), (it1, misread)], w) == 50.0
    assert "| model |" in table({"x": m}) and "Avg." in table({"x": m})
    # the scripts for k >= 2 restate the question line (the trace's own text); k = 0, 1 do not
    after, copies, rates = restatement(pairs)
    assert [c["words"] for c in copies] == [False, False] + [True] * (n - 2)
    assert copies[2]["verbatim"] and after[1].startswith("So the answer is maybe.")
    assert rates == {"question_restated_rate": pytest.approx(100.0 * (n - 2) / n),
                     "question_words_restated_rate": pytest.approx(100.0 * (n - 2) / n),
                     "action_and_answer_rate_if_words_restated": 100.0, "action_and_answer_rate_if_not": 0.0}


def test_restatement_masks_numbers_but_not_words() -> None:
    """A restated line with other dates, prices and horizons still copies the question's words; a
    line from another template does not."""
    from types import SimpleNamespace

    from llm.qa.core import QAItem
    from llm.qa.prompt import question_line

    it = QAItem("q1", "forecast", "t", "Will SP500 (closed at 2592.76 on 2017-01-03) rise over 5 days?", "Yes",
                "yes_no", 0, "SP500", "2017-01-03", "test")
    line = question_line(it)
    done = "\n<answer>Yes</answer>"
    act = '<forecast_action>{}</forecast_action><forecast_ts>obs</forecast_ts>\n'
    texts = [line, line.replace("2592.76", "1258.01").replace("5 days", "10 days"), line.replace("rise", "fall")]
    pairs = [(it, SimpleNamespace(completion=act + t + done, action=None, answer="Yes")) for t in texts]
    _, copies, rates = restatement(pairs)
    assert [c["verbatim"] for c in copies] == [True, False, False]
    assert [c["words"] for c in copies] == [True, True, False]
    assert rates["question_words_restated_rate"] == pytest.approx(200 / 3)


def test_overall_difference_is_a_mean_over_families_with_paired_resamples() -> None:
    """Overall = mean of family accuracies (not of items): 3 forecast items, 1 event item."""
    items = [QAItem(f"q{i}", fam, "t", "?", "Yes", "yes_no", i, "T", "2010-01-0" + str(i + 1), "test")
             for i, fam in enumerate(["forecast", "forecast", "forecast", "event"])]
    a, b = np.array([1.0, 1.0, 0.0, 1.0]), np.array([1.0, 0.0, 0.0, 0.0])
    # a: (2/3 + 1) / 2; b: (1/3 + 0) / 2 -> +66.7 points
    ident = [np.arange(4)] * 5
    d = overall_difference(items, a, b, ident)
    assert d["diff"] == pytest.approx(100 * ((2 / 3 + 1) / 2 - (1 / 3) / 2))
    assert d["ci_lo"] == pytest.approx(d["diff"]) and d["ci_hi"] == pytest.approx(d["diff"]) and d["verdict"] == "holds"
    # resamples are paired: a resample of only the first two forecast items gives 1 - 1/2 points apart
    d2 = overall_difference(items, a, b, [np.array([0, 1])] * 3)
    assert d2["diff"] == pytest.approx(d["diff"]) and d2["ci_lo"] == pytest.approx(50.0)
    assert overall_difference(items, b, b, ident)["verdict"] == "tie"
