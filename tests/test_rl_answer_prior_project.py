"""answer_prior "project" (rl/grpo.py, "Credit"): per answer, the span advantages lose their component along
the span's slope s_i = 1 − π_i, so that the gradient along a direction every context shares is zero even
where the answers' probabilities differ; values by hand, the property on a two-way answer model (where
"cancel" leaves a push), the trainer's wiring and the config's errors."""

import math

import pytest
import torch

from rl.answer_span import decision_tokens
from rl.grpo import CreditConfig, cancel_answer_prior, group_advantages, project_answer_prior
from rl.trainer import span_slopes
from tests.test_rl_answer_prior import _rollout


def test_project_answer_prior_by_hand() -> None:
    # one answer, slopes 0.1, 0.9, 0.2, 0.8: c = sum(A s) / sum(s^2) = (0.1 - 0.9 + 0.1 - 0.4) / 1.5 = -11/15
    a = torch.tensor([1.0, -1.0, 0.5, -0.5], dtype=torch.float64)
    s = torch.tensor([0.1, 0.9, 0.2, 0.8], dtype=torch.float64)
    out = project_answer_prior(a, ["yes"] * 4, torch.ones(4, dtype=torch.bool), s)
    c = -11 / 15
    torch.testing.assert_close(out, torch.tensor([1 - 0.1 * c, -1 - 0.9 * c, 0.5 - 0.2 * c, -0.5 - 0.8 * c],
                                                 dtype=torch.float64))
    assert float((out * s).sum()) == pytest.approx(0.0, abs=1e-12)
    # a row that cannot teach and a class whose slopes are all 0 are left as they are
    keys, teach = ["yes", "yes", "no", "no"], torch.tensor([True, False, True, True])
    got = project_answer_prior(a, keys, teach, torch.tensor([0.5, 0.5, 0.0, 0.0], dtype=torch.float64))
    torch.testing.assert_close(got, torch.tensor([0.0, -1.0, 0.5, -0.5], dtype=torch.float64))
    with pytest.raises(ValueError, match="align"):
        project_answer_prior(a, keys[:3], teach, s)
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        project_answer_prior(a, keys, teach, s + 0.5)


def test_equal_slopes_give_cancel() -> None:
    a = group_advantages(torch.tensor([1.0, 0, 0, 0, 0, 0, 1.0, 1.0], dtype=torch.float64), 4)
    keys, teach = ["yes", "no", "no", "no", "yes", "yes", "no", "no"], torch.ones(8, dtype=torch.bool)
    torch.testing.assert_close(project_answer_prior(a, keys, teach, torch.full((8,), 0.3, dtype=torch.float64)),
                               cancel_answer_prior(a, keys, teach))


def _prior_grad(adv: torch.Tensor, answers: list[str], z0: torch.Tensor) -> tuple[float, torch.Tensor]:
    """d/d prior and d/d theta_q of sum_i A_i log p(a_i | q_i) for the log-odds of Yes z_q = prior + theta_q,
    at prior = 0 and theta = z0 [Q] (queries whose answers the policy holds with different confidence)."""
    prior = torch.zeros((), dtype=torch.float64, requires_grad=True)
    theta = z0.clone().double().requires_grad_(True)
    q = torch.arange(len(answers)) // 4
    z = prior + theta[q]
    yes = torch.tensor([x == "Yes" for x in answers])
    logp = torch.where(yes, torch.nn.functional.logsigmoid(z), torch.nn.functional.logsigmoid(-z))
    (adv * logp).sum().backward()
    return float(prior.grad), theta.grad


def test_projecting_removes_the_shared_push_where_cancelling_leaves_one() -> None:
    """A gold-Yes query the policy is sure of (z = +3) and a gold-No query it leans No on (z = -1): both
    groups teach and each answer's advantages are centred, yet the surprising answers (low
    probability, large slope) outweigh the sure ones, so "cancel" pushes the shared prior; "project" does not,
    and each query still moves toward its gold."""
    answers = ["Yes", "Yes", "Yes", "No"] + ["Yes", "Yes", "No", "No"]
    r_ans = torch.tensor([1.0, 1, 1, 0] + [0, 0, 1, 1], dtype=torch.float64)
    z0 = torch.tensor([3.0, -1.0], dtype=torch.float64)
    a = group_advantages(r_ans, 4)
    z = z0[torch.arange(8) // 4]
    pi = torch.where(torch.tensor([x == "Yes" for x in answers]), torch.sigmoid(z), torch.sigmoid(-z))
    keys, teach = [x.lower() for x in answers], torch.ones(8, dtype=torch.bool)
    g_cancel, _ = _prior_grad(cancel_answer_prior(a, keys, teach), answers, z0)
    g_project, g_theta = _prior_grad(project_answer_prior(a, keys, teach, 1 - pi), answers, z0)
    assert abs(g_cancel) > 0.03  # -0.042 here; unbalanced (keep) -0.232
    assert g_project == pytest.approx(0.0, abs=1e-12)
    assert g_theta[0] > 0 and g_theta[1] < 0  # toward Yes on the gold-Yes query, toward No on the gold-No one


def test_span_slopes_read_the_sampler_probability_of_the_span(tiny_tokenizer) -> None:
    rows = [_rollout(tiny_tokenizer, "Yes"), _rollout(tiny_tokenizer, None)]
    gen = torch.zeros(2, max(len(r.token_ids) for r in rows))
    for i, r in enumerate(rows):
        gen[i, : len(r.gen_mask)] = torch.tensor(r.gen_mask, dtype=torch.float32)
        r.logprobs = [-0.1 * (t + 1) for t in range(len(r.token_ids))]
    span = decision_tokens(rows, gen, tiny_tokenizer)
    cols = span[0].nonzero().flatten().tolist()
    assert cols and not span[1].any()
    expect = 1 - math.exp(sum(-0.1 * (t + 1) for t in cols))
    torch.testing.assert_close(span_slopes(rows, span), torch.tensor([expect, 0.0], dtype=torch.float64))


def test_project_needs_answer_span_credit() -> None:
    with pytest.raises(ValueError, match="answer_span"):
        CreditConfig(mode="sequence", answer_prior="project")
    assert CreditConfig(mode="answer_span", answer_prior="project").label == "answer_span, prior projected out"
