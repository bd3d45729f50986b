"""answer_prior "cancel" (rl/grpo.py, "Credit"): the answer span's advantages are centred per answer over the
step's teaching rollouts, so an update cannot raise one answer on every query; values by hand, the property
on a softmax answer model, the trainer's wiring and the config's errors."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from llm.special_tokens import ANSWER_CLOSE, ANSWER_OPEN
from rl.answer_span import decision_tokens
from rl.grpo import CreditConfig, cancel_answer_prior, group_advantages
from rl.rewards import RewardBreakdown, canonical_answer
from rl.trainer import FuncScorer, answer_keys, answer_span_credit, span_slopes
from tests.test_rl_credit import _trainer

# Two gold-Yes groups that answer Y N N N, one gold-No group that answers Y Y Y N, one gold-No group that
# answers Y everywhere (no spread: it cannot teach). The teaching groups are unbalanced, 2 gold-Yes to 1.
ANSWERS = ["Yes", "No", "No", "No"] * 2 + ["Yes", "Yes", "Yes", "No"] + ["Yes"] * 4
R_ANS = [1.0, 0, 0, 0] * 2 + [0, 0, 0, 1.0] + [0.0] * 4


def _a_ans() -> torch.Tensor:
    return group_advantages(torch.tensor(R_ANS, dtype=torch.float64), 4)


def test_group_advantages_of_the_example_by_hand() -> None:
    # [1, 0, 0, 0]: mean 0.25, unbiased std 0.5 -> [1.5, -0.5, -0.5, -0.5] (up to the std's eps 1e-4)
    torch.testing.assert_close(_a_ans(), torch.tensor([1.5, -.5, -.5, -.5] * 2 + [-.5, -.5, -.5, 1.5] + [0.0] * 4,
                                                      dtype=torch.float64), atol=1e-3, rtol=0)


def test_cancel_answer_prior_by_hand() -> None:
    a = _a_ans()
    teach = torch.tensor([True] * 12 + [False] * 4)
    out = cancel_answer_prior(a, [x.lower() for x in ANSWERS], teach)
    # teaching Yes: 1.5, 1.5, -0.5 x 3 -> mean 0.3; teaching No: -0.5 x 6, 1.5 -> mean -3/14
    yes_mean, no_mean = 0.3, -3 / 14
    expect = ([1.5 - yes_mean] + [-0.5 - no_mean] * 3) * 2 + [-0.5 - yes_mean] * 3 + [1.5 - no_mean] + [0.0] * 4
    torch.testing.assert_close(out, torch.tensor(expect, dtype=torch.float64), atol=1e-3, rtol=0)
    for key in ("yes", "no"):  # per answer the teaching advantages sum to 0
        rows = torch.tensor([k.lower() == key for k in ANSWERS]) & teach
        assert float(out[rows].sum()) == pytest.approx(0.0, abs=1e-12)
    assert torch.equal(a, _a_ans())  # the input is not mutated
    with pytest.raises(ValueError, match="align"):
        cancel_answer_prior(a, ANSWERS[:3], teach)


def test_balanced_teaching_groups_are_left_as_they_are() -> None:
    """One gold-Yes and one gold-No group of mirrored answers: each answer's advantages already sum to 0."""
    a = group_advantages(torch.tensor([1.0, 0, 0, 0, 0, 0, 0, 1.0], dtype=torch.float64), 4)
    keys = ["yes", "no", "no", "no", "yes", "yes", "yes", "no"]
    torch.testing.assert_close(cancel_answer_prior(a, keys, torch.ones(8, dtype=torch.bool)), a)


def _surrogate_grads(adv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradient of sum_i A_i log p(a_i | q_i) for p = softmax(prior + theta_q) over (Yes, No), at prior = 0,
    theta = 0 (every query answers alike): (d/d prior [2], d/d theta [Q, 2])."""
    prior = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    theta = torch.zeros(4, 2, dtype=torch.float64, requires_grad=True)
    a = torch.tensor([0 if x == "Yes" else 1 for x in ANSWERS])
    q = torch.arange(16) // 4
    logp = torch.log_softmax(prior + theta[q], dim=-1).gather(1, a[:, None]).squeeze(1)
    (adv * logp).sum().backward()
    return prior.grad, theta.grad


def test_cancelling_removes_the_shared_push_and_keeps_each_querys_own() -> None:
    keep = _a_ans()
    cancel = cancel_answer_prior(keep, ANSWERS, torch.tensor([True] * 12 + [False] * 4))
    g_prior_keep, _ = _surrogate_grads(keep)
    g_prior, g_theta = _surrogate_grads(cancel)
    # kept: the unbalanced groups push the shared prior toward Yes; cancelled: no push at all
    assert float(g_prior_keep[0] - g_prior_keep[1]) > 1.0
    torch.testing.assert_close(g_prior, torch.zeros(2, dtype=torch.float64), atol=1e-12, rtol=0)
    yes_minus_no = g_theta[:, 0] - g_theta[:, 1]
    assert yes_minus_no[0] > 0 and yes_minus_no[1] > 0  # the gold-Yes queries move toward Yes
    assert yes_minus_no[2] < 0  # the gold-No query toward No
    assert float(yes_minus_no[3]) == 0.0  # the group without spread carries no answer signal


def test_canonical_answer() -> None:
    assert canonical_answer("Yes, because it rose", "yes_no") == "Yes"
    assert canonical_answer(" no.", "yes_no") == "No"
    assert canonical_answer("maybe", "yes_no") is None and canonical_answer(None, "yes_no") is None
    assert canonical_answer("I pick bullish", "choice", ("bullish", "bearish")) == "bullish"
    assert canonical_answer("3.14159", "numeric") == "3.14"


def _rollout(tok, answer: str | None):
    enc = lambda s: tok.encode(s, add_special_tokens=False)  # noqa: E731
    tag, close = tok.convert_tokens_to_ids(ANSWER_OPEN), tok.convert_tokens_to_ids(ANSWER_CLOSE)
    written = enc("It fell. So") + ([tag] + enc(answer) + [close] if answer else [])
    prompt = enc("Will it rise?") + [tag, close]
    return SimpleNamespace(token_ids=prompt + written, gen_mask=[0] * len(prompt) + [1] * len(written), answer=answer)


def test_answer_span_credit_cancels_the_prior_over_the_step(tiny_tokenizer) -> None:
    """The example's answers as rollouts (one states "Yes." and one writes no answer): the span carries the
    centred R_ans advantages, the other tokens carry the same advantages as without cancelling."""
    answers = list(ANSWERS)
    answers[4] = "Yes."  # the same canonical answer as "Yes"
    answers[14] = None  # no span: sequence credit, not a teaching rollout
    rows = [_rollout(tiny_tokenizer, a) for a in answers]
    gen = torch.zeros(16, max(len(r.token_ids) for r in rows))
    for i, r in enumerate(rows):
        gen[i, : len(r.gen_mask)] = torch.tensor(r.gen_mask, dtype=torch.float32)
    samples = [SimpleNamespace(columns={"answer": g, "answer_type": "yes_no"}) for g in ("Yes", "Yes", "No", "No")]
    assert answer_keys(rows, samples, 4)[4] == "Yes" and answer_keys(rows, samples, 4)[14] is None
    r_ans, r_act = np.array(R_ANS), np.linspace(0.0, 1.0, 16)
    br = RewardBreakdown({"r_ans": r_ans, "r_act": r_act}, r_ans + r_act, {"r_ans": 1.0, "r_act": 1.0})
    a_tot = group_advantages(torch.tensor(br.total), 4)
    out = {}
    for prior in ("keep", "cancel"):
        out[prior] = answer_span_credit(rows, samples, br, a_tot, gen, tiny_tokenizer,
                                        CreditConfig(mode="answer_span", answer_prior=prior), 4)
    span = decision_tokens(rows, gen, tiny_tokenizer)
    expect = cancel_answer_prior(_a_ans(), [x.lower() for x in ANSWERS], torch.tensor([True] * 12 + [False] * 4))
    for i in range(16):
        if i == 14:
            assert not span[i].any()
            torch.testing.assert_close(out["cancel"][0][i], out["keep"][0][i])
            continue
        torch.testing.assert_close(out["cancel"][0][i][span[i]], expect[i].to(out["cancel"][0].dtype).expand(int(span[i].sum())))
    rest = (gen > 0) & ~span
    assert torch.equal(out["cancel"][0][rest], out["keep"][0][rest])
    assert torch.equal(out["cancel"][1], out["keep"][1])  # weights do not change


@pytest.mark.parametrize("prior", ["cancel", "project"])
def test_a_step_without_the_prior_trains(tiny_policy, tmp_path, prior: str) -> None:
    """Through GRPOTrainer.sample: per answer over the step's teaching rollouts, the span advantages sum to 0
    ("cancel") or their products with the spans' slopes do ("project"), and the step moves the policy."""
    scorer = FuncScorer({"r_ans": lambda p, c, **k: [float(i % 3 == 0) for i in range(len(c))],
                         "len": lambda p, c, **k: [float(len(x)) for x in c]})
    tr = _trainer(tiny_policy, tmp_path, scorer, CreditConfig(mode="answer_span", answer_prior=prior))
    before = tr.trainable_state()
    sb = tr.sample()
    span = decision_tokens(sb.rollouts, sb.batch["gen"], tr.engine.tokenizer)
    assert span.any()  # the fixture writes spans
    keys = answer_keys(sb.rollouts, sb.samples, 4)
    first = torch.stack([sb.token_adv[i][span[i]][0] if span[i].any() else torch.tensor(0.0)
                         for i in range(len(keys))]).double()
    scale = span_slopes(sb.rollouts, span.cpu()) if prior == "project" else torch.ones(len(keys), dtype=torch.float64)
    for key in set(keys):
        rows = torch.tensor([k == key for k in keys]) & span.any(1).cpu()
        assert float((first[rows] * scale[rows]).sum()) == pytest.approx(0.0, abs=1e-5)
    tr.train_step()
    after = tr.trainable_state()
    assert any(not torch.equal(after[n], before[n]) for n in before)


def test_cancel_needs_answer_span_credit() -> None:
    with pytest.raises(ValueError, match="answer_span"):
        CreditConfig(mode="sequence", answer_prior="cancel")
    with pytest.raises(ValueError, match="keep, cancel, project"):
        CreditConfig(mode="answer_span", answer_prior="drop")
    assert CreditConfig(mode="answer_span", answer_prior="cancel").label == "answer_span, prior cancelled"
