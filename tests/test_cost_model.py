"""benchmarks/accelerator/cost_model.py: parameter counts equal built models exactly; FLOPs and memory by hand."""

import pytest
import torch

from benchmarks.accelerator import cost_model as cm
from llm.arch import QWEN3_ARCHS

SMALL = dict(vocab_size=300, hidden_size=48, intermediate_size=80, num_hidden_layers=3, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16)


@pytest.mark.parametrize("tied", [True, False])
def test_base_params_equal_a_built_qwen3(tied: bool) -> None:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    cfg = Qwen3Config(**SMALL, tie_word_embeddings=tied)
    model = Qwen3ForCausalLM(cfg)
    assert cm.Arch.from_config(cfg.to_dict()).base_params() == sum(p.numel() for p in model.parameters())


def test_policy_params_equal_a_built_lora_policy(tiny_tokenizer_dir) -> None:
    """Base + LoRA on the 7 targets + protocol-token rows + MLP projector, exactly, at a small width."""
    from llm.policy import Policy, PolicyConfig

    pol = Policy(PolicyConfig(name_or_path="tiny", tokenizer_path=str(tiny_tokenizer_dir), tiny_hidden=32, tiny_layers=2,
                              tiny_heads=4, tiny_kv_heads=2, tiny_intermediate=96, lora_r=4, lora_alpha=4, d_ts=12))
    arch = cm.Arch.from_config(pol.model.config.get_text_config().to_dict())
    pc = cm.param_counts(arch, cm.Adapter(lora_r=4, d_ts=12))
    assert pc["total"] == sum(p.numel() for p in pol.parameters())
    assert pc["trainable"] == sum(p.numel() for p in pol.parameters() if p.requires_grad)


@pytest.mark.slow
def test_full_depth_4b_is_built_under_the_device_context(tiny_tokenizer_dir) -> None:
    """What gpu_check builds (all 36 layers, 151,936 rows, LoRA): under ``torch.device`` every parameter
    and buffer is created there (meta here, cuda on the GPU: no CPU copy), and the count is the model's."""
    from llm.policy import Policy, PolicyConfig

    with torch.device("meta"):
        pol = Policy(PolicyConfig(name_or_path="Qwen/Qwen3-4B-Instruct-2507", random_init_layers=36,
                                  tokenizer_path=str(tiny_tokenizer_dir), dtype="bfloat16", d_ts=2560))
    assert {t.device.type for t in [*pol.parameters(), *pol.buffers()]} == {"meta"}
    pc = cm.param_counts(cm.Arch.from_config(QWEN3_ARCHS["Qwen/Qwen3-4B-Instruct-2507"]), cm.Adapter(d_ts=2560))
    assert pc["base"] == 4_022_468_096  # the model card's 4.0B
    assert sum(p.numel() for p in pol.parameters()) == pc["total"] == 4_101_668_864


TOY = cm.Arch(vocab=10, hidden=4, intermediate=8, layers=1, heads=2, kv_heads=1, head_dim=2, tied=True)


def test_flops_by_hand() -> None:
    ad = cm.Adapter(lora_r=1, protocol_tokens=0, d_ts=4)
    # q 4x4, k 4x2, v 4x2, o 4x4, gate/up 4x8, down 8x4 -> 16 + 8 + 8 + 16 + 32 + 32 + 32 = 144 weights
    # LoRA r=1: r * (in + out) = 8 + 6 + 6 + 8 + 12 + 12 + 12 = 64; LM head 10 x 4 = 40
    assert TOY.layer_matmul_params() == 144 and ad.layer_lora_params(TOY) == 64
    # one token over 3 keys: 2 * (144 + 64 + 40) + 4 * layers(1) * q_dim(4) * keys(3)
    assert cm.forward_flops_per_token(TOY, ad, 3) == 2 * 248 + 48
    f = cm.sequence_flops(TOY, ad, tokens=3, kept=3)
    attn = 4 * 1 * 4 * 2 * 3  # 3 positions, mean (3 + 1) / 2 = 2 keys
    fwd = 2 * (208 * 3 + 40 * 3) + attn
    act_grad = 2 * (208 * 3 + 40 * 3) + 2 * attn
    w_grad = 2 * 64 * 3  # the adapter's weight gradients only
    assert f["model"] == fwd + act_grad + w_grad == 3648
    assert f["hardware"] == 3648 + 2 * 208 * 3 + attn  # + the layers' recomputed forward
    assert cm.sequence_flops(TOY, ad, 3, 1, train=False)["model"] == 2 * (208 * 3 + 40) + attn


def test_training_flops_are_about_6n_full_and_4n_lora_at_4b() -> None:
    arch = cm.Arch.from_config(QWEN3_ARCHS["Qwen/Qwen3-4B-Instruct-2507"])
    ad = cm.Adapter(d_ts=2560)
    n = arch.base_params()  # tied: the LM head is the embedding, counted once
    full = cm.sequence_flops(arch, ad, 1, 1, full_finetune=True, checkpointing=False)["model"]
    lora = cm.sequence_flops(arch, ad, 1, 1, checkpointing=False)["model"]
    assert 5.8 < full / n < 6.3 and 3.9 < lora / n < 4.2


def test_memory_components_by_hand() -> None:
    ad = cm.Adapter(lora_r=1, protocol_tokens=0, d_ts=4)
    m = cm.training_memory(TOY, ad, tokens=5, kept=2, weight_bytes=2, checkpointing=False)
    pc = cm.param_counts(TOY, ad)
    assert m["weights"] == 2 * pc["base"] and m["adam"] == 8 * pc["trainable"] == 2 * m["gradients"]
    assert m["logits"] == 2 * 10 * 10  # kept x vocab x 10 bytes
    assert m["activations"] == 5 * cm.activation_bytes_per_token_layer(TOY)
    assert cm.kv_cache_bytes(TOY, rows=3, tokens=7) == 3 * 7 * 1 * 2 * 2 * 2  # rows x T x L x (K, V) x kv_dim x bf16
    g = cm.grpo_memory(TOY, ad, rows=4, prompt=3, new=2, micro_batch=2)
    assert g["peak"] == max(g["peak_generation"], g["peak_loss"])


def test_mfu_and_peaks() -> None:
    assert cm.mfu(989.4e12, 2.0, 989.4) == pytest.approx(0.5)
    assert cm.peak_tflops_for("NVIDIA H200") == 989.4 and cm.peak_tflops_for("a CPU") is None


@pytest.mark.slow
def test_readme_is_generated_and_says_the_gpu_check_has_not_run(tmp_path) -> None:
    import json

    from benchmarks.accelerator.readme import write_readme

    text = write_readme(tmp_path, None).read_text()
    assert "The GPU check has not run yet" in text and "## Memory per component (GiB)" in text
    assert "4,022,468,096" in text and "| kv_cache |" in text and "No smoke run was given" in text
    (tmp_path / "summary.json").write_text(json.dumps({
        "status": "ok", "gpu_check_has_run_on": "cuda", "environment": {"device_name": "NVIDIA H200"},
        "sft": {"steps_done": 300, "stop_reason": "done", "median_step_s": 0.8, "median_tokens_per_s": 1e4,
                "peak_memory_gib": 40.0, "median_mfu": 0.4}}))
    text = write_readme(tmp_path, None).read_text()
    assert "not run yet" not in text and "ran on NVIDIA H200" in text and "| sft | 300 | done |" in text
    # with steps.jsonl: each measured step beside the cost model for its own shapes
    from benchmarks.accelerator.readme import H200, H200_HBM, recipe

    half = 0.5 * 0.4 * H200 * 1e12  # model FLOPs that take 0.5 s at 40% MFU
    steps = [{"phase": "sft", "seconds": 9.0, "model_flops": half, "peak_memory_gib": 1.0},  # warm-up: left out
             {"phase": "sft", "seconds": 2.0, "model_flops": half, "peak_memory_gib": 1.0},
             {"phase": "grpo", "seconds": 7.0, "rollout_s": 5.0, "rows": 4, "prompt_tokens_mean": 10.0,
              "gen_tokens": 40.0, "gen_tokens_per_s": 8.0, "peak_memory_gib": 2.0}]
    (tmp_path / "steps.jsonl").write_text("\n".join(json.dumps(x) for x in steps))
    summary = json.loads((tmp_path / "summary.json").read_text())
    summary.update(args={"scale": "4b"}, grpo={"steps_done": 1, "stop_reason": "done", "micro_batch": 2,
                                               "num_iterations": 1, "kl_reference": True})
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    text = write_readme(tmp_path, None).read_text()
    assert "| SFT step, s (model: model FLOPs at 40% MFU) | 2.00 | 0.50 | 4.0x |" in text
    r = recipe("qwen3-4b")
    dec = cm.decode_seconds_lower_bound(r["arch"], r["ad"], 4, 10, 10, H200_HBM)
    assert f"(4 rows, 10 prompt + 10 new tokens a row; model: bytes over HBM bandwidth) | 5.0 | {dec:.2f} |" in text
    assert "Generation is 71% of a u-GRPO step: 8 generated tokens/s over 4 rows, about 500 ms a decode step" in text


def test_decode_lower_bound_by_hand() -> None:
    ad = cm.Adapter(lora_r=1, protocol_tokens=0, d_ts=4)
    weights = TOY.base_params() * 2 + ad.lora_params(TOY) * 4
    kv = sum(2 * (3 + k) * 1 * 2 * 2 * 2 for k in range(4))  # rows 2 x context x layers x (K, V) x kv_dim x bf16
    assert cm.decode_seconds_lower_bound(TOY, ad, rows=2, prompt=3, new=4, hbm_tbps=1.0) == (4 * weights + kv) / 1e12


@pytest.mark.slow
def test_committed_readme_is_the_generators_output(tmp_path) -> None:
    """results/accelerator/README.md is not stale: regenerated (without the smoke part) it is the same."""
    from pathlib import Path

    from benchmarks.accelerator.readme import write_readme

    def body(text: str) -> list[str]:
        lines = text.split("## The cost model against the CPU smoke")[0].splitlines()
        return [x for x in lines if not x.startswith("Generated by")]

    results = Path(__file__).resolve().parents[1] / "results/accelerator"
    for name in ("summary.json", "steps.jsonl", "decode_profile.json"):  # the GPU files the README reads
        if (results / name).exists():
            (tmp_path / name).write_bytes((results / name).read_bytes())
    assert body(write_readme(tmp_path, None).read_text()) == body((results / "README.md").read_text())
