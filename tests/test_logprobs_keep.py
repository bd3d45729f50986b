"""token_logprobs(logits_to_keep=k): same values on the kept span as the full computation, zeros
before it, and the policy really builds only k + 1 rows of logits."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from llm.logprobs import keep_for_mask, pad_sequences, token_logprobs, token_logprobs_and_entropy
from llm.special_tokens import ts_placeholders
from tests.test_llm_logprobs import setup as policy_setup  # noqa: F401  (the shared tiny policy fixture)


class LogitRows(nn.Module):
    """Forwards to a policy and records how many positions of logits each call returned."""

    def __init__(self, policy: nn.Module):
        super().__init__()
        self.policy, self.rows = policy, []

    def forward(self, *args, **kw):
        out = self.policy(*args, **kw)
        self.rows.append(out.logits.shape[1])
        return out


@pytest.fixture(scope="module")
def setup(policy_setup):  # noqa: F811  (pytest injects the imported fixture)
    tok, pol = policy_setup
    seqs = [tok(f"close {i} {ts_placeholders(2)} rose by {i}.5 percent close {i + 1}", add_special_tokens=False).input_ids
            for i in (3, 12)]
    seqs[1] = seqs[1][:-3]  # unequal lengths: padding on one row
    return tok, pol, seqs


@pytest.mark.parametrize("side", ["left", "right"])
def test_kept_span_equals_full_computation(setup, side) -> None:
    tok, pol, seqs = setup
    ids, att, _ = pad_sequences(seqs, tok.pad_token_id, side=side)
    ts = torch.randn(2, 2, 4)
    banned = [tok.convert_tokens_to_ids("<ts>")]
    rec = LogitRows(pol)
    t = ids.shape[1]
    with torch.no_grad():
        full = token_logprobs(rec, ids, att, ts, temperature=0.7, banned_token_ids=banned)
        for k in (1, 4, t - 2):
            kept = token_logprobs(rec, ids, att, ts, temperature=0.7, banned_token_ids=banned, logits_to_keep=k)
            assert rec.rows[-1] == k + 1  # the LM head ran on k + 1 positions only
            assert kept.shape == full.shape
            torch.testing.assert_close(kept[:, t - k:], full[:, t - k:], rtol=0, atol=1e-6)
            assert torch.all(kept[:, : t - k] == 0)
            assert bool((full[:, t - k:] != 0).any())  # the span holds real log-probs, not only zeros
    assert rec.rows[0] == t  # the reference call built every position


def test_entropy_variant_and_full_fallback(setup) -> None:
    tok, pol, seqs = setup
    ids, att, _ = pad_sequences(seqs, tok.pad_token_id, side="left")
    t = ids.shape[1]
    with torch.no_grad():
        lp, ent = token_logprobs_and_entropy(pol, ids, att)
        lp5, ent5 = token_logprobs_and_entropy(pol, ids, att, logits_to_keep=5)
        lp_all = token_logprobs(pol, ids, att, logits_to_keep=t + 3)  # k >= T - 1: the full computation
    torch.testing.assert_close(lp5[:, -5:], lp[:, -5:], rtol=0, atol=1e-6)
    torch.testing.assert_close(ent5[:, -5:], ent[:, -5:], rtol=0, atol=1e-6)
    assert torch.all(ent5[:, :-5] == 0) and bool((ent[:, :-5] > 0).any())
    torch.testing.assert_close(lp_all, lp, rtol=0, atol=0)
    with pytest.raises(ValueError, match="logits_to_keep must be >= 0"):
        token_logprobs(pol, ids, att, logits_to_keep=-1)


def test_masked_loss_and_gradient_unchanged(setup) -> None:
    """What SFT/GRPO compute: a loss over a completion mask, with k from keep_for_mask."""
    tok, pol, seqs = setup
    ids, att, _ = pad_sequences(seqs, tok.pad_token_id, side="right")
    mask = torch.zeros_like(ids)
    mask[0, 9:12] = 1
    mask[1, 7:10] = 1
    k = keep_for_mask(mask)
    assert k == ids.shape[1] - 7
    grads = []
    for keep in (0, k):
        pol.zero_grad(set_to_none=True)
        loss = -(token_logprobs(pol, ids, att, logits_to_keep=keep) * mask).sum() / mask.sum()
        loss.backward()
        grads.append((loss.detach(), pol.model.get_input_embeddings().weight.grad.clone()))
    torch.testing.assert_close(grads[1][0], grads[0][0], rtol=0, atol=1e-6)
    torch.testing.assert_close(grads[1][1], grads[0][1], rtol=1e-5, atol=1e-7)


def test_keep_for_mask_by_hand() -> None:
    m = torch.tensor([[0, 0, 0, 1, 1, 0], [0, 0, 0, 0, 1, 1]])
    assert keep_for_mask(m) == 3
    assert keep_for_mask(torch.tensor([[1, 0, 0]])) == 3
    assert keep_for_mask(torch.zeros(2, 4, dtype=torch.long)) == 1
