"""Sampling on the logits' device with a seeded per-device generator (CPU: the stream of the earlier
host-side sampler, bit for bit), and chunked prefill (logits and rollouts equal to the unchunked ones)."""

from __future__ import annotations

import pytest
import torch

from llm.hf_backend import HFBackend
from llm.logprobs import pad_sequences
from llm.policy import Policy, PolicyConfig
from llm.rollout import RolloutEngine
from llm.sampling import SeededGenerator, TokenSampler
from llm.special_tokens import ts_placeholders
from llm.tokenizer import chat_prompt


@pytest.fixture(scope="module")
def tok(tiny_tokenizer):
    """The session tokenizer (tests/conftest.py): these tests compare two decodes of the same text."""
    return tiny_tokenizer


def _old_sample(logits, temperature, top_p, banned, gen):
    """The sampler before this change: probabilities to the host, CPU multinomial."""
    logits = logits.float().clone()
    logits[:, banned] = float("-inf")
    logp = torch.log_softmax(logits / temperature, -1)
    probs = logp.exp()
    if top_p < 1:
        sp, si = probs.sort(-1, descending=True)
        probs = probs.scatter(-1, si, sp.masked_fill(sp.cumsum(-1) - sp > top_p, 0.0))
    tok = torch.multinomial(probs.cpu(), 1, generator=gen).squeeze(-1).to(logits.device)
    return tok, logp.gather(-1, tok[:, None]).squeeze(-1)


@pytest.mark.parametrize("top_p", [1.0, 0.8])
def test_cpu_sampling_is_the_old_stream_and_a_function_of_the_seed(top_p):
    logits = torch.randn(6, 50, generator=torch.Generator().manual_seed(0)) * 3
    banned = [1, 7]
    sampler = TokenSampler(0.9, top_p, banned, SeededGenerator(11))
    old_gen = torch.Generator().manual_seed(11)
    draws = []
    for _ in range(5):
        tok, lp = sampler(logits)
        ref_tok, ref_lp = _old_sample(logits, 0.9, top_p, banned, old_gen)
        assert torch.equal(tok, ref_tok) and torch.equal(lp, ref_lp)
        assert not set(tok.tolist()) & set(banned)
        draws.append(tok)
    sampler.generator.manual_seed(11)
    assert all(torch.equal(sampler(logits)[0], d) for d in draws)
    sampler.generator.manual_seed(12)
    assert not all(torch.equal(sampler(logits)[0], d) for d in draws)


def test_generator_is_per_device_and_reseeded_together():
    gen = SeededGenerator(5)
    cpu = gen.for_device("cpu")
    assert cpu.device.type == "cpu" and gen.for_device(torch.device("cpu")) is cpu and cpu.initial_seed() == 5
    gen.manual_seed(9)
    assert cpu.initial_seed() == 9 and gen.initial_seed() == 9


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here: the device-side path runs on GPU machines")
def test_cuda_sampling_stays_on_the_device_and_is_deterministic():
    logits = torch.randn(64, 1000, device="cuda")
    sampler = TokenSampler(1.0, 0.95, [0], SeededGenerator(3))
    a, lp = sampler(logits)
    assert a.device.type == "cuda" and lp.device.type == "cuda"
    assert sampler.generator.for_device(logits.device).device.type == "cuda"
    sampler.generator.manual_seed(3)
    assert torch.equal(sampler(logits)[0], a)


def _policy(tok):
    torch.manual_seed(0)
    pol = Policy(PolicyConfig(d_ts=8, lora_r=0), tokenizer=tok).eval()
    with torch.no_grad():  # sharper than at init, so greedy decoding is not one token repeated
        for p in pol.model.parameters():
            if p.dim() == 2:
                p.mul_(5.0)
    return pol


def test_chunked_prefill_equals_unchunked(tok):
    pol = _policy(tok)
    prompts = [chat_prompt(tok, "Question: will it rise? trend looks up " + ts_placeholders(3)),
               chat_prompt(tok, "day 3 " + ts_placeholders(3))]  # different lengths: left padding
    ids, att, _ = pad_sequences([tok(p, add_special_tokens=False).input_ids for p in prompts], tok.pad_token_id,
                                side="left")
    ts = torch.randn(2, 3, 8)
    assert ids.shape[1] > 8 and int(att[1].sum()) < ids.shape[1]
    sampler = TokenSampler(1.0, 1.0, [])
    full = HFBackend(pol, tok.pad_token_id, sampler).prefill(ids, att, ts)
    nxt = torch.tensor([[5], [6]])
    att2 = torch.cat([att, torch.ones(2, 1, dtype=att.dtype)], 1)
    full_next = pol(nxt, att2, None, cache=full.cache, use_cache=True, logits_to_keep=1).logits
    for chunk in (1, 4, 7):  # 7: placeholders split across pieces, rows with all-pad first pieces
        out = HFBackend(pol, tok.pad_token_id, sampler, prefill_chunk=chunk).prefill(ids, att, ts)
        torch.testing.assert_close(out.logits, full.logits, atol=1e-5, rtol=1e-5)
        step = pol(nxt, att2, None, cache=out.cache, use_cache=True, logits_to_keep=1).logits  # the cache too
        torch.testing.assert_close(step, full_next, atol=1e-5, rtol=1e-5)


def test_chunked_prefill_rollouts_equal_unchunked(tok):
    pol = _policy(tok)
    prompts = [chat_prompt(tok, "Question: will it rise? " + ts_placeholders(3)), chat_prompt(tok, "day 3 " + ts_placeholders(3))]
    ts = torch.randn(2, 3, 8)
    runs = [RolloutEngine(pol, tok, [], max_new_tokens=10, temperature=0.0, prefill_chunk=c).generate(prompts, ts)
            for c in (None, 5)]
    assert [r.token_ids for r in runs[0]] == [r.token_ids for r in runs[1]]
    for a, b in zip(*runs, strict=True):
        torch.testing.assert_close(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="prefill_chunk"):
        HFBackend(pol, 0, TokenSampler(1.0, 1.0, []), prefill_chunk=0)


def test_finished_rows_leave_the_batch_and_the_rest_decode_as_alone(tok):
    """Rows that stop early are dropped from the batch and its KV cache; every row's greedy tokens and
    log-probs equal its decode in a batch of its own (left padding, soft tokens, the cache all consistent)."""
    from llm.generation import PhaseRequest

    pol = _policy(tok)
    texts = ["Question: will it rise? trend looks up ", "day 3 ", "a longer prompt about volume and price ", "q "]
    reqs = [PhaseRequest(tuple(tok(chat_prompt(tok, t + ts_placeholders(3)), add_special_tokens=False).input_ids),
                         torch.randn(3, 8, generator=torch.Generator().manual_seed(k)), m, frozenset())
            for k, (t, m) in enumerate(zip(texts, (2, 12, 4, 9), strict=True))]
    batch = HFBackend(pol, tok.pad_token_id, TokenSampler(0.0, 1.0, []))
    together = batch.generate_phase(reqs)
    assert batch.compactions >= 2  # 4 -> 3 rows after 2 tokens, 3 -> 2 after 4
    for r, out in zip(reqs, together, strict=True):
        alone = HFBackend(pol, tok.pad_token_id, TokenSampler(0.0, 1.0, [])).generate_phase([r])[0]
        assert len(out.token_ids) == r.max_new_tokens and out.token_ids == alone.token_ids
        torch.testing.assert_close(torch.tensor(out.logprobs), torch.tensor(alone.logprobs), atol=1e-4, rtol=1e-4)
