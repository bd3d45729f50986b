"""answer_span credit (rl/grpo.py, "Credit"): the answer span carries R_ans's advantage with its own share of
the rollout's weight, the other tokens the rest's advantage; formulas by hand, the trainer's wiring, and the
fallback to sequence credit where a rollout states no answer."""

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from llm.special_tokens import ANSWER_CLOSE, ANSWER_OPEN
from rl.answer_span import decision_tokens
from rl.grpo import CreditConfig, GRPOLossConfig, group_advantages, grpo_loss, segment_credit
from rl.rewards import RewardBreakdown, combine_rewards
from rl.trainer import FuncScorer, answer_span_credit
from tests.test_rl_credit import _grad, _trainer


def test_segment_credit_by_hand() -> None:
    gen = torch.tensor([[0, 1, 1, 1, 1, 1, 0], [0, 1, 1, 1, 0, 0, 0]], dtype=torch.float32)
    span = torch.zeros(2, 7, dtype=torch.bool)
    span[0, 4:6] = True  # row 0: 3 rest tokens, 2 answer tokens; row 1: no answer span
    adv, w = segment_credit(torch.tensor([2.0, 9.0]), torch.tensor([-1.0, 9.0]), torch.tensor([0.5, 0.25]),
                            span, gen, share=0.6)
    # row 0, |o| = 5: the span's weight 0.6 * 5 / 2 = 1.5, the rest's 0.4 * 5 / 3 = 2/3
    torch.testing.assert_close(w[0], torch.tensor([0, 2 / 3, 2 / 3, 2 / 3, 1.5, 1.5, 0]))
    torch.testing.assert_close(adv[0], torch.tensor([0, -1.0, -1.0, -1.0, 2.0, 2.0, 0]))
    # row 1 falls back to sequence credit: the total's advantage, weight 1
    torch.testing.assert_close(w[1], torch.tensor([0, 1.0, 1.0, 1.0, 0, 0, 0]))
    torch.testing.assert_close(adv[1], torch.tensor([0, 0.25, 0.25, 0.25, 0, 0, 0]))
    assert float((w * gen).sum(1)[0]) == pytest.approx(5.0)  # the rollout's total weight is its length


def test_the_loss_gradient_per_token_is_the_segments_advantage_over_its_length() -> None:
    """On-policy (ratio 1), d loss / d logp_it = -w_it A_it / (|o_i| N): for the answer span that is
    -share A_ans / (|span| N), for the rest -(1 - share) A_rest / (|rest| N)."""
    gen = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=torch.float32)
    span = torch.tensor([[0, 0, 0, 1, 1], [0, 0, 1, 0, 0]], dtype=torch.bool)
    a_ans, a_rest = torch.tensor([1.5, -0.5]), torch.tensor([-2.0, 1.0])
    adv, w = segment_credit(a_ans, a_rest, torch.zeros(2), span, gen, share=0.25)
    logp = torch.full((2, 5), -1.0, requires_grad=True)
    grpo_loss(logp, adv, gen, cfg=GRPOLossConfig(), token_weights=w).loss.backward()
    n = 2
    expect = torch.tensor([[-(0.75 / 3) * -2.0 / n] * 3 + [-(0.25 / 2) * 1.5 / n] * 2,
                           [-(0.75 / 2) * 1.0 / n] * 2 + [-(0.25 / 1) * -0.5 / n] + [0.0, 0.0]])
    torch.testing.assert_close(logp.grad, expect)


def test_reward_total_without_a_component_by_hand() -> None:
    comps = {"r_ans": lambda p, c, **k: [1.0, 0.0, None], "r_act": lambda p, c, **k: [0.5, None, None]}
    br = combine_rewards(["p"] * 3, ["a", "b", "c"], comps, {"r_ans": 2.0, "r_act": 3.0})
    np.testing.assert_allclose(br.total[:2], [2.0 + 1.5, 0.0])
    rest = br.total_without("r_ans")
    np.testing.assert_allclose(rest[:1], [1.5])
    assert np.isnan(rest[1]) and np.isnan(rest[2])  # no other component scored them
    with pytest.raises(KeyError, match="r_cons"):
        br.total_without("r_cons")


def _rollout(tok, answer: str | None, extra: int):
    enc = lambda s: tok.encode(s, add_special_tokens=False)  # noqa: E731
    tag, close = tok.convert_tokens_to_ids(ANSWER_OPEN), tok.convert_tokens_to_ids(ANSWER_CLOSE)
    prompt, reasoning = enc("Will it rise?") + [tag, close], enc("It fell" + "." * extra + " So")
    written = reasoning + ([tag] + enc(answer) + [close] if answer else [])
    return SimpleNamespace(token_ids=prompt + written, gen_mask=[0] * len(prompt) + [1] * len(written),
                           answer=answer)


_YES_NO = [SimpleNamespace(columns={"answer": "Yes", "answer_type": "yes_no"})]


def _padded_gen(rows) -> torch.Tensor:
    """[N, T] the rollouts' generated-token masks, right-padded as StepBatch.batch["gen"]."""
    gen = torch.zeros(len(rows), max(len(r.token_ids) for r in rows))
    for i, r in enumerate(rows):
        gen[i, : len(r.gen_mask)] = torch.tensor(r.gen_mask, dtype=torch.float32)
    return gen


def _breakdown(r_ans: np.ndarray, r_act: np.ndarray) -> RewardBreakdown:
    return RewardBreakdown({"r_ans": r_ans, "r_act": r_act}, r_ans + r_act, {"r_ans": 1.0, "r_act": 1.0})


def test_answer_span_credit_gives_the_span_r_ans_advantage_and_the_rest_the_others(tiny_tokenizer) -> None:
    tok = tiny_tokenizer
    rows = [_rollout(tok, "Yes", 1), _rollout(tok, "No", 2), _rollout(tok, "No", 0), _rollout(tok, None, 3)]
    gen = _padded_gen(rows)
    r_ans, r_act = np.array([1.0, 0.0, 0.0, 0.0]), np.array([0.2, 0.9, 0.4, 0.1])
    br = _breakdown(r_ans, r_act)
    a_tot = group_advantages(torch.tensor(br.total), 4)
    adv, w = answer_span_credit(rows, _YES_NO, br, a_tot, gen, tok, CreditConfig(mode="answer_span"), group_size=4)
    a_ans, a_rest = group_advantages(torch.tensor(r_ans), 4), group_advantages(torch.tensor(r_act), 4)
    span = decision_tokens(rows, gen, tok)
    for i in range(3):  # the word, <answer>, the answer, </answer>: 3 tags and words at least
        assert span[i].sum() >= 3 and span[i, len(rows[i].token_ids) - 1]
        torch.testing.assert_close(adv[i][span[i]], a_ans[i].expand(int(span[i].sum())))
        rest = (gen[i] > 0) & ~span[i]
        torch.testing.assert_close(adv[i][rest], a_rest[i].expand(int(rest.sum())))
    assert not span[3].any()
    torch.testing.assert_close(adv[3][gen[3] > 0], a_tot[3].expand(int(gen[3].sum())))  # sequence credit
    # a change of R_act alone moves the rest's advantages and leaves the span's
    br2 = dataclasses.replace(br, components={"r_ans": r_ans, "r_act": r_act[::-1].copy()}, total=r_ans + r_act[::-1])
    adv2, _ = answer_span_credit(rows, _YES_NO, br2, group_advantages(torch.tensor(br2.total), 4), gen, tok,
                                 CreditConfig(mode="answer_span"), group_size=4)
    assert torch.equal(adv2[span], adv[span]) and not torch.equal(adv2[~span], adv[~span])
    with pytest.raises(ValueError, match="r_ans"):
        answer_span_credit(rows, _YES_NO, RewardBreakdown({"r_act": r_act}, r_act), a_tot, gen, tok,
                           CreditConfig(mode="answer_span"), 4)


def test_without_tags_the_answer_tags_carry_the_rests_advantage(tiny_tokenizer) -> None:
    """answer_tags False: the <answer> and </answer> a rollout writes carry R − R_ans's advantage at the rest's
    weight, its answer words keep R_ans's; the same rollouts with the tags in the span give them R_ans's."""
    tok = tiny_tokenizer
    tag, close = tok.convert_tokens_to_ids(ANSWER_OPEN), tok.convert_tokens_to_ids(ANSWER_CLOSE)
    rows = [_rollout(tok, "Yes", 1), _rollout(tok, "No", 2), _rollout(tok, "No", 0), _rollout(tok, "Yes", 3)]
    gen = _padded_gen(rows)
    r_ans, r_act = np.array([1.0, 0.0, 0.0, 1.0]), np.array([0.2, 0.9, 0.4, 0.1])
    br = _breakdown(r_ans, r_act)
    a_tot = group_advantages(torch.tensor(br.total), 4)
    a_ans, a_rest = group_advantages(torch.tensor(r_ans), 4), group_advantages(torch.tensor(r_act), 4)
    words = CreditConfig(mode="answer_span", answer_tags=False)
    adv, w = answer_span_credit(rows, _YES_NO, br, a_tot, gen, tok, words, group_size=4)
    adv_tags, _ = answer_span_credit(rows, _YES_NO, br, a_tot, gen, tok, CreditConfig(mode="answer_span"), 4)
    for i, r in enumerate(rows):
        n = len(r.token_ids)
        written_tags = [p for p in range(n) if r.gen_mask[p] and r.token_ids[p] in (tag, close)]
        assert len(written_tags) == 2
        for p in written_tags:
            torch.testing.assert_close(adv[i, p], a_rest[i].to(adv.dtype))
            torch.testing.assert_close(adv_tags[i, p], a_ans[i].to(adv.dtype))
        inside = written_tags[0] + 1  # the answer's word inside the tag
        torch.testing.assert_close(adv[i, inside], a_ans[i].to(adv.dtype))
        # the span's weight is now shared by fewer tokens: each of its tokens weighs more than a tag
        assert w[i, inside] > w[i, written_tags[1]]
        torch.testing.assert_close(w[i].sum(), gen[i].sum().to(w.dtype))  # the weights still sum to |o|
    assert words.label == "answer_span (words)"
    with pytest.raises(ValueError, match="answer_tags"):
        CreditConfig(answer_tags=False)


def test_the_trainer_trains_on_the_token_advantages_it_is_given(tiny_policy, tmp_path) -> None:
    """accumulate reads StepBatch.token_adv / token_w: doubling every token's advantage at weight 1 doubles
    the surrogate's gradient (beta 0), and no token advantages is sequence credit."""
    tr = _trainer(tiny_policy, tmp_path)
    sb = tr.sample()
    gen = sb.batch["gen"].float()
    seq, _ = _grad(tr, sb, None)
    doubled, _ = _grad(tr, dataclasses.replace(sb, token_adv=2 * sb.adv.unsqueeze(1) * gen, token_w=gen), None)
    assert any(float(g.abs().sum()) > 0 for g in seq.values())
    for n in seq:
        torch.testing.assert_close(doubled[n], 2 * seq[n], atol=1e-6, rtol=1e-5)


def test_an_answer_span_step_trains_and_differs_from_a_sequence_step(tiny_policy, tmp_path) -> None:
    """The tiny random policy writes an <answer> tag in some rollouts: there the span carries R_ans's
    advantage, so the step's update differs from plain GRPO's from the same start; it moves the parameters
    a plain step moves (the prompt-free fixture leaves the soft-token projector out of both), and each
    rollout's token weights sum to its length."""
    before, after = {}, {}
    for mode in ("sequence", "answer_span"):
        scorer = FuncScorer({"r_ans": lambda p, c, **k: [float("Yes" in x) for x in c],
                             "len": lambda p, c, **k: [float(len(x)) for x in c]})
        tr = _trainer(tiny_policy, tmp_path / mode, scorer, CreditConfig(mode=mode))  # same seed, same policy
        before[mode] = tr.trainable_state()
        if mode == "answer_span":
            sb = tr.sample()
            gen = sb.batch["gen"].float()
            assert decision_tokens(sb.rollouts, gen, tr.engine.tokenizer).any()  # the fixture writes spans
            torch.testing.assert_close(sb.token_w.sum(1), gen.sum(1))
        tr.train_step()
        after[mode] = tr.trainable_state()
    names = list(before["sequence"])
    for n in names:
        torch.testing.assert_close(before["answer_span"][n], before["sequence"][n])
    moved = {m: {n for n in names if not torch.equal(after[m][n], before[m][n])} for m in after}
    assert moved["answer_span"] == moved["sequence"] and len(moved["sequence"]) > len(names) // 2
    assert any(not torch.allclose(after["answer_span"][n], after["sequence"][n]) for n in names)
