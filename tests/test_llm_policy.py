"""Policy: soft-token placement, soft tokens on/off, LoRA targets and frozen base, save/load, configs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from llm.policy import LORA_TARGETS, Policy, PolicyConfig
from llm.rollout import RolloutEngine
from llm.special_tokens import TS_PLACEHOLDER, ts_placeholders
from llm.tokenizer import chat_prompt

CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "policy"


@pytest.fixture(scope="module")
def tok(tiny_tokenizer):
    """The session tokenizer (tests/conftest.py): no test here depends on how the text splits."""
    return tiny_tokenizer


def _cfg(**kw) -> PolicyConfig:
    return PolicyConfig(**{"d_ts": 6, "lora_r": 0, "tiny_hidden": 32, "tiny_intermediate": 64, **kw})


def test_placeholders_get_projected_ts_tokens_in_order(tok):
    pol = Policy(_cfg(), tokenizer=tok)
    texts = [f"a {ts_placeholders(3)} b", f"longer text here {TS_PLACEHOLDER} mid {ts_placeholders(2)} end"]
    enc = tok(texts, add_special_tokens=False, padding=True, padding_side="left", return_tensors="pt")
    ts = torch.randn(2, 3, 6)
    emb = pol.embed(enc.input_ids, ts)
    plain = pol.model.get_input_embeddings()(enc.input_ids)
    proj = pol.projector(ts)
    for b in range(2):
        pos = (enc.input_ids[b] == pol.ts_token_id).nonzero().flatten()
        assert len(pos) == 3
        torch.testing.assert_close(emb[b, pos], proj[b])  # k-th placeholder <- k-th TS token
        other = torch.ones(enc.input_ids.shape[1], dtype=torch.bool)
        other[pos] = False
        torch.testing.assert_close(emb[b, other], plain[b, other])  # text and pads untouched
    bad = tok([texts[0], "a <ts><ts> b"], add_special_tokens=False, padding=True, return_tensors="pt").input_ids
    with pytest.raises(ValueError, match="rows \\[1\\] have \\[2\\] '<ts>' placeholders but ts_tokens has K=3"):
        pol.embed(bad, ts)
    with pytest.raises(ValueError, match="d_ts=6"):
        pol.embed(enc.input_ids, torch.randn(2, 3, 5))


def test_projector_init_is_a_function_of_the_seed(tok):
    torch.manual_seed(123)
    a = Policy(_cfg(), tokenizer=tok)
    torch.rand(1000)  # global RNG use between builds must not change the projector
    torch.manual_seed(999)
    b = Policy(_cfg(), tokenizer=tok)
    c = Policy(_cfg(seed=1), tokenizer=tok)
    for (name, pa), pb, pc in zip(a.projector.state_dict().items(), b.projector.state_dict().values(),
                                  c.projector.state_dict().values(), strict=True):
        assert torch.equal(pa, pb), name
        if name.endswith("weight"):
            assert not torch.equal(pa, pc), name  # another seed, another init
    torch.manual_seed(5)
    before = torch.rand(3)
    torch.manual_seed(5)
    Policy(_cfg(), tokenizer=tok)
    assert torch.equal(torch.rand(3), before)  # the build (tiny base + projector) leaves the global RNG as it was


def test_lora_init_is_a_function_of_the_seed(tok):
    """LoRA adapters are initialised from cfg.seed, not the global RNG, which the build leaves as it was."""
    torch.manual_seed(123)
    a = Policy(_cfg(lora_r=4), tokenizer=tok)
    torch.manual_seed(999)
    torch.rand(1000)
    b = Policy(_cfg(lora_r=4), tokenizer=tok)
    c = Policy(_cfg(lora_r=4, seed=1), tokenizer=tok)
    lora = [n for n, _ in a.model.named_parameters() if "lora_A" in n]
    assert lora
    pa, pb, pc = (dict(p.model.named_parameters()) for p in (a, b, c))
    for n in lora:
        assert torch.equal(pa[n], pb[n]), n
    assert any(not torch.equal(pa[n], pc[n]) for n in lora)  # another seed, another init
    torch.manual_seed(5)
    before = torch.rand(3)
    torch.manual_seed(5)
    Policy(_cfg(lora_r=4), tokenizer=tok)
    assert torch.equal(torch.rand(3), before)


def test_soft_tokens_change_generation_and_switch_off(tok):
    torch.manual_seed(0)
    on = Policy(_cfg(), tokenizer=tok)
    off = Policy(dataclasses.replace(_cfg(), soft_tokens=False), tokenizer=tok)
    off.load_state_dict(on.state_dict())
    prompt = chat_prompt(tok, f"Question 3: {ts_placeholders(4)} will the close rise?")
    ids = tok(prompt, add_special_tokens=False, return_tensors="pt").input_ids
    ts = 3 * torch.randn(1, 4, 6)
    # off: placeholders keep the plain <ts> embedding, whatever h_ts is
    torch.testing.assert_close(off.embed(ids, ts), on.model.get_input_embeddings()(ids))
    assert not any(p.requires_grad for p in off.projector.parameters())

    def sample(pol, h):  # same seed: differences come from the inputs only
        eng = RolloutEngine(pol, tok, [], max_new_tokens=10, temperature=1.0, seed=0)
        rs = eng.generate([prompt], ts_tokens=h, num_return_sequences=4)
        return [r.completion_ids for r in rs], torch.tensor([lp for r in rs for lp in r.logprobs[r.prompt_len :]])

    # (greedy is useless here: a random tiny model repeats one token whatever the input, and its
    # near-uniform distributions mean we compare the sampling log-probs, not only the tokens)
    (ids_on, lp_on), (ids_off, lp_off) = sample(on, ts), sample(off, ts)
    assert ids_on != ids_off or not torch.allclose(lp_on, lp_off)  # soft tokens change the distribution
    ids_neg, lp_neg = sample(on, -ts)
    assert ids_neg != ids_on or not torch.allclose(lp_neg, lp_on)  # the time series itself steers sampling
    ids_off_neg, lp_off_neg = sample(off, -ts)
    assert ids_off_neg == ids_off and torch.equal(lp_off_neg, lp_off)  # off: h_ts is ignored


def test_lora_targets_and_frozen_base(tok):
    pol = Policy(_cfg(lora_r=4, lora_alpha=8, lora_dropout=0.0), tokenizer=tok)
    lora_modules = {n.rsplit(".", 1)[0] for n, _ in pol.model.named_parameters() if "lora_A" in n}
    leaves = {n.split(".lora_A")[0].rsplit(".", 1)[-1] for n in lora_modules}
    assert leaves == set(LORA_TARGETS)
    assert len(lora_modules) == len(LORA_TARGETS) * 2  # every target in both layers
    trainable = {n for n, p in pol.named_parameters() if p.requires_grad}
    assert all("lora_" in n or "projector" in n or "trainable_tokens" in n for n in trainable)
    assert any("projector" in n for n in trainable) and any("trainable_tokens" in n for n in trainable)
    base = {n: p.detach().clone() for n, p in pol.named_parameters() if not p.requires_grad}
    tracked = {n: p.detach().clone() for n, p in pol.named_parameters() if p.requires_grad}
    opt = torch.optim.SGD(pol.trainable_parameters(), lr=0.5)
    ids = tok([f"Question 1: {ts_placeholders(2)} <answer>yes</answer>"], add_special_tokens=False, return_tensors="pt").input_ids
    for _ in range(2):  # LoRA B starts at 0, so A moves only from the second step
        loss = pol(ids, ts_tokens=torch.randn(1, 2, 6)).logits.logsumexp(-1).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    cur = dict(pol.named_parameters())
    assert all(torch.equal(cur[n], v) for n, v in base.items())
    changed = {n for n, v in tracked.items() if not torch.equal(cur[n], v)}
    assert any("lora_A" in n for n in changed) and any("lora_B" in n for n in changed)
    assert any("projector" in n for n in changed) and any("trainable_tokens" in n for n in changed)


def test_full_finetune_trains_everything(tok):
    pol = Policy(_cfg(lora_r=0), tokenizer=tok)
    assert not pol.is_lora and all(p.requires_grad for p in pol.parameters())


@pytest.mark.parametrize("lora_r", [0, 4])
def test_save_load_round_trip(tok, tmp_path, lora_r):
    pol = Policy(_cfg(lora_r=lora_r, lora_alpha=4, seed=3), tokenizer=tok)
    with torch.no_grad():  # move every trainable tensor away from its init so loading must restore it
        for p in pol.trainable_parameters():
            p.add_(0.05 * torch.randn_like(p))
    pol.save(tmp_path / "p")
    back = Policy.load(tmp_path / "p")
    assert back.cfg == pol.cfg and back.is_lora == (lora_r > 0)
    ids = tok([f"Question 2 {ts_placeholders(2)} rise"], add_special_tokens=False, return_tensors="pt").input_ids
    ts = torch.randn(1, 2, 6)
    pol.eval()
    back.eval()
    torch.testing.assert_close(back(ids, ts_tokens=ts).logits, pol(ids, ts_tokens=ts).logits)
    assert not Policy.load(tmp_path / "p", soft_tokens=False).cfg.soft_tokens
    with pytest.raises(FileNotFoundError, match="not a saved policy"):
        Policy.load(tmp_path)


def test_config_files_and_validation():
    names = {p.stem for p in CONFIGS.glob("*.yaml")}
    assert {"tiny", "qwen3-4b-instruct-2507", "qwen3-8b"} <= names
    for stem in ("qwen3-4b-instruct-2507", "qwen3-8b"):
        c = PolicyConfig.from_yaml(CONFIGS / f"{stem}.yaml")
        assert (c.lora_r, c.lora_alpha, c.dtype, c.lora_targets) == (32, 32, "bfloat16", LORA_TARGETS)
        assert c.name_or_path.startswith("Qwen/Qwen3-")
    assert PolicyConfig.from_yaml(CONFIGS / "tiny.yaml").name_or_path in ("tiny", "checkpoints/policy_tiny")
    with pytest.raises(ValueError, match="unknown PolicyConfig keys \\['lora_rank'\\]"):
        PolicyConfig.from_dict({"lora_rank": 8})
    with pytest.raises(ValueError, match="dtype"):
        PolicyConfig(dtype="fp8")


def test_tiny_without_tokenizer_says_how_to_build_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="stockr1 tokenizer build"):
        Policy(PolicyConfig(tokenizer_path=str(tmp_path / "missing")))


def test_merged_adapter_is_the_same_function_and_comes_back(tok):
    pol = Policy(_cfg(lora_r=4, lora_alpha=8, lora_dropout=0.0), tokenizer=tok).eval()
    with torch.no_grad():
        for n, p in pol.named_parameters():
            if "lora_B" in n or "trainable_tokens_delta" in n:
                p.add_(0.1 * torch.randn_like(p))  # a trained adapter: B != 0, protocol rows moved
    base = {n: p.detach().clone() for n, p in pol.model.get_base_model().named_parameters() if "base_layer" in n}
    ids = tok([f"Question 3 {ts_placeholders(2)} <answer>rise</answer>"], add_special_tokens=False, return_tensors="pt").input_ids
    ts = torch.randn(1, 2, 6)
    with torch.no_grad():
        want = pol(ids, ts_tokens=ts).logits
        with pol.merged():
            inside = {n: p.detach().clone() for n, p in pol.model.get_base_model().named_parameters() if n in base}
            got = pol(ids, ts_tokens=ts).logits
        after = dict(pol.model.get_base_model().named_parameters())
    assert any(not torch.equal(inside[n], v) for n, v in base.items())  # the adapter really was merged in
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert all(torch.allclose(after[n], v, atol=1e-6) for n, v in base.items())  # and taken out again
