"""The Qwen3 architectures the real-scale configs name, so they can be built offline.

Why: with no network and no weights (CI, a fresh GPU box, a laptop) a real-scale config could not even
be instantiated, so nothing checked that its shapes fit (projector width, decoder width, LoRA targets,
memory). ``qwen3_config(name, n_layers)`` returns the model's ``Qwen3Config``: read with
``AutoConfig.from_pretrained(name, local_files_only=True)`` when the name is a local directory or in the
HF cache (never the network), else from ``QWEN3_ARCHS`` below (the numbers of each model's config.json).
An unknown name that has no local config is a ``ValueError``.

``llm.policy.PolicyConfig.random_init_layers`` uses it to build the architecture with random weights
and a cut layer count (the smoke test of ``stockr1 sft/grpo --smoke``, ``llm/smoke.py``).
"""

from __future__ import annotations

from typing import Any

_ROPE_1M = {"rope_type": "default", "rope_theta": 1_000_000.0}
_COMMON: dict[str, Any] = dict(vocab_size=151936, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                               rms_norm_eps=1e-6, hidden_act="silu", attention_bias=False)

# Architecture fields of each model's config.json (vocab includes Qwen's padding rows past the tokenizer).
QWEN3_ARCHS: dict[str, dict[str, Any]] = {
    "Qwen/Qwen3-4B-Instruct-2507": {**_COMMON, "hidden_size": 2560, "intermediate_size": 9728, "num_hidden_layers": 36,
                                    "max_position_embeddings": 262144, "tie_word_embeddings": True,
                                    "rope_parameters": {"rope_type": "default", "rope_theta": 5_000_000.0}},
    "Qwen/Qwen3-4B": {**_COMMON, "hidden_size": 2560, "intermediate_size": 9728, "num_hidden_layers": 36,
                      "max_position_embeddings": 40960, "tie_word_embeddings": True, "rope_parameters": _ROPE_1M},
    "Qwen/Qwen3-8B": {**_COMMON, "hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 36,
                      "max_position_embeddings": 40960, "tie_word_embeddings": False, "rope_parameters": _ROPE_1M},
    "Qwen/Qwen3-0.6B": {**_COMMON, "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28,
                        "num_attention_heads": 16, "max_position_embeddings": 40960, "tie_word_embeddings": True,
                        "rope_parameters": _ROPE_1M},
}


def _local_config(name: str):
    """The config.json of a local directory or a cached hub id; None when neither has one."""
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(name, local_files_only=True)
    except (OSError, ValueError):
        return None


def qwen3_config(name: str, n_layers: int | None = None, **token_ids: int):
    """``Qwen3Config`` of ``name`` (local config first, then ``QWEN3_ARCHS``), with ``n_layers`` layers
    when given (``layer_types`` cut to match) and ``token_ids`` (pad/bos/eos of the tokenizer in use)."""
    from transformers import Qwen3Config

    local = _local_config(name)
    if local is not None:
        kw = local.get_text_config().to_dict()
        for k in ("architectures", "transformers_version", "_name_or_path", "model_type", "dtype", "torch_dtype"):
            kw.pop(k, None)
    elif name in QWEN3_ARCHS:
        kw = dict(QWEN3_ARCHS[name])
    else:
        raise ValueError(f"no architecture for {name!r}: not a local model dir, not in the HF cache, and not one of "
                         f"{sorted(QWEN3_ARCHS)} (llm/arch.py)")
    if n_layers is not None:
        if n_layers < 1:
            raise ValueError(f"n_layers must be >= 1, got {n_layers}")
        kw["num_hidden_layers"] = n_layers
        if kw.get("layer_types"):
            kw["layer_types"] = list(kw["layer_types"])[:n_layers]
        if kw.get("max_window_layers") is not None:
            kw["max_window_layers"] = min(int(kw["max_window_layers"]), n_layers)
    return Qwen3Config(**{**kw, **token_ids})


def hidden_size(name: str) -> int:
    """The LLM width of ``name`` (what the soft tokens and the decoder's ``d_llm`` must match)."""
    return int(qwen3_config(name).hidden_size)
