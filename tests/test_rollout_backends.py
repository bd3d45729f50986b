"""The two rollout backends behind one interface: the same prompts through the HF decode loop and through
the vLLM backend give the same `Rollout` structure (token ids, gen mask, log-probs, the tool segment,
the stop at ``</forecast_action>``). The vLLM backend runs on `tests.fake_vllm.FakeLLM` (vLLM's documented
``LLM`` interface over a plain HF model, passed in) always, and on a real ``vllm.LLM`` where it imports.
Also: its requests (prompt embeddings, stop ids, bans, seeds), sleep/wake order, and the merged weights."""

from __future__ import annotations

import copy

import pytest
import torch

from llm.generation import GenerationBackend, PhaseRequest
from llm.hf_backend import HFBackend
from llm.merged_weights import merged_named_weights
from llm.policy import Policy, PolicyConfig
from llm.rollout import RolloutEngine
from llm.sampling import SeededGenerator
from llm.special_tokens import ANSWER_CLOSE, FORECAST_ACTION_CLOSE, IM_END, TOOL_ONLY_TOKENS, ts_placeholders
from llm.tokenizer import chat_prompt
from llm.vllm_backend import BAN_BIAS, VLLMBackend, write_model_dir
from llm.vllm_config import vllm_import_error
from llm.vllm_server import VLLMServerClient
from tests.fake_vllm import FakeLLM, FakeServer
from tests.test_llm_rollout import _tool

K, D_TS, BUDGET = 3, 8, 24


@pytest.fixture(scope="module")
def tok(tiny_tokenizer):
    """The session tokenizer (tests/conftest.py): the offline tokenizer of tests/test_llm_rollout.py."""
    return tiny_tokenizer


def _prompts(tok):
    return [chat_prompt(tok, "Question: will it rise? " + ts_placeholders(K)), chat_prompt(tok, "day 3 " + ts_placeholders(K))]


@pytest.fixture(scope="module")
def policy(tok):
    """The tiny random Qwen3 of the rollout tests, sharpened (matrices x 5: at init its greedy output is
    one token repeated) and taught to call the tool: greedy decoding of prompt 0 writes some token t
    first at step k >= 2; swapping the (tied) embedding rows of t and ``</forecast_action>`` makes the
    model write the close tag exactly where it wrote t, and behave as before otherwise."""
    torch.manual_seed(0)
    pol = Policy(PolicyConfig(d_ts=D_TS, lora_r=0), tokenizer=tok).eval()
    with torch.no_grad():
        for p in pol.model.parameters():
            if p.dim() == 2:
                p.mul_(5.0)
    ts = torch.randn(2, K, D_TS)
    eng = RolloutEngine(pol, tok, [], max_new_tokens=BUDGET, temperature=0.0)
    (r, _) = eng.generate(_prompts(tok), ts_tokens=ts)
    close = tok.convert_tokens_to_ids(FORECAST_ACTION_CLOSE)
    gen = r.completion_ids
    k = next(k for k in range(2, len(gen)) if gen[k] not in gen[:k] and gen[k] not in eng.banned_token_ids)
    emb = pol.model.get_input_embeddings().weight
    with torch.no_grad():
        emb[[gen[k], close]] = emb[[close, gen[k]]]
    pol.ts_example = ts
    return pol


def _fake_backend(llm_box: list, **kw):
    """A backend builder ``(engine) -> VLLMBackend`` over a `FakeLLM` built from the engine's policy."""

    def build(engine) -> VLLMBackend:
        llm = FakeLLM(str(write_model_dir(engine.policy, kw.pop("model_dir"))))
        llm_box.append(llm)
        gen = SeededGenerator(engine.seed) if engine.seed is not None else None
        return VLLMBackend(llm, engine.policy, engine.temperature, engine.top_p, engine.banned_token_ids, gen,
                           dtype="float32", **kw)

    return build


def _real_vllm_backend(engine) -> VLLMBackend:
    from llm.vllm_config import VLLMConfig

    return VLLMBackend.factory(VLLMConfig(dtype="float32", gpu_memory_utilization=0.2))(engine)


def _check_contract(tok, rs, close):
    for r in rs:
        assert len(r.token_ids) == len(r.gen_mask) == len(r.logprobs)
        assert r.gen_mask[: r.prompt_len] == [0] * r.prompt_len
        assert all(lp == 0.0 for lp, m in zip(r.logprobs, r.gen_mask, strict=True) if m == 0)
        assert all(lp <= 0.0 for lp, m in zip(r.logprobs, r.gen_mask, strict=True) if m == 1)
        assert 0 < r.n_generated <= BUDGET
    r0 = rs[0]
    kinds = [s.kind for s in r0.segments]
    assert kinds[:3] == ["prompt", "model", "tool"] and len(r0.tool_calls) == 1
    assert r0.segments[1].token_ids[-1] == close and r0.segments[1].text.endswith(FORECAST_ACTION_CLOSE)
    obs = r0.segments[2]
    assert obs.text.startswith("\n<forecast_ts>") and obs.text == r0.tool_calls[0].result.observation
    start = r0.prompt_len + len(r0.segments[1].token_ids)
    assert r0.gen_mask[start : start + len(obs.token_ids)] == [0] * len(obs.token_ids)


@pytest.mark.parametrize("engine_kind", ["fake", "vllm"])
def test_hf_and_vllm_backends_write_the_same_rollouts(tok, policy, tmp_path, engine_kind):
    if engine_kind == "vllm" and vllm_import_error() is not None:
        pytest.skip(f"vllm does not import here ({vllm_import_error()}): the vLLM backend runs on FakeLLM only")
    if engine_kind == "vllm" and not torch.cuda.is_available():
        pytest.skip("vllm needs a GPU")
    close = tok.convert_tokens_to_ids(FORECAST_ACTION_CLOSE)
    prompts, ts = _prompts(tok), policy.ts_example
    hf = RolloutEngine(policy, tok, [_tool()], max_new_tokens=BUDGET, temperature=0.0)
    assert isinstance(hf.backend, HFBackend) and isinstance(hf.backend, GenerationBackend)
    box: list = []
    build = _fake_backend(box, model_dir=tmp_path / "m") if engine_kind == "fake" else _real_vllm_backend
    vl = RolloutEngine(policy, tok, [_tool()], max_new_tokens=BUDGET, temperature=0.0, backend=build)
    assert isinstance(vl.backend, VLLMBackend) and isinstance(vl.backend, GenerationBackend)
    a = hf.generate(prompts, ts_tokens=ts, sample_refs=[0, 1], num_return_sequences=2)
    b = vl.generate(prompts, ts_tokens=ts, sample_refs=[0, 1], num_return_sequences=2)
    _check_contract(tok, a, close)
    _check_contract(tok, b, close)
    for x, y in zip(a, b, strict=True):  # greedy, same weights: the same rollouts
        assert x.token_ids == y.token_ids and x.gen_mask == y.gen_mask and x.finish_reason == y.finish_reason
        assert [s.text for s in x.segments] == [s.text for s in y.segments]
        torch.testing.assert_close(torch.tensor(x.logprobs), torch.tensor(y.logprobs), atol=1e-4, rtol=1e-4)
    if engine_kind == "fake":  # the engine got the policy's weights before its first phase
        assert box[0].events[0] == ("reload_weights", len(box[0].loaded))


def test_server_mode_writes_the_same_rollouts_over_http(tok, policy, tmp_path):
    """Server mode end to end on localhost: embeddings as base64 torch.save, ids and log-probs back,
    the merged weights through safetensors in sync_dir and /collective_rpc, sleep/wake endpoints."""
    server = FakeServer(FakeLLM(str(write_model_dir(policy, tmp_path / "m"))))
    try:
        def build(e):
            return VLLMBackend(VLLMServerClient(server.url), e.policy, e.temperature, e.top_p, e.banned_token_ids,
                               dtype="float32", sleep_level=1, sync_dir=tmp_path / "sync")

        prompts, ts = _prompts(tok), policy.ts_example
        hf = RolloutEngine(policy, tok, [_tool()], max_new_tokens=BUDGET, temperature=0.0)
        sv = RolloutEngine(policy, tok, [_tool()], max_new_tokens=BUDGET, temperature=0.0, backend=build)
        a = hf.generate(prompts, ts_tokens=ts, sample_refs=[0, 1])
        b = sv.generate(prompts, ts_tokens=ts, sample_refs=[0, 1])
        _check_contract(tok, b, tok.convert_tokens_to_ids(FORECAST_ACTION_CLOSE))
        for x, y in zip(a, b, strict=True):
            assert x.token_ids == y.token_ids and x.gen_mask == y.gen_mask
            torch.testing.assert_close(torch.tensor(x.logprobs), torch.tensor(y.logprobs), atol=1e-4, rtol=1e-4)
        assert (tmp_path / "sync" / "model.safetensors").exists() and (tmp_path / "sync" / "config.json").exists()
        sv.sync_weights()
        kinds = [e[0] for e in server.llm.events]
        assert kinds[0] == "reload_weights" and kinds[-3:] == ["sleep", "wake_up", "reload_weights"]
    finally:
        server.close()


def test_vllm_requests_embeddings_stops_bans_and_seeds(tok, policy, tmp_path):
    llm = FakeLLM(str(write_model_dir(policy, tmp_path / "m")))
    eng = RolloutEngine(policy, tok, [_tool()], max_new_tokens=BUDGET, temperature=0.7, top_p=0.9, seed=3,
                        backend=lambda e: VLLMBackend(llm, e.policy, e.temperature, e.top_p, e.banned_token_ids,
                                                      SeededGenerator(e.seed), dtype="float32"))
    ts = policy.ts_example
    rs = eng.generate(_prompts(tok), ts_tokens=ts, sample_refs=[0, 1])
    close, answer, im_end = (tok.convert_tokens_to_ids(t) for t in (FORECAST_ACTION_CLOSE, ANSWER_CLOSE, IM_END))
    (prompts, params), *later = llm.requests
    for i, (p, sp) in enumerate(zip(prompts, params, strict=True)):
        ids = tok(_prompts(tok)[i], add_special_tokens=False).input_ids
        emb = p["prompt_embeds"]
        assert emb.shape == (len(ids), policy.model.config.hidden_size) and emb.device.type == "cpu"
        torch.testing.assert_close(emb, policy.embed(torch.tensor([ids]), ts[i : i + 1])[0])
        slots = [k for k, t in enumerate(ids) if t == policy.ts_token_id]
        torch.testing.assert_close(emb[slots], policy.projector(ts[i]))  # soft tokens in the <ts> slots
        assert {close, answer, im_end} <= set(sp["stop_token_ids"]) and sp["ignore_eos"] is True
        banned = {tok.convert_tokens_to_ids(t) for t in TOOL_ONLY_TOKENS}
        assert set(sp["logit_bias"]) == set(eng.banned_token_ids) >= banned
        assert set(sp["logit_bias"].values()) == {BAN_BIAS} and sp["logprobs"] == 0
        assert sp["temperature"] == 0.7 and sp["top_p"] == 0.9 and sp["max_tokens"] == BUDGET
    # a row resumed after its one tool call: budget left, and the close tag no longer stops it
    for _, sp2 in later:
        for sp in sp2:
            assert close not in sp["stop_token_ids"] and sp["max_tokens"] < BUDGET
    # seeds: a function of the engine seed
    first = [sp["seed"] for sp in params]
    eng.generator.manual_seed(3)
    again = eng.generate(_prompts(tok), ts_tokens=ts, sample_refs=[0, 1])
    assert [sp["seed"] for sp in llm.requests[len(later) + 1][1]] == first
    assert [r.token_ids for r in again] == [r.token_ids for r in rs]


def test_vllm_sleep_wake_and_weight_push_order(tok, policy, tmp_path):
    llm = FakeLLM(str(write_model_dir(policy, tmp_path / "m")))
    eng = RolloutEngine(policy, tok, [], max_new_tokens=4, temperature=0.0,
                        backend=lambda e: VLLMBackend(llm, e.policy, 0.0, 1.0, e.banned_token_ids, dtype="float32",
                                                      sleep_level=2))
    prompt = [chat_prompt(tok, "day 3")]
    eng.generate(prompt)
    eng.sync_weights()  # what GRPOTrainer does after each optimiser update
    eng.generate(prompt)
    eng.generate(prompt)  # no update in between: level 2 dropped the weights, so they go in again
    names = [e[0] if e[0] != "wake_up" else f"wake_up:{e[1]}" for e in llm.events]
    assert names == ["reload_weights", "generate", "sleep",
                     "wake_up:['weights']", "reload_weights", "wake_up:['kv_cache']", "generate", "sleep",
                     "wake_up:['weights']", "reload_weights", "wake_up:['kv_cache']", "generate", "sleep"]


def _perturbed(pol):
    with torch.no_grad():
        for p in pol.model.parameters():
            if p.requires_grad:
                p.add_(torch.randn_like(p) * 0.1)
    return pol


def test_merged_weights_equal_peft_merge_under_hf_checkpoint_names(tok):
    """LoRA merged and the trained protocol-token rows written in: peft's merge_and_unload, on the names
    of a plain HF model of the same architecture (what a checkpoint holds and vLLM's loader reads)."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    pol = _perturbed(Policy(PolicyConfig(d_ts=D_TS, lora_r=4), tokenizer=tok))
    mine = dict(merged_named_weights(pol.model))
    ref = copy.deepcopy(pol.model).merge_and_unload()
    plain = AutoModelForCausalLM.from_config(ref.config)
    assert set(mine) == {n for n, _ in plain.named_parameters()}  # tied lm_head: once, as embed_tokens
    ref_sd = ref.state_dict()
    for n, t in mine.items():
        torch.testing.assert_close(t, ref_sd[n], rtol=0, atol=0)
    close = tok.convert_tokens_to_ids(FORECAST_ACTION_CLOSE)
    base_row = pol.model.base_model.model.model.embed_tokens.token_adapter.base_layer.weight[close]
    assert not torch.equal(mine["model.embed_tokens.weight"][close], base_row)  # the trained row, not the stale one


def test_merged_weights_untied_lm_head_and_full_finetune(tok):
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen3Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, head_dim=16, tie_word_embeddings=False)
    base = Qwen3ForCausalLM(cfg)
    ids = [tok.convert_tokens_to_ids(FORECAST_ACTION_CLOSE), tok.convert_tokens_to_ids(ANSWER_CLOSE)]
    model = get_peft_model(copy.deepcopy(base), LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "down_proj"],
                                                           trainable_token_indices={"embed_tokens": ids, "lm_head": ids}))
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                p.add_(torch.randn_like(p) * 0.1)
    mine = dict(merged_named_weights(model))
    ref = copy.deepcopy(model).merge_and_unload().state_dict()
    assert set(mine) == set(ref) == {n for n, _ in base.named_parameters()}
    for n, t in mine.items():
        torch.testing.assert_close(t, ref[n], rtol=0, atol=0)
    full = dict(merged_named_weights(base))  # no adapters: the parameters themselves
    assert all(full[n] is not None and torch.equal(full[n], p) for n, p in base.named_parameters())


def test_server_client_request_and_response_forms():
    client = VLLMServerClient("http://localhost:1", model="m")
    emb = torch.randn(5, 8, dtype=torch.bfloat16)
    body = client.completion_body({"prompt_embeds": emb}, {"n": 1, "temperature": 0.5, "max_tokens": 7,
                                                            "stop_token_ids": [3], "logit_bias": {9: BAN_BIAS},
                                                            "logprobs": 0, "detokenize": False, "seed": None})
    import base64
    import io

    back = torch.load(io.BytesIO(base64.b64decode(body["prompt_embeds"])), weights_only=True)
    assert torch.equal(back, emb) and body["logit_bias"] == {"9": BAN_BIAS} and body["return_token_ids"] is True
    assert "detokenize" not in body and "seed" not in body and body["model"] == "m"
    out = client.completion({"token_ids": [4, 3], "logprobs": {"token_logprobs": [-0.5, -1.5]}})
    r = PhaseRequest((1, 2), None, 7, frozenset({3}))
    parsed = VLLMBackend.parse_output(r, out)
    assert parsed.token_ids == (4, 3) and parsed.logprobs == (-0.5, -1.5) and parsed.stop_token_id == 3
