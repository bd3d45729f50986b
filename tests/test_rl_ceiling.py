"""rl.ceiling: the contexts' split and the oracle's weights by hand, the oracle lowers its loss and moves the
answers it trains on toward their golds through every trainable weight, and a resumed oracle does exactly what
an uninterrupted one does."""

import math

import pytest
import torch

from llm.rollout import RolloutEngine
from llm.special_tokens import ts_placeholders
from rl.ceiling import _query_weights, gold_sign, oracle_step, read_logodds, run_oracle, split_contexts
from rl.grpo import GRPOLossConfig
from rl.soft_tokens import soft_tokens
from rl.trainer import FuncScorer, GRPOSample, GRPOTrainConfig, GRPOTrainer


def _trainer(tiny_policy, out) -> GRPOTrainer:
    torch.manual_seed(0)
    pol = tiny_policy(d_ts=8)
    eng = RolloutEngine(pol, pol.tokenizer, [], max_new_tokens=6, temperature=1.0)
    g = torch.Generator().manual_seed(0)
    samples = [GRPOSample(pol.tokenizer.apply_chat_template([{"role": "user", "content": f"Will {i} rise? {ts_placeholders(2)}"}],
                                                           tokenize=False, add_generation_prompt=True), i,
                          columns={"answer": "Yes" if i % 2 else "No", "answer_type": "yes_no"},
                          ts_tokens=torch.randn(2, 8, generator=g), uncertainty=0.2)  # [K, d]: the prompt's 2 soft tokens
               for i in range(4)]
    cfg = GRPOTrainConfig(group_size=2, queries_per_step=4, max_steps=1, lr=1e-3, accelerator="cpu",
                          loss=GRPOLossConfig(beta=0.0), max_grad_norm=1.0)
    return GRPOTrainer(pol, eng, samples, FuncScorer({"len": lambda p, c, **kw: [0.0] * len(c)}), cfg, out)


def _contexts(tr: GRPOTrainer, per_query: int = 3) -> list[dict]:
    tok = tr.engine.tokenizer
    return [{"query": q, "gold": tr.samples[q].columns["answer"], "words": ["Yes", "No"],
             "ids": tok.encode(tr.samples[q].prompt, add_special_tokens=False) + tok.encode(f" fact {k}", add_special_tokens=False)}
            for q in range(4) for k in range(per_query)]


def test_gold_sign_and_the_split_by_hand() -> None:
    assert gold_sign(" yes") == 1.0 and gold_sign("No") == -1.0
    with pytest.raises(ValueError, match="yes/no golds, got 'Maybe'"):
        gold_sign("Maybe")
    gold = {0: "No", 1: "Yes", 2: "No", 3: "Yes"}
    queries = [0, 0, 0, 1, 1, 2, 3, 2, 3, 1]  # query 2 and 3 interleaved: the split follows each query's own order
    ctx = [{"query": q, "gold": gold[q]} for q in queries]
    train, read = split_contexts(ctx)
    assert read == [0, 2, 3, 5, 6, 9] and train == [1, 4, 7, 8]
    # the loss weighs every query equally, however many contexts it has: 1 / (4 queries x its contexts)
    assert _query_weights(ctx, read) == {0: 1 / 8, 2: 1 / 8, 3: 1 / 8, 5: 1 / 4, 6: 1 / 4, 9: 1 / 8}
    with pytest.raises(ValueError, match="gold-Yes queries with two or more contexts"):
        split_contexts([{"query": q, "gold": gold[q]} for q in (0, 0, 2, 2, 1, 3, 3)])


def test_the_oracle_lowers_its_loss_through_every_trainable_weight(tiny_policy, tmp_path) -> None:
    tr = _trainer(tiny_policy, tmp_path)
    ctx = _contexts(tr)
    train, read = split_contexts(ctx)
    ts = soft_tokens(tr.samples)
    before = {n: p.detach().clone() for n, p in tr.policy.named_parameters() if p.requires_grad}
    z0 = read_logodds(tr, ts, ctx, train)
    first = oracle_step(tr, ts, ctx, train)
    # the loss is the mean over queries of softplus(-s z) on their train contexts (one each here), read by hand
    want = sum(math.log1p(math.exp(-gold_sign(ctx[i]["gold"]) * z)) for i, z in zip(train, z0, strict=True)) / 4
    assert first["loss"] == pytest.approx(want, rel=1e-5) and first["train_logodds"] == pytest.approx(z0, abs=1e-6)
    assert first["grad_norm"] > 0
    changed = [n for n, p in tr.policy.named_parameters() if p.requires_grad and not torch.equal(p.detach(), before[n])]
    assert sorted(changed) == sorted(before)  # every trainable weight moved
    for _ in range(3):
        last = oracle_step(tr, ts, ctx, train)
    assert last["loss"] < first["loss"]
    moved = [gold_sign(ctx[i]["gold"]) * (b - a) for i, a, b in zip(train, z0, last["train_logodds"], strict=True)]
    assert sum(moved) > 0  # the trained-on answers moved toward their golds


def test_a_resumed_oracle_does_what_an_uninterrupted_one_does(tiny_policy, tmp_path) -> None:
    whole = _trainer(tiny_policy, tmp_path / "whole")
    ctx = _contexts(whole)
    want = run_oracle(whole, whole.samples, ctx, steps=3, log=lambda _: None)
    assert [r["step"] for r in want] == [0, 1, 2, 3] and want[-1]["loss"] is None
    assert all(len(r["read_logodds"]) == len(want[0]["read"]) for r in want)
    cut = _trainer(tiny_policy, tmp_path / "cut")
    run_oracle(cut, cut.samples, ctx, steps=2, log=lambda _: None)  # killed after step 2's checkpoint
    again = _trainer(tiny_policy, tmp_path / "cut")
    assert again.resume() and again.step == 2
    got = run_oracle(again, again.samples, ctx, steps=3, log=lambda _: None)
    strip = [{k: v for k, v in r.items() if k != "time_s"} for r in got]
    assert strip == [{k: v for k, v in r.items() if k != "time_s"} for r in want]
