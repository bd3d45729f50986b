"""The answer's log-odds on fixed contexts (rl.probe.answer_logodds; grpo_check's teacher-forced version of
the Yes-share claims): it is log p(Yes) − log p(No) from the policy's own logits, summed over a word's
tokens, it reads the context, and the per-gold claims are computed and worded by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from benchmarks.grpo_check.command import logodds_change, logodds_split
from benchmarks.grpo_check.report import blocking_line, logodds_section
from llm.policy import Policy
from llm.special_tokens import ANSWER_OPEN
from rl.answer_span import decision_point
from rl.probe import answer_logodds
from rl.trainer import GRPOSample

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def policy() -> Policy:
    return Policy.load(ROOT / "release" / "tiny" / "sft" / "policy").eval()


def _word_logprob(policy: Policy, ctx: list[int], word: list[int]) -> float:
    """By hand: the log-softmax of the full logits at each of the word's positions."""
    x = torch.tensor([ctx + word])
    with torch.no_grad():
        logp = torch.log_softmax(policy(x, torch.ones_like(x), None).logits[0].float(), -1)
    return float(sum(logp[len(ctx) - 1 + i, t] for i, t in enumerate(word)))


def test_logodds_is_the_next_token_logprob_gap_and_reads_the_context(policy: Policy) -> None:
    tok = policy.tokenizer
    tag = tok.convert_tokens_to_ids(ANSWER_OPEN)
    yes, no = (tok.encode(w, add_special_tokens=False) for w in ("Yes", "No"))
    a = tok.encode("the stock rose 3% and will rise", add_special_tokens=False) + [tag]
    b = tok.encode("volatility fell; the close stays below", add_special_tokens=False) + [tag]
    words = ["Yes", "No"]
    got = answer_logodds(policy, [GRPOSample("p", 0)], [{"query": 0, "ids": a, "words": words},
                                                         {"query": 0, "ids": b, "words": words}])
    want = [_word_logprob(policy, c, yes) - _word_logprob(policy, c, no) for c in (a, b)]
    np.testing.assert_allclose(got, want, atol=1e-4)
    assert abs(got[0] - got[1]) > 1e-4  # another context, another answer distribution
    two = tok.encode("Yes indeed", add_special_tokens=False)  # a word of several tokens: their log-probs summed
    assert len(two) > 1
    got2 = answer_logodds(policy, [GRPOSample("p", 0)], [{"query": 0, "ids": a, "words": ["Yes indeed", "No"]}])
    assert got2[0] == pytest.approx(_word_logprob(policy, a, two) - _word_logprob(policy, a, no), abs=1e-4)


def _logodds(yes_shift: float, no_shift: float) -> dict:
    """2 gold-Yes and 2 gold-No queries, 2 contexts each, start log-odds 0 (+ context noise); seed s's end
    shifts gold-Yes contexts by ``yes_shift`` and gold-No ones by ``no_shift``."""
    rng = np.random.default_rng(0)
    ctx = [{"query": q, "gold": "Yes" if q < 2 else "No", "given": "Yes"} for q in range(4) for _ in range(2)]
    start = rng.normal(0, 0.05, len(ctx))
    shift = np.array([yes_shift if c["gold"] == "Yes" else no_shift for c in ctx])
    end = {s: (start + shift + rng.normal(0, 0.05, len(ctx))).tolist() for s in (0, 1)}
    return {"contexts": ctx, "start": start.tolist(), "end": end}


def test_logodds_change_per_gold_by_hand() -> None:
    lo = _logodds(1.0, 1.0)
    change = logodds_change(lo, [0, 1], n_boot=200)
    start = np.asarray(lo["start"])
    assert change["yes"]["n_queries"] == 2 and change["yes"]["n_contexts"] == 4
    assert change["yes"]["start"] == pytest.approx(start[:4].mean())
    want = np.mean([np.mean(lo["end"][s][:4]) for s in (0, 1)]) - start[:4].mean()
    assert change["yes"]["diff"] == pytest.approx(want)
    assert change["yes"]["verdict"] == "holds" and change["no"]["verdict"] == "holds"  # both rose (claim read: rise)
    assert logodds_change(None, [0, 1], 100) is None


def test_the_split_cancels_a_shared_shift_and_weights_golds_equally() -> None:
    """Δ_Yes = +1.5, Δ_No = +0.5 on 2 + 2 queries: shared (1.5 + 0.5) / 2 = 1.0, toward gold (1.5 − 0.5) / 2 = 0.5.
    With 2 gold-Yes and 4 gold-No queries the golds still weigh half each, not 1/3 and 2/3."""
    lo = _logodds(1.5, 0.5)
    split = logodds_split(lo, [0, 1], n_boot=200)
    change = logodds_change(lo, [0, 1], n_boot=200)
    assert split["shared"]["diff"] == pytest.approx((change["yes"]["diff"] + change["no"]["diff"]) / 2)
    assert split["toward_gold"]["diff"] == pytest.approx((change["yes"]["diff"] - change["no"]["diff"]) / 2)
    assert split["shared"]["diff"] == pytest.approx(1.0, abs=0.1) and split["toward_gold"]["verdict"] == "holds"
    one_prior = logodds_split(_logodds(-1.0, -1.0), [0, 1], n_boot=200)  # the same shift on both golds
    assert abs(one_prior["toward_gold"]["diff"]) < 0.1 and one_prior["toward_gold"]["verdict"] == "tie"
    assert one_prior["shared"]["verdict"] == "worse"  # toward No
    text = logodds_section({"logodds_change": logodds_change(_logodds(-1.0, -1.0), [0, 1], n_boot=200),
                            "logodds_split": one_prior, "answer_contexts": 2, "context_seed": 7})
    assert "(Δ_Yes + Δ_No) / 2: -1.0" in text and "toward No, beyond its interval" in text
    assert "2 gold-Yes and 2 gold-No queries" in text and "no verdict rests on it" in text
    toward = next(line for line in text.splitlines() if "the shared shift cancelled" in line)
    assert f"(Δ_Yes − Δ_No) / 2: {one_prior['toward_gold']['diff']:+.2f} [" in toward and "**tie**" in toward
    # 2 gold-Yes queries moved +2 and +1, 4 gold-No ones +0, +0, +0, +3 (one context each, start 0, both seeds):
    # the golds weigh half each, Δ_Yes = 1.5 and Δ_No = 0.75, not the pooled means over 6 queries
    moves = [2.0, 1.0, 0.0, 0.0, 0.0, 3.0]
    uneven = {"contexts": [{"query": q, "gold": "Yes" if q < 2 else "No"} for q in range(6)], "start": [0.0] * 6,
              "end": {0: moves, 1: moves}}
    got = logodds_split(uneven, [0, 1], n_boot=200)
    assert got["toward_gold"]["diff"] == pytest.approx((1.5 - 0.75) / 2)
    assert got["shared"]["diff"] == pytest.approx((1.5 + 0.75) / 2)
    # seed 0 moves every query +4, seed 1 every query -4, and seed 0 also +1 toward each gold: the pooled
    # shared shift is ~0, each seed's own reads +4 / -4 (seed 0: shared (5 + 3) / 2, toward (5 - 3) / 2)
    walk = {"contexts": [{"query": q, "gold": "Yes" if q < 2 else "No"} for q in range(4)], "start": [0.0] * 4,
            "end": {0: [5.0, 5.0, 3.0, 3.0], 1: [-4.0] * 4}}
    per_seed = logodds_split(walk, [0, 1], n_boot=200)
    assert per_seed["shared"]["diff"] == pytest.approx(0.0) and per_seed["per_seed"] == {
        "0": {"shared": 4.0, "toward_gold": 1.0}, "1": {"shared": -4.0, "toward_gold": 0.0}}
    walk_text = logodds_section({"logodds_change": logodds_change(walk, [0, 1], n_boot=200), "logodds_split": per_seed,
                                 "answer_contexts": 1, "context_seed": 7})
    assert "seed 0: shared +4.00, toward gold +1.00; seed 1: shared -4.00, toward gold +0.00" in walk_text
    older = {k: v for k, v in per_seed.items() if k != "per_seed"}  # a summary written before seeds were recorded
    assert "per training seed" not in logodds_section({"logodds_change": None, "logodds_split": older,
                                                        "answer_contexts": 1, "context_seed": 7})
    lone = _logodds(1.0, 1.0)
    lone["contexts"] = [{**c, "gold": "Yes" if c["query"] < 3 else "No"} for c in lone["contexts"]]
    assert logodds_split(lone, [0, 1], 100) is None and logodds_split(None, [0, 1], 100) is None  # 1 gold-No query


@pytest.mark.parametrize(("shifts", "words"), [
    ((1.0, -1.0), "the answer is learnt per query"),
    ((1.0, 1.0), "the answer shifts as one prior over queries"),
    ((0.0, 0.0), "the log-odds cannot tell an answer learnt per query from one prior"),
])
def test_the_logodds_section_reads_each_golds_interval(shifts, words) -> None:
    change = logodds_change(_logodds(*shifts), [0, 1], n_boot=200)
    text = logodds_section({"logodds_change": change, "answer_contexts": 2, "context_seed": 7})
    assert "## The answer's log-odds on fixed contexts" in text and "the 8 that reached `<answer>`" in text
    assert "(sampling seed 7)" in text
    assert "the log-odds of Yes rises on the 2 gold-Yes queries" in text and words in text


def test_the_decision_point_is_the_last_written_yes_or_no_before_the_tag() -> None:
    """Tokens: 5 = " Yes", 6 = " No", 9 = <answer>; mask 0 = prompt or tool observation."""
    ids = [1, 6, 2, 3, 5, 4, 6, 7, 9, 6]
    gen = [0, 0, 1, 1, 1, 1, 1, 1, 1, 1]
    assert decision_point(ids, gen, 9, [5, 6]) == 6  # "... is No ." <answer>: the conclusion's word
    assert decision_point([1, 6, 2, 9, 5], [0, 0, 1, 1, 1], 9, [5, 6]) == 4  # none written (the prompt's
    # " No" is not the model's): right after the tag
    assert decision_point([1, 5, 2, 3], [0, 1, 1, 1], 9, [5, 6]) is None  # no tag: no context
    assert decision_point([1, 6, 5, 9], [0, 1, 0, 1], 9, [5, 6]) == 1  # an observation's " Yes" is not a decision


def _summary(change: dict | None, share: float, key: str = "logodds_change") -> dict:
    return {"per_step": {"reward/var_share/r_ans": {1: {"mean": share - 0.05}, 2: {"mean": share + 0.05}}},
            key: change}


def test_the_blocking_line_names_r_ans_only_on_its_evidence() -> None:
    one_prior = logodds_change(_logodds(-1.5, -1.5), [0, 1], n_boot=200)
    line = blocking_line(_summary(one_prior, 0.65))
    assert line.startswith("Which component blocks it: **R_ans**. It carries 65% of the within-group")
    assert "the answer moved as one prior over all queries (the log-odds of Yes -1." in line and "on fixed contexts" in line
    # a share below half: the prior moved, but R_ans does not set most of the advantage
    assert "not settled" in blocking_line(_summary(one_prior, 0.3)) and "as one prior" in blocking_line(_summary(one_prior, 0.3))
    tie = logodds_change(_logodds(0.0, 0.0), [0, 1], n_boot=200)
    assert "in a way these intervals cannot tell" in blocking_line(_summary(tie, 0.65))
    assert "no per-query answers" in blocking_line(_summary(None, 0.65))
    assert "other components" not in line  # no per-component intervals: nothing said of them
    iv = {"r_ans": {"interval": {"verdict": "tie"}}, "r_act": {"interval": {"verdict": "holds"}},
          "r_prec": {"interval": {"verdict": "tie"}}, "r_cons": {"mean": 0.1, "std": 0.0}}  # r_cons: no interval
    line = blocking_line({**_summary(one_prior, 0.65), "rise_components": iv})
    assert line.endswith("The other components' rises read (per component, above): r_act holds, r_prec tie.")
