"""token_logprobs / entropy against a manual computation; padding invariance; banned tokens."""

from __future__ import annotations

import math

import pytest
import torch

from llm.logprobs import logprob_gap, masked_mean, pad_sequences, token_logprobs, token_logprobs_and_entropy
from llm.policy import Policy, PolicyConfig
from llm.special_tokens import FORECAST_TS_OPEN, ts_placeholders


@pytest.fixture(scope="module")
def setup(tiny_tokenizer):
    tok = tiny_tokenizer
    torch.manual_seed(0)
    pol = Policy(PolicyConfig(d_ts=4, lora_r=0, tiny_hidden=32, tiny_intermediate=64), tokenizer=tok).eval()
    return tok, pol


def test_pad_sequences_left_and_right():
    ids, att, m = pad_sequences([[5, 6, 7], [8]], pad_id=0, masks=[[0, 1, 1], [1]], side="left")
    assert ids.tolist() == [[5, 6, 7], [0, 0, 8]] and att.tolist() == [[1, 1, 1], [0, 0, 1]]
    assert m.tolist() == [[0, 1, 1], [0, 0, 1]]
    ids, att, _ = pad_sequences([[5, 6, 7], [8]], pad_id=9)
    assert ids.tolist() == [[5, 6, 7], [8, 9, 9]] and att.tolist() == [[1, 1, 1], [1, 0, 0]]
    with pytest.raises(ValueError, match="row 0: mask length 2"):
        pad_sequences([[1, 2, 3]], 0, masks=[[1, 1]])


def test_matches_manual_log_softmax_and_entropy(setup):
    tok, pol = setup
    seq = tok(f"close 3 {ts_placeholders(2)} rose by 1.5 percent", add_special_tokens=False).input_ids
    ids = torch.tensor([seq])
    ts = torch.randn(1, 2, 4)
    with torch.no_grad():
        lp, ent = token_logprobs_and_entropy(pol, ids, torch.ones_like(ids), ts)
        logits = pol(ids, ts_tokens=ts).logits[0].double()
    assert lp.shape == ids.shape and lp[0, 0] == 0
    for t in range(1, len(seq)):
        p = torch.softmax(logits[t - 1], -1)
        assert lp[0, t].item() == pytest.approx(math.log(p[seq[t]].item()), abs=1e-5)
        assert ent[0, t].item() == pytest.approx(-(p * p.log()).sum().item(), abs=1e-4)
    # temperature divides the logits
    with torch.no_grad():
        lp2 = token_logprobs(pol, ids, torch.ones_like(ids), ts, temperature=2.0)
    p2 = torch.softmax(logits[0] / 2.0, -1)
    assert lp2[0, 1].item() == pytest.approx(math.log(p2[seq[1]].item()), abs=1e-5)


def test_padding_invariance_and_masking(setup):
    tok, pol = setup
    a = tok("close 7 rose by 3.5 percent", add_special_tokens=False).input_ids
    b = tok("close 1", add_special_tokens=False).input_ids
    with torch.no_grad():
        single = token_logprobs(pol, torch.tensor([b]), torch.ones(1, len(b), dtype=torch.long))
        for side in ("left", "right"):
            ids, att, _ = pad_sequences([a, b], tok.pad_token_id, side=side)
            lp = token_logprobs(pol, ids, att)
            row = lp[1, -len(b):] if side == "left" else lp[1, : len(b)]
            torch.testing.assert_close(row, single[0], atol=1e-5, rtol=1e-5)
            assert (lp[1][att[1] == 0] == 0).all()


def test_banned_tokens_give_zero_not_nan_and_renormalise(setup):
    tok, pol = setup
    obs = tok.convert_tokens_to_ids(FORECAST_TS_OPEN)
    seq = tok("close 2 rose", add_special_tokens=False).input_ids + [obs] + tok(" by", add_special_tokens=False).input_ids
    ids = torch.tensor([seq])
    with torch.no_grad():
        free = token_logprobs(pol, ids, torch.ones_like(ids))
    mask = torch.ones_like(ids)
    lp = token_logprobs(pol, ids, mask, banned_token_ids=[obs])
    k = seq.index(obs)
    assert lp[0, k] == 0 and torch.isfinite(lp).all()
    # other tokens: renormalised over the remaining vocabulary, so their log-prob rises
    assert (lp[0, 1:k] > free[0, 1:k]).all()
    loss = -masked_mean(lp, (ids != obs).long())
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in pol.parameters() if p.grad is not None)
    pol.zero_grad()


def test_logprob_gap_by_hand() -> None:
    a = torch.tensor([[0.0, -1.0, -2.0], [0.0, -3.0, -1.0]])
    b = torch.tensor([[0.0, -1.5, -2.0], [-9.0, -2.0, -1.25]])
    mask = torch.tensor([[0, 1, 1], [0, 1, 1]])  # position 0 (a prompt token) is left out
    g = logprob_gap(a, b, mask)
    assert g["tokens"] == 4
    assert g["token_mean"] == pytest.approx((0.5 + 0 + 1 + 0.25) / 4) and g["token_max"] == pytest.approx(1.0)
    assert g["token_p99"] == pytest.approx(0.5 + 0.97 * 0.5)  # sorted 0, .25, .5, 1: linear at rank 0.99 x 3
    # per row: |0.5 + 0| and |-1 + 0.25|: signed sums, so gaps of opposite sign cancel within a row
    assert g["row_sum_mean"] == pytest.approx((0.5 + 0.75) / 2) and g["row_sum_max"] == pytest.approx(0.75)


def test_logprob_gap_refuses_misaligned_or_empty_input() -> None:
    with pytest.raises(ValueError, match="shapes"):
        logprob_gap(torch.zeros(2, 3), torch.zeros(2, 4), torch.ones(2, 3))
    with pytest.raises(ValueError, match="no token"):
        logprob_gap(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2, 3))
