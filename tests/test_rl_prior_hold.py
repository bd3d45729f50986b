"""answer_prior "hold" (rl/prior_hold.py): the update loses its first-order move of the step's mean answer
log-odds; the projection by hand, the direction's weighting, and a real step on the tiny policy whose
update is orthogonal to the direction it read while the same batch's unheld step is not."""

import pytest
import torch

from rl.answer_span import context_logodds
from rl.grpo import CreditConfig
from rl.prior_hold import remove_along, shared_direction, step_contexts
from rl.soft_tokens import soft_tokens
from rl.trainer import FuncScorer
from tests.test_rl_credit import _trainer


def test_remove_along_by_hand() -> None:
    a, b = torch.nn.Parameter(torch.tensor([1.0, 2.0])), torch.nn.Parameter(torch.tensor([3.0]))
    before = {"a": torch.tensor([0.0, 0.0]), "b": torch.tensor([1.0])}
    d = {"a": torch.tensor([1.0, 0.0]), "b": torch.tensor([1.0])}
    # delta = (1, 2, 2); <delta, d> = 1 + 2 = 3; <d, d> = 2 -> delta - 1.5 d = (-0.5, 2, 0.5)
    assert remove_along({"a": a, "b": b}, before, d) == pytest.approx(3.0)
    torch.testing.assert_close(a.detach(), torch.tensor([-0.5, 2.0]))
    torch.testing.assert_close(b.detach(), torch.tensor([1.5]))
    zero = {"a": torch.zeros(2), "b": torch.zeros(1)}
    assert remove_along({"a": a, "b": b}, before, zero) == 0.0  # no direction: the update stays
    torch.testing.assert_close(a.detach(), torch.tensor([-0.5, 2.0]))


def _scorer() -> FuncScorer:
    return FuncScorer({"r_ans": lambda p, c, **k: [float(i % 3 == 0) for i in range(len(c))],
                       "len": lambda p, c, **k: [float(len(x)) for x in c]})


def _dot(after: dict, before: dict, d: dict) -> float:
    return sum(float(((after[n] - before[n]).double() * d[n].double()).sum()) for n in d)


def test_shared_direction_weighs_queries_equally(tiny_policy, tmp_path) -> None:
    """Two contexts of query 0 and one of query 1: the direction is (g00 + g01) / 4 + g10 / 2."""
    tr = _trainer(tiny_policy, tmp_path, _scorer())
    tok = tr.engine.tokenizer
    ids = [tok.encode(tr.samples[q].prompt, add_special_tokens=False) for q in (0, 1)]
    contexts = [{"query": 0, "ids": ids[0], "words": ["Yes", "No"]},
                {"query": 0, "ids": ids[0] + tok.encode(" up", add_special_tokens=False), "words": ["Yes", "No"]},
                {"query": 1, "ids": ids[1], "words": ["Yes", "No"]}]
    params = {n: p for n, p in tr.policy.named_parameters() if p.requires_grad}
    ts = soft_tokens(tr.samples)
    got = shared_direction(tr.policy, tok, tr.fabric, params, contexts, ts)
    assert all(p.grad is None for p in params.values())
    parts = []
    for c in contexts:
        tr.policy.zero_grad(set_to_none=True)
        context_logodds(tr.policy, tok, c, ts).backward()
        parts.append({n: p.grad.clone() if p.grad is not None else torch.zeros_like(p) for n, p in params.items()})
    for n in params:
        torch.testing.assert_close(got[n], (parts[0][n] + parts[1][n]) / 4 + parts[2][n] / 2, atol=1e-6, rtol=1e-5)


def test_a_held_step_leaves_the_mean_logodds_still_to_first_order(tiny_policy, tmp_path) -> None:
    held = _trainer(tiny_policy, tmp_path / "held", _scorer(), CreditConfig(mode="answer_span", answer_prior="hold"))
    free = _trainer(tiny_policy, tmp_path / "free", _scorer(), CreditConfig(mode="answer_span"))
    params = {n: p for n, p in held.policy.named_parameters() if p.requires_grad}
    before = {n: p.detach().clone() for n, p in params.items()}
    sb = held.sample()
    contexts = step_contexts(sb.rollouts, held.engine.tokenizer, held.cfg.credit.hold_per_query)
    assert contexts and max(sum(c["query"] == q for c in contexts) for q in range(2)) <= 2
    d = shared_direction(held.policy, held.engine.tokenizer, held.fabric, params, contexts, soft_tokens(sb.samples))
    m = held.train_step(sb)
    after = {n: p.detach().clone() for n, p in params.items()}
    assert any(not torch.equal(after[n], before[n]) for n in before)  # the step still trains
    held_dot = _dot(after, before, d)
    # the same batch without the hold: its update moves the mean log-odds, by the move the held step logged
    free_params = {n: p for n, p in free.policy.named_parameters() if p.requires_grad}
    assert all(torch.equal(free_params[n], before[n]) for n in before)  # the same start
    free_sb = free.sample()
    assert [r.token_ids for r in free_sb.rollouts] == [r.token_ids for r in sb.rollouts]
    free.train_step(free_sb)
    moved = _dot({n: p.detach() for n, p in free_params.items()}, before, d)
    assert abs(moved) > 1e-4
    assert abs(held_dot) < 1e-2 * abs(moved)  # the held update is orthogonal to the direction, up to rounding
    assert m["scalars"]["answer_prior/held_move"] == pytest.approx(moved, rel=1e-3)


def test_hold_works_with_either_credit_and_checks_its_contexts() -> None:
    assert CreditConfig(answer_prior="hold").label == "sequence, prior held"
    assert CreditConfig(mode="answer_span", answer_prior="hold").label == "answer_span, prior held"
    with pytest.raises(ValueError, match="hold_per_query"):
        CreditConfig(answer_prior="hold", hold_per_query=0)


def test_one_token_words_take_one_forward_and_agree_with_two(tiny_policy) -> None:
    """context_logodds reads both one-token answer words from one forward's next-token distribution; the
    same as scoring each word in its own forward (a word of two tokens takes that path)."""
    from llm.logprobs import token_logprobs

    pol = tiny_policy(d_ts=8)
    tok = pol.tokenizer
    ids = tok.encode("Question: will it rise? So the answer is", add_special_tokens=False)
    words = [w for w in (" the", " a", " is", "the", "a", "e", "s") if len(tok.encode(w, add_special_tokens=False)) == 1][:2]
    assert len(words) == 2  # the tiny tokenizer splits "Yes" / "No": two of its one-token words stand in
    ts = torch.randn(1, 2, 8, generator=torch.Generator().manual_seed(0))
    one = context_logodds(pol, tok, {"query": 0, "ids": ids, "words": words}, ts)
    two = []
    for w in words:
        x = torch.tensor([ids + tok.encode(w, add_special_tokens=False)])
        two.append(token_logprobs(pol, x, torch.ones_like(x), ts, logits_to_keep=1)[0, -1])
    assert float(one) == pytest.approx(float(two[0] - two[1]), abs=1e-5)
    assert float(one) != 0.0
