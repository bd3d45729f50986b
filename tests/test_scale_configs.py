"""Real-scale configs fit together offline: the Qwen3 architecture table (llm/arch.py), a random-init
policy of a named architecture (PolicyConfig.random_init_layers), the decoder width of every 4B/8B
SFT/GRPO config, and train.grad_clip_scope (a huge L_TS cannot shrink the policy's step)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import torch
import yaml

from forecast_action.train import DECODER_DIR  # what `stockr1 decoder` writes (tests/test_action_train.py)
from llm.arch import QWEN3_ARCHS, hidden_size, qwen3_config
from llm.policy import LORA_TARGETS, Policy, PolicyConfig
from tests.test_sft_joint import setup  # noqa: F401 (the shared tiny SFT fixture)

ROOT = Path(__file__).resolve().parents[1]
REAL = [f"configs/{stage}/qwen3-{size}.yaml" for stage in ("sft", "grpo") for size in ("4b", "8b")]


def test_arch_table_shapes() -> None:
    c4 = qwen3_config("Qwen/Qwen3-4B-Instruct-2507", 2)
    assert (c4.hidden_size, c4.intermediate_size, c4.num_hidden_layers, c4.num_attention_heads,
            c4.num_key_value_heads, c4.head_dim, c4.vocab_size, c4.tie_word_embeddings) == \
        (2560, 9728, 2, 32, 8, 128, 151936, True)
    assert len(c4.layer_types) == 2
    c8 = qwen3_config("Qwen/Qwen3-8B")
    assert (c8.hidden_size, c8.intermediate_size, c8.num_hidden_layers, c8.tie_word_embeddings) == (4096, 12288, 36, False)
    assert hidden_size("Qwen/Qwen3-0.6B") == 1024 and hidden_size("Qwen/Qwen3-4B") == 2560
    assert set(QWEN3_ARCHS) >= {"Qwen/Qwen3-4B-Instruct-2507", "Qwen/Qwen3-4B", "Qwen/Qwen3-8B", "Qwen/Qwen3-0.6B"}
    with pytest.raises(ValueError, match="no architecture"):
        qwen3_config("Qwen/Qwen9-1T")


def test_random_init_policy_of_a_local_architecture(tmp_path: Path, tiny_tokenizer_dir: Path) -> None:
    """A local config.json (what AutoConfig reads before the table) with 3 layers, cut to 1; LoRA on every
    target plus the protocol rows (untied head: lm_head rows too); deterministic; save/load round trip."""
    from transformers import Qwen3Config

    from llm.special_tokens import PROTOCOL_TOKENS

    arch = tmp_path / "arch"
    Qwen3Config(vocab_size=512, hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=2,
                num_key_value_heads=1, head_dim=16, tie_word_embeddings=False).save_pretrained(arch)
    cfg = PolicyConfig(name_or_path=str(arch), tokenizer_path=str(tiny_tokenizer_dir), random_init_layers=1, lora_r=2,
                       lora_alpha=2, lora_dropout=0.0, d_ts=4)
    pol = Policy(cfg)
    base = pol.model.get_base_model()
    assert base.config.num_hidden_layers == 1 and base.get_input_embeddings().weight.shape == (512, 32)
    lora = {n.rsplit(".", 1)[-1] for n, m in base.named_modules() if hasattr(m, "lora_A")}
    assert lora == set(pol.lora_target_names) == set(LORA_TARGETS)  # read from the architecture (lora_targets omitted)
    names = [n for n, p in pol.named_parameters() if p.requires_grad and "trainable_tokens" in n]
    assert any("embed_tokens" in n for n in names) and any("lm_head" in n for n in names)
    assert max(pol.tokenizer.convert_tokens_to_ids(t) for t in PROTOCOL_TOKENS) < 512
    ids = pol.tokenizer("the close <answer>", return_tensors="pt").input_ids
    pol.eval()
    again = Policy(cfg).eval()
    torch.testing.assert_close(pol(ids).logits, again(ids).logits, rtol=0, atol=0)  # a function of the config
    pol.save(tmp_path / "saved")
    torch.testing.assert_close(Policy.load(tmp_path / "saved").eval()(ids).logits, pol(ids).logits)


def _yaml(path: str | Path) -> dict:
    return yaml.safe_load((ROOT / path).read_text())


@pytest.mark.parametrize("config", REAL)
def test_real_scale_decoder_width_and_file(config: str) -> None:
    """decoder.checkpoint is the saved decoder directory that `stockr1 decoder --config <decoder.config>
    --out <its folder>` writes (the command is in the decoder config's header), and that decoder's d_llm equals
    the policy's hidden size (table) and policy.d_ts."""
    cfg = _yaml(config)
    ckpt, dconf = Path(cfg["decoder"]["checkpoint"]), cfg["decoder"]["config"]
    assert ckpt.name == DECODER_DIR  # forecast_action.train writes OUT/decoder/ (save_pretrained)
    text = (ROOT / dconf).read_text()
    assert re.search(rf"stockr1 decoder --config {re.escape(dconf)} --out {re.escape(str(ckpt.parent))}\s",
                     re.sub(r"\n#\s*", " ", text)), "the decoder config's header names the command that writes the file"
    d_llm = yaml.safe_load(text)["model"]["d_llm"]
    pol = cfg["policy"]
    assert d_llm == hidden_size(pol["name_or_path"]) == pol["d_ts"]


# ------------------------------------------------------------------ grad_clip_scope
def _policy_grads(fixture, scope: str, lambda_ts: float) -> tuple[dict[str, torch.Tensor], dict[str, float]]:
    from llm.sft import SFTData, SFTTrainer, TrainConfig
    from tests.test_sft_joint import make_model

    w, traces, tok = fixture
    model = make_model(tok)
    model.lambda_ts = lambda_ts
    cfg = TrainConfig(lr=1e-3, decoder_lr=1e-3, warmup_steps=1, max_steps=1, batch_size=2, accelerator="cpu",
                      grad_clip=0.05, grad_clip_scope=scope)
    tr = SFTTrainer(model, cfg, "/nonexistent-unused")
    tr.train_step(SFTData(traces, w, tok, max_len=4096).batch([0, 1]))
    grads = {n: p.grad.clone() for n, p in model.policy.named_parameters() if p.grad is not None}
    return grads, tr.grad_norms


def test_per_model_clip_keeps_the_policy_step_independent_of_lambda_ts(setup) -> None:  # noqa: F811
    """Under "per_model" the policy's clipped gradient is the same for lambda_ts 0.5 and 5000; under the
    default "all" the larger L_TS term shrinks it."""
    g_small, n_small = _policy_grads(setup, "per_model", 0.5)
    g_big, n_big = _policy_grads(setup, "per_model", 5000.0)
    assert set(n_big) == {"grad_norm_policy", "grad_norm_decoder"} and n_big["grad_norm_decoder"] > n_small["grad_norm_decoder"]
    for n in g_small:
        torch.testing.assert_close(g_big[n], g_small[n])
    clipped = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in g_big.values()]))
    assert clipped <= 0.05 * (1 + 1e-4)
    a_small, m_small = _policy_grads(setup, "all", 0.5)
    a_big, _ = _policy_grads(setup, "all", 5000.0)
    assert set(m_small) == {"grad_norm"}
    shrink = sum(float(a_big[n].norm()) for n in a_big) / sum(float(a_small[n].norm()) for n in a_small)
    assert shrink < 0.5


def test_grad_clip_scope_is_validated() -> None:
    from llm.sft import TrainConfig

    assert TrainConfig().grad_clip_scope == "all"  # the default: tiny runs clip as before
    with pytest.raises(ValueError, match="grad_clip_scope"):
        dataclasses.replace(TrainConfig(), grad_clip_scope="policy")


# ------------------------------------------------------------------ smoke helpers (the runs: test_smoke_real_scale.py)
def test_smoke_settings_and_refusals(tmp_path: Path) -> None:
    from forecast_action.build import build_decoder
    from llm.smoke import SMOKE, device_settings, policy_section

    dev = device_settings("bfloat16")
    if not torch.cuda.is_available():
        assert (dev.accelerator, dev.precision, dev.dtype) == ("cpu", "32-true", "float32")
    sec = policy_section(_yaml("configs/sft/qwen3-4b.yaml"), tmp_path / "tok", dev)
    assert sec["random_init_layers"] == SMOKE.layers and sec["lora_r"] == 32 and sec["tokenizer_path"] == str(tmp_path / "tok")
    PolicyConfig.from_dict(sec)  # a valid policy config
    with pytest.raises(ValueError, match="real-scale"):
        policy_section(_yaml("configs/sft/tiny.yaml"), tmp_path, dev)
    with pytest.raises(FileNotFoundError, match="stockr1 decoder --config configs/forecast_action/qwen3-4b.yaml"):
        build_decoder({"checkpoint": str(tmp_path / "missing" / "decoder"),
                       "config": "configs/forecast_action/qwen3-4b.yaml"})


def test_real_scale_configs_read_the_built_dataset_and_the_smoke_falls_back(tmp_path: Path) -> None:
    """The 4B/8B SFT/GRPO configs train on `stockr1 data build --source yfinance --out data/sp500`; the
    smoke, which must run offline, uses the sample in its place while that directory is not built and
    says so; a built dataset is used as it is."""
    from llm.smoke import smoke_data

    for config in REAL:
        assert _yaml(config)["data"] == {"source": "dataset", "path": "data/sp500", "lookback": 90, "horizon": 10}
    data, note = smoke_data({"data": {"source": "dataset", "path": str(tmp_path / "sp500"), "lookback": 90}})
    assert data == {"source": "sample", "lookback": 90} and note == f"sample (dataset {tmp_path / 'sp500'} not built)"
    (tmp_path / "sp500").mkdir()
    (tmp_path / "sp500" / "manifest.json").write_text("{}")
    data, note = smoke_data({"data": {"source": "dataset", "path": str(tmp_path / "sp500")}})
    assert data["source"] == "dataset" and note == f"dataset {tmp_path / 'sp500'}"
    assert smoke_data({"data": {"source": "sample"}}) == ({"source": "sample"}, "sample")
