"""`VLLMConfig`: how the vLLM rollout backend reaches its engine (``rollout.vllm`` in a GRPO config).

- ``mode: colocate``: a ``vllm.LLM`` in the training process, on the training GPU, with sleep mode:
  it frees its memory (weights and KV cache) after each rollout and takes it back before the next.
  ``gpu_memory_utilization`` is the share of the GPU it may take while awake.
- ``mode: server``: a running ``vllm serve`` (``base_url``) started with ``--enable-prompt-embeds
  --logprobs-mode processed_logprobs`` and ``VLLM_SERVER_DEV_MODE=1`` (for ``/collective_rpc``,
  ``/sleep``, ``/wake_up``); the merged weights go through ``sync_dir``, a directory both sides see.

Nothing here imports vllm; `llm.vllm_backend` does, when the backend is built.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

VLLM_MODES = ("colocate", "server")


@dataclass(frozen=True)
class VLLMConfig:
    """Settings of the vLLM engine (see the module docstring)."""

    mode: str = "colocate"
    dtype: str = "bfloat16"  # the engine's weights and the prompt embeddings sent to it
    gpu_memory_utilization: float = 0.3
    tensor_parallel_size: int = 1
    max_model_len: int | None = None
    enable_sleep_mode: bool = True  # colocate: sleep after each rollout (level below), wake before the next
    sleep_level: int = 2  # 2: drop the weights too (they are pushed again after every update anyway)
    model_dir: str | None = None  # colocate: where config.json + tokenizer for the engine go (default: a temp dir)
    base_url: str | None = None  # server: e.g. http://localhost:8000
    served_model_name: str | None = None  # server: the model name the server answers to (default: its first)
    sync_dir: str | None = None  # server: directory the merged weights are written to for the server to read
    request_timeout_s: float = 600.0
    extra: dict[str, Any] = field(default_factory=dict)  # passed to vllm.LLM(...) as is

    def __post_init__(self) -> None:
        if self.mode not in VLLM_MODES:
            raise ValueError(f"rollout.vllm.mode must be one of {list(VLLM_MODES)}, got {self.mode!r}")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ValueError(f"rollout.vllm.gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization}")
        if self.tensor_parallel_size < 1:
            raise ValueError(f"rollout.vllm.tensor_parallel_size must be >= 1, got {self.tensor_parallel_size}")
        if self.sleep_level not in (1, 2):
            raise ValueError(f"rollout.vllm.sleep_level must be 1 or 2, got {self.sleep_level}")
        if self.mode == "server" and not (self.base_url and self.sync_dir):
            raise ValueError("rollout.vllm.mode: server needs base_url (the running `vllm serve`) and sync_dir "
                             "(a directory the server reads the pushed weights from)")


@functools.cache
def vllm_import_error() -> str | None:
    """None when ``import vllm`` works here, else the one-line reason (cached: the import is slow)."""
    try:
        import vllm  # noqa: F401
    except Exception as e:  # not installed, or installed without a usable CUDA build
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}".strip()
    return None
