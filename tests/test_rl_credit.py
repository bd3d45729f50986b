"""rl.credit: the split of a step's gradient is exact, the answer's tokens are found where a rollout states
them, Adam's first step and its first-order move by hand, and the predicted move matches the real one."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from llm.rollout import RolloutEngine
from llm.special_tokens import ANSWER_CLOSE, ANSWER_OPEN
from rl.answer_span import decision_tokens
from rl.credit import (
    adam_first_step,
    applied_moves,
    cosine,
    linear_step,
    logodds_gradients,
    predicted_moves,
    trainable,
)
from rl.grpo import CreditConfig, GRPOLossConfig
from rl.probe import answer_logodds
from rl.trainer import FuncScorer, GRPOSample, GRPOTrainConfig, GRPOTrainer


def _trainer(tiny_policy, tmp_path, scorer: FuncScorer | None = None, credit: CreditConfig = CreditConfig(),
             precision: str = "32-true") -> GRPOTrainer:
    torch.manual_seed(0)
    pol = tiny_policy(d_ts=8)
    eng = RolloutEngine(pol, pol.tokenizer, [], max_new_tokens=6, temperature=1.0)
    g = torch.Generator().manual_seed(0)
    samples = [GRPOSample(pol.tokenizer.apply_chat_template([{"role": "user", "content": f"Will {i} rise?"}],
                                                           tokenize=False, add_generation_prompt=True), i,
                          columns={"answer": "Yes" if i % 2 else "No", "answer_type": "yes_no"},
                          ts_tokens=torch.randn(2, 8, generator=g), uncertainty=0.2) for i in range(4)]
    cfg = GRPOTrainConfig(group_size=4, queries_per_step=2, max_steps=1, lr=1e-2, accelerator="cpu", micro_batch=3,
                          loss=GRPOLossConfig(beta=0.0), credit=credit, precision=precision)  # no reference: the surrogate
    scorer = scorer or FuncScorer({"len": lambda p, c, **kw: [float(len(x)) for x in c]})
    return GRPOTrainer(pol, eng, samples, scorer, cfg, tmp_path)


def _grad(tr: GRPOTrainer, sb, tokens) -> tuple[dict[str, torch.Tensor], float]:
    tr.opt.zero_grad(set_to_none=True)
    acc = tr.accumulate(sb, None, None, grad_tokens=tokens)
    return {n: p.grad.clone() for n, p in trainable(tr).items() if p.grad is not None}, acc["loss"]


def test_the_gradient_of_a_step_splits_exactly_over_disjoint_tokens(tiny_policy, tmp_path) -> None:
    tr = _trainer(tiny_policy, tmp_path)
    sb = tr.sample()
    gen = sb.batch["gen"].bool()
    some = gen & (torch.rand(gen.shape, generator=torch.Generator().manual_seed(1)) < 0.3)
    full, loss_full = _grad(tr, sb, None)
    part, loss_part = _grad(tr, sb, some)
    other, _ = _grad(tr, sb, gen & ~some)
    everything, _ = _grad(tr, sb, torch.ones_like(gen))
    assert loss_part == pytest.approx(loss_full, abs=1e-7)  # the loss value does not change, only its graph
    assert any(float(g.abs().sum()) > 0 for g in part.values())
    for n in full:
        torch.testing.assert_close(part[n] + other[n], full[n], atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(everything[n], full[n])
    assert cosine(part, full) < 0.999  # a part is not the whole


def test_decision_tokens_are_the_conclusions_word_and_the_answer_span(tiny_tokenizer) -> None:
    tok = tiny_tokenizer
    enc = lambda s: tok.encode(s, add_special_tokens=False)  # noqa: E731
    tag, close = tok.convert_tokens_to_ids(ANSWER_OPEN), tok.convert_tokens_to_ids(ANSWER_CLOSE)
    # answer words the fixture tokenizer spells as one token after a space (as SmolLM2 spells " Yes" / " No")
    words = (tok.decode([i]) for i in range(len(tok)))
    yes, no = [w[1:] for w in words if w[:1] == " " and w[1:].isalpha() and len(enc(w)) == 1][:2]
    # the prompt shows the format with the same tag tokens (as llm/qa/prompt.py does): not the model's answer
    prompt = enc("Will it rise? Finish with") + [tag] + enc("...") + [close]
    reasoning = enc("It fell. So the answer is")
    ids = prompt + reasoning + enc(" " + no) + [tag] + enc(no) + [close]
    gen = [0] * len(prompt) + [1] * (len(ids) - len(prompt))
    silent = SimpleNamespace(token_ids=prompt + reasoning, gen_mask=[0] * len(prompt) + [1] * len(reasoning))
    rows = [SimpleNamespace(token_ids=ids, gen_mask=gen), silent]
    g = torch.zeros(2, len(ids) + 2)  # right padding
    g[0, : len(ids)] = torch.tensor(gen, dtype=torch.float32)
    g[1, : len(silent.token_ids)] = torch.tensor(silent.gen_mask, dtype=torch.float32)
    j = len(prompt) + len(reasoning)
    mask = decision_tokens(rows, g, tok, yes=yes, no=no)
    assert mask[0].nonzero().flatten().tolist() == list(range(j, len(ids)))  # the word, <answer>, word, </answer>
    assert not mask[1].any()  # no <answer>: nothing states an answer
    # words of several tokens have no single decision token: only the <answer> span counts
    span = decision_tokens(rows, g, tok, yes="Yes", no="No")
    assert len(enc(" No")) > 1 and span[0].nonzero().flatten().tolist() == list(range(j + 1, len(ids)))
    # tags=False: the conclusion's word and what the tag holds, neither tag
    words_only = decision_tokens(rows, g, tok, yes=yes, no=no, tags=False)
    assert words_only[0].nonzero().flatten().tolist() == [j, *range(j + 2, len(ids) - 1)]
    assert not words_only[1].any()
    # an answer never closed keeps its written tail (the run-on its R_ans penalty should push down), not the tag
    run_on = ids[:-1] + enc(" and more")
    rows_open = [SimpleNamespace(token_ids=run_on, gen_mask=[0] * len(prompt) + [1] * (len(run_on) - len(prompt)))]
    g_open = torch.tensor([rows_open[0].gen_mask], dtype=torch.float32)
    assert decision_tokens(rows_open, g_open, tok, yes=yes, no=no, tags=False)[0].nonzero().flatten().tolist() == \
        [j, *range(j + 2, len(run_on))]


def test_adam_first_step_and_the_predicted_move_by_hand() -> None:
    g = {"a": torch.tensor([2.0, -0.5, 0.0]), "b": torch.tensor([[1e-3]])}
    u = adam_first_step(g, lr=0.1, eps=1e-8)
    torch.testing.assert_close(u["a"], torch.tensor([-0.1, 0.1, 0.0]), atol=1e-8, rtol=1e-6)
    torch.testing.assert_close(u["b"], torch.tensor([[-0.1]]), atol=1e-6, rtol=1e-4)
    lo = {0: {"a": torch.tensor([1.0, 1.0, 5.0]), "b": torch.tensor([[-2.0]])}}
    # -0.1 * 1 + 0.1 * 1 + 0 * 5 + (-0.1) * (-2) = +0.2
    assert predicted_moves(u, lo) == {0: pytest.approx(0.2, rel=1e-4)}  # eps shaves 1e-5 off the 1e-3 entry


def test_linear_step_by_hand() -> None:
    g = {"a": torch.tensor([3.0, -4.0]), "b": torch.tensor([[0.0, 0.0]])}
    u = linear_step(g, lr=0.1)  # rms = sqrt((9 + 16) / 4) = 2.5
    torch.testing.assert_close(u["a"], torch.tensor([-0.12, 0.16]))
    torch.testing.assert_close(u["b"], torch.zeros(1, 2))
    assert float(sum(x.pow(2).sum() for x in u.values()) / 4) ** 0.5 == pytest.approx(0.1)  # per-weight RMS = lr
    # linear: the update of g1 + g2 at a shared scale is the sum of their updates (adam_first_step is not)
    g1, g2 = {"a": torch.tensor([1.0, 0.0])}, {"a": torch.tensor([-1.0, 1e-3])}
    both = linear_step({"a": g1["a"] + g2["a"]}, lr=0.1)["a"]
    assert both[0] == 0 and both[1] < 0
    assert adam_first_step({"a": g1["a"] + g2["a"]}, lr=0.1)["a"][1] == pytest.approx(-0.1, rel=1e-4)
    assert linear_step({"a": torch.zeros(3)}, lr=0.1)["a"].abs().sum() == 0


def test_the_predicted_first_order_move_matches_the_applied_one(tiny_policy, tmp_path) -> None:
    """Take a small step along the log-odds gradient's sign: the real change of each query's log-odds
    (``applied_moves``) is what ``predicted_moves`` says, to first order, and the weights come back."""
    tr = _trainer(tiny_policy, tmp_path)
    tok = tr.engine.tokenizer
    contexts = [{"query": q, "gold": tr.samples[q].columns["answer"], "words": ["Yes", "No"],
                 "ids": tok.encode(tr.samples[q].prompt, add_special_tokens=False) + tok.encode(f" fact {k}", add_special_tokens=False)}
                for q in range(4) for k in range(2)]
    lo = logodds_gradients(tr, tr.samples, contexts, per_query=2)
    assert sorted(lo) == [0, 1, 2, 3]
    # ascend query 0's log-odds; a tiny lr keeps the first-order term dominant
    step = adam_first_step({n: -g for n, g in lo[0].items()}, lr=1e-5)
    predicted = predicted_moves(step, lo)
    weights = {n: p.detach().clone() for n, p in trainable(tr).items()}
    before = np.array(answer_logodds(tr.policy, tr.samples, contexts)).reshape(4, 2).mean(1)
    real = applied_moves(tr, tr.samples, contexts, 2, {"up": step, "down": {n: -u for n, u in step.items()}})
    assert predicted[0] > 0 and real["up"][0] == pytest.approx(predicted[0], rel=0.05)
    assert real["down"][0] == pytest.approx(-predicted[0], rel=0.05)
    for q in range(1, 4):
        assert real["up"][q] == pytest.approx(predicted[q], rel=0.1, abs=0.05 * predicted[0])
    assert all(torch.equal(p, weights[n]) for n, p in trainable(tr).items())  # restored
    np.testing.assert_array_equal(np.array(answer_logodds(tr.policy, tr.samples, contexts)).reshape(4, 2).mean(1), before)


def test_logodds_gradients_under_mixed_precision(tiny_policy, tmp_path) -> None:
    """Under bf16-mixed, Fabric refuses a bare ``loss.backward()``: the log-odds gradients go through
    ``fabric.backward`` and agree with full precision's to bf16's rounding."""
    grads = {}
    for precision in ("32-true", "bf16-mixed"):
        tr = _trainer(tiny_policy, tmp_path / precision, precision=precision)
        tok = tr.engine.tokenizer
        contexts = [{"query": q, "gold": "Yes", "words": ["Yes", "No"],
                     "ids": tok.encode(tr.samples[q].prompt, add_special_tokens=False)} for q in range(2)]
        grads[precision] = logodds_gradients(tr, tr.samples, contexts, per_query=1)
    full, mixed = grads["32-true"][0], grads["bf16-mixed"][0]
    assert any(float(g.abs().sum()) > 0 for g in mixed.values())
    assert cosine(full, mixed) > 0.95
