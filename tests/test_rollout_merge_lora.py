"""``rollout.merge_lora``: a LoRA policy decoded through a twin with its adapter merged gives the rollouts of
the policy itself, and the twin follows the policy after every training update (it is refreshed before
each phase), so a GRPO step never samples from stale weights."""

from __future__ import annotations

import pytest
import torch

from llm.hf_backend import HFBackend
from llm.policy import Policy, PolicyConfig
from llm.rollout import RolloutEngine
from llm.sampling import TokenSampler
from llm.special_tokens import ts_placeholders
from llm.tokenizer import chat_prompt
from rl.run_config import RolloutConfig


def _lora_policy(tok, seed: int = 0) -> Policy:
    """A tiny LoRA policy whose adapter matters: sharpened base weights (greedy decoding is not one token
    repeated) and a nonzero B (peft starts it at 0, where merged and unmerged agree trivially)."""
    torch.manual_seed(seed)
    pol = Policy(PolicyConfig(d_ts=8, lora_r=4), tokenizer=tok).eval()
    assert pol.is_lora
    with torch.no_grad():
        for name, p in pol.model.named_parameters():
            if p.dim() == 2 and "lora_" not in name:
                p.mul_(5.0)
            elif "lora_B" in name:
                p.normal_(0.0, 0.5)
    return pol


def _prompts(tok) -> tuple[list[str], torch.Tensor]:
    return ([chat_prompt(tok, "Question: will it rise? trend looks up " + ts_placeholders(3)),
             chat_prompt(tok, "day 3 " + ts_placeholders(3))], torch.randn(2, 3, 8, generator=torch.Generator().manual_seed(1)))


def _decode(pol: Policy, tok, merge: bool, prompts, ts) -> list[list[int]]:
    eng = RolloutEngine(pol, tok, [], max_new_tokens=12, temperature=0.0, merge_lora=merge)
    return [r.completion_ids for r in eng.generate(prompts, ts, num_return_sequences=2)]


def test_a_merged_twin_decodes_the_policys_own_rollouts(tiny_tokenizer) -> None:
    tok = tiny_tokenizer
    pol = _lora_policy(tok)
    prompts, ts = _prompts(tok)
    plain = _decode(pol, tok, False, prompts, ts)
    assert _decode(pol, tok, True, prompts, ts) == plain
    # the control: the adapter does change what is decoded, so the equality above is not the base model's
    with pol.model.disable_adapter():
        assert _decode(pol, tok, False, prompts, ts) != plain


def test_the_twin_is_refreshed_after_a_training_update(tiny_tokenizer) -> None:
    tok = tiny_tokenizer
    pol = _lora_policy(tok)
    prompts, ts = _prompts(tok)
    eng = RolloutEngine(pol, tok, [], max_new_tokens=12, temperature=0.0, merge_lora=True)
    before = [r.completion_ids for r in eng.generate(prompts, ts)]
    backend = eng.backend
    assert isinstance(backend, HFBackend) and backend._twin is not None
    with torch.no_grad():  # an optimiser step, as GRPO takes one between two samplings: the adapter and the projector
        for name, p in pol.named_parameters():
            if "lora_B" in name or name.startswith("projector."):
                p.add_(torch.randn_like(p) * 0.5)
    after = [r.completion_ids for r in eng.generate(prompts, ts)]
    assert after == _decode(pol, tok, False, prompts, ts)[::2]  # the updated policy's own greedy rollouts
    assert after != before  # the update mattered, so the equality above shows the twin followed it
    ids = tok(prompts[0], add_special_tokens=False).input_ids
    x = torch.tensor([ids])
    twin = backend.decoding_module()
    torch.testing.assert_close(twin(x, None, ts[:1]).logits, pol(x, None, ts[:1]).logits, atol=1e-4, rtol=1e-4)


def test_the_twin_is_a_frozen_bare_model(tiny_tokenizer) -> None:
    pol = _lora_policy(tiny_tokenizer)
    twin = pol.merged_copy()
    assert not twin.is_lora and not any(p.requires_grad for p in twin.parameters())
    assert not any("lora" in n for n, _ in twin.named_parameters())
    assert all(p.data_ptr() != q.data_ptr() for p, q in zip(twin.projector.parameters(), pol.projector.parameters(),
                                                           strict=True))  # a copy: training the policy leaves it


def test_a_bf16_twin_holds_the_policys_weights_rounded(tiny_tokenizer) -> None:
    tok = tiny_tokenizer
    pol = _lora_policy(tok)
    backend = HFBackend(pol, tok.pad_token_id, TokenSampler(0.0, 1.0, []), merge_lora=True, twin_dtype=torch.bfloat16)
    backend.decoding_module()
    with torch.no_grad():
        for name, p in pol.named_parameters():
            if "lora_B" in name:
                p.add_(torch.randn_like(p) * 0.5)
    twin = backend.decoding_module()  # refreshed: the update, cast to bf16
    assert {p.dtype for p in twin.parameters()} == {torch.bfloat16}
    prompts, ts = _prompts(tok)
    x = torch.tensor([tok(prompts[0], add_special_tokens=False).input_ids])
    lp_twin = torch.log_softmax(twin(x, None, ts[:1]).logits.float(), -1)
    lp_pol = torch.log_softmax(pol(x, None, ts[:1]).logits, -1)
    gap = (lp_twin - lp_pol).abs().max()
    assert 0 < gap < 0.5  # rounded, not another policy
    stale = pol.merged_copy(torch.bfloat16)
    with torch.no_grad():
        for name, p in pol.named_parameters():
            if "lora_B" in name:
                p.add_(torch.randn_like(p) * 0.5)
    pol.refresh_merged(stale)
    fresh = pol.merged_copy(torch.bfloat16)
    assert all(torch.equal(a, b) for a, b in zip(stale.parameters(), fresh.parameters(), strict=True))


def test_merge_lora_refuses_what_it_cannot_do(tiny_tokenizer) -> None:
    torch.manual_seed(0)
    full = Policy(PolicyConfig(d_ts=8, lora_r=0), tokenizer=tiny_tokenizer)
    with pytest.raises(ValueError, match="needs a LoRA policy"):
        full.merged_copy()
    # a full model has no adapter: the option leaves it to decode as it is
    backend = HFBackend(full, tiny_tokenizer.pad_token_id, TokenSampler(0.0, 1.0, []), merge_lora=True)
    assert backend.decoding_module() is full
    with pytest.raises(ValueError, match="merge_lora is an option of the hf backend"):
        RolloutConfig(backend="vllm", merge_lora=True)
    with pytest.raises(ValueError, match="twin_dtype must be null or one of"):
        RolloutConfig(twin_dtype="bfloat16")  # without merge_lora there is no twin
    with pytest.raises(ValueError, match="twin_dtype must be null or one of"):
        RolloutConfig(merge_lora=True, twin_dtype="int8")
    with pytest.raises(ValueError, match="needs merge_lora=True"):
        HFBackend(full, tiny_tokenizer.pad_token_id, TokenSampler(0.0, 1.0, []), twin_dtype=torch.bfloat16)
