"""The GRPO run config (``stockr1 grpo --config``): every section typed, parsed once, strict.

``GRPORunConfig.from_dict(yaml)`` builds each section's frozen dataclass through
``stockr1.config.config_from_dict``: a misspelled section or key is an error naming its path and the
nearest valid key; values are validated by each section (``GRPOTrainConfig``: a zero group size, a
non-positive learning rate; ``RolloutConfig``: the sampling settings) before any model is built.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from llm.policy import PolicyConfig
from llm.qa.generator import QAConfig
from llm.sft_config import DecoderSection, WandbSection
from llm.vllm_config import VLLMConfig, vllm_import_error
from rl.trainer import GRPOTrainConfig
from stockr1.config import YamlConfig, config_from_dict
from stockr1.data.config import DataConfig


@dataclass(frozen=True)
class GRPOQAConfig(QAConfig):
    """The QA items GRPO trains on: the SFT run's own (``qa.jsonl``) when it has them, else generated
    with these settings; ``max_train_queries``: a seeded random subset of the train split (None = all);
    ``balance_yes_no``: that subset only yes/no items, half of them with gold Yes (``rl.setup.select_train_queries``)."""

    max_train_queries: int | None = None
    balance_yes_no: bool = False


ROLLOUT_BACKENDS = ("hf", "vllm")
TWIN_DTYPES = ("float32", "bfloat16", "float16")


@dataclass(frozen=True)
class RolloutConfig:
    """``llm.rollout.RolloutEngine`` settings of the training rollouts.

    backend: ``hf`` (the policy's own decode loop: CPU, tests, the reference) or ``vllm``
    (`llm.vllm_backend`, settings in ``vllm``; unverified, docs/scale.md "Rollout backends").
    prefill_chunk: prefill prompts longer than this many tokens in pieces (hf backend; None = at once).
    merge_lora: decode a LoRA policy through a twin with the adapter merged, refreshed from the policy before
    every phase (hf backend; the same samples up to floating-point rounding, without peft's adapter matmuls
    at every decode step; one more copy of the weights). vLLM serves merged weights already.
    twin_dtype: the merged twin's dtype (null: the policy's; ``bfloat16``: half the weights and KV cache to
    read per decode step, but rows sampled from the rounded policy, as a bf16 serving engine samples them).
    """

    max_new_tokens: int = 512
    temperature: float = 1.0
    top_p: float = 1.0
    max_tool_calls: int = 1
    stop_at_answer: bool = True
    max_batch_rows: int | None = None
    prefill_chunk: int | None = None
    merge_lora: bool = False
    twin_dtype: str | None = None
    backend: str = "hf"
    vllm: VLLMConfig = field(default_factory=VLLMConfig)

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1 or self.temperature < 0 or not 0 < self.top_p <= 1 or self.max_tool_calls < 0:
            raise ValueError(f"rollout: max_new_tokens >= 1, temperature >= 0, 0 < top_p <= 1 and max_tool_calls >= 0 "
                             f"are required, got {self.max_new_tokens}, {self.temperature}, {self.top_p}, "
                             f"{self.max_tool_calls}")
        if self.prefill_chunk is not None and self.prefill_chunk < 1:
            raise ValueError(f"rollout.prefill_chunk must be >= 1 (or null: no chunking), got {self.prefill_chunk}")
        if self.backend not in ROLLOUT_BACKENDS:
            raise ValueError(f"rollout.backend must be one of {list(ROLLOUT_BACKENDS)}, got {self.backend!r}")
        if self.merge_lora and self.backend != "hf":
            raise ValueError(f"rollout.merge_lora is an option of the hf backend (rollout.backend {self.backend!r} "
                             "serves merged weights already); set it false")
        if self.twin_dtype is not None and (self.twin_dtype not in TWIN_DTYPES or not self.merge_lora):
            raise ValueError(f"rollout.twin_dtype must be null or one of {list(TWIN_DTYPES)}, with merge_lora: true; "
                             f"got {self.twin_dtype!r} with merge_lora {self.merge_lora}")
        if self.backend == "vllm" and self.vllm.mode == "colocate" and (err := vllm_import_error()) is not None:
            raise ValueError(f"rollout.backend: vllm needs vllm importable here ({err}); use rollout.backend: hf")

    def engine_kwargs(self) -> dict[str, Any]:
        """``RolloutEngine`` keyword arguments (the backend builder included)."""
        kw = {k: v for k, v in asdict(self).items() if k not in ("backend", "vllm")}
        if self.backend == "vllm":
            from llm.vllm_backend import VLLMBackend

            kw["backend"] = VLLMBackend.factory(self.vllm)
        return kw


@dataclass(frozen=True)
class SFTStart:
    run_dir: str | None = None  # the SFT run GRPO starts from (policy/, decoder/, qa.jsonl, thresholds.json)


@dataclass(frozen=True)
class GRPORunConfig(YamlConfig):
    """Every section of a GRPO YAML (configs/grpo/*.yaml documents each)."""

    run: str | None = None
    seed: int = 0
    data: DataConfig = field(default_factory=DataConfig)
    max_context_chars: int | None = None
    qa: GRPOQAConfig = field(default_factory=GRPOQAConfig)
    sft: SFTStart = field(default_factory=SFTStart)
    decoder: DecoderSection = field(default_factory=DecoderSection)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    train: GRPOTrainConfig = field(default_factory=GRPOTrainConfig)
    wandb: WandbSection = field(default_factory=WandbSection)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> GRPORunConfig:
        rollout = (d or {}).get("rollout") or {}
        if isinstance(rollout, Mapping) and "n_samples" in rollout:
            raise ValueError("grpo.rollout.n_samples is gone: the tool draws the decoder's tool_samples paths "
                             "(set by decoder.tool_samples in the SFT config, saved with the decoder)")
        return config_from_dict(cls, d, "grpo")
