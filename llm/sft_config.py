"""The SFT run config (``stockr1 sft --config``): every section typed, parsed once, strict.

``SFTRunConfig.from_dict(yaml)`` builds the frozen dataclasses of every section through
``stockr1.config.config_from_dict``: a misspelled section (``trian:``) or key (``data: {sourc: ...}``)
is an error that names its path and the nearest valid key, and each section validates its values
(a negative learning rate, a horizon longer than the window) before any work starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from forecast_action.decoder_loss import DecoderRecipe
from forecast_action.encoder import ActionEncoderConfig
from forecast_action.render import STYLES
from llm.policy import PolicyConfig
from llm.qa.generator import QAConfig
from llm.traces import TraceConfig
from stockr1.config import YamlConfig, config_from_dict
from stockr1.data.config import DataConfig
from stockr1.distributed import check_distributed
from ts_encoder.config import TSEncoderConfig


@dataclass(frozen=True)
class TrainConfig:
    lr: float = 2e-5  # App. C.2
    decoder_lr: float = 1e-4
    weight_decay: float = 0.01
    warmup_steps: int = 100
    max_steps: int = 1000
    batch_size: int = 8
    lambda_ts: float = 0.1
    max_len: int = 2048
    emphasis: float = 1.0  # L_SFT weight of the protocol tokens (llm.traces.PROTOCOL_SPANS); 1 = plain mean
    # "template": draw every question template equally often. The trace filter keeps ~40% of numeric
    # items and ~73% of yes/no ones, so plain draws under-train the rarer answer spaces. "none": uniform.
    balance: str = "none"
    ckpt_every: int = 50
    # every k steps (and before the last) a loadable copy of the run in run_dir/snapshots/step_NNNNN: the
    # candidates `stockr1 bench select_sft` grades on validation questions (None: the final weights only)
    snapshot_every: int | None = None
    log_every: int = 10
    seed: int = 0
    grad_clip: float = 1.0
    # "all": one norm over every trainable parameter (the default, as before). "per_model": the policy's
    # (LoRA, protocol rows, projector) and the decoder's gradients are clipped each to grad_clip. Why: a
    # fresh 4B-width decoder's L_TS is ~3e4 on a batch of 8 (flat-history windows put sigma at its floor;
    # docs/scale.md), its gradient norm ~3e5 against the policy's ~16, so under one shared clip the policy's
    # step shrinks ~2e4-fold; clipped apart, lambda_ts * L_TS cannot swamp L_SFT's update. L_SFT still
    # reaches the decoder through h_ts.
    grad_clip_scope: str = "all"
    precision: str = "32-true"
    accelerator: str = "auto"
    # several devices / nodes (stockr1/distributed.py, docs/scale.md): batch_size is the GLOBAL batch,
    # split evenly over devices x num_nodes ranks, so a run's batches do not depend on the world size
    devices: int | str = 1
    num_nodes: int = 1
    strategy: str = "auto"

    def __post_init__(self) -> None:
        check_distributed(self.devices, self.num_nodes, self.strategy)
        if not self.lr > 0 or not self.decoder_lr >= 0 or self.warmup_steps < 0:
            raise ValueError(f"train.lr must be > 0, train.decoder_lr >= 0 and train.warmup_steps >= 0, got "
                             f"{self.lr}, {self.decoder_lr}, {self.warmup_steps}")
        for name in ("max_steps", "batch_size", "max_len", "ckpt_every", "log_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"train.{name} must be >= 1, got {getattr(self, name)}")
        if self.snapshot_every is not None and self.snapshot_every < 1:
            raise ValueError(f"train.snapshot_every must be >= 1 or null, got {self.snapshot_every}")
        if self.balance not in ("none", "template"):
            raise ValueError(f"train.balance must be 'none' or 'template', got {self.balance!r}")
        if self.grad_clip_scope not in ("all", "per_model"):
            raise ValueError(f"train.grad_clip_scope must be 'all' or 'per_model', got {self.grad_clip_scope!r}")


@dataclass(frozen=True)
class DecoderSection:
    """The action-conditioned decoder of a run: a saved one (``checkpoint``, written by ``config``'s
    training command) or a fresh one (``ts`` + ``action`` architecture, ``seed``) warmed up on L_TS for
    ``warmup_steps`` before the traces are written. ``tool_samples``: sample paths per tool call (saved
    with the decoder, so every later stage draws the same number); ``observation``: the layout of the
    tool's text, saved the same way. ``recipe``: how the decoder's loss is
    formed in the warm-up and in joint SFT (``forecast_action.decoder_loss``, as in ``stockr1 decoder``)."""

    seed: int = 0
    warmup_steps: int = 0
    tool_samples: int | None = None
    # the layout of the tool's <forecast_ts> text (forecast_action.render.STYLES), saved with the decoder;
    # None: a fresh decoder's default (compact), a checkpoint's own
    observation: str | None = None
    checkpoint: str | None = None
    config: str | None = None
    ts: TSEncoderConfig = field(default_factory=TSEncoderConfig)
    action: ActionEncoderConfig = field(default_factory=ActionEncoderConfig)
    recipe: DecoderRecipe = field(default_factory=DecoderRecipe)

    def __post_init__(self) -> None:
        if self.warmup_steps < 0:
            raise ValueError(f"decoder.warmup_steps must be >= 0, got {self.warmup_steps}")
        if self.observation is not None and self.observation not in STYLES:
            raise ValueError(f"decoder.observation must be one of {STYLES}, got {self.observation!r}")
        if self.tool_samples is not None and self.tool_samples < 1:
            raise ValueError(f"decoder.tool_samples must be >= 1, got {self.tool_samples}")
        if self.ts.cond_dim and self.ts.cond_dim != self.action.cond_dim:
            raise ValueError(f"decoder.ts.cond_dim ({self.ts.cond_dim}) != decoder.action.cond_dim ({self.action.cond_dim})")


@dataclass(frozen=True)
class WandbSection:
    project: str = "stockr1"
    mode: str = "offline"
    group: str | None = None


@dataclass(frozen=True)
class SFTRunConfig(YamlConfig):
    """Every section of an SFT YAML (configs/sft/*.yaml documents each)."""

    run: str | None = None
    data: DataConfig = field(default_factory=DataConfig)
    max_context_chars: int | None = None
    qa: QAConfig = field(default_factory=QAConfig)
    traces: TraceConfig = field(default_factory=TraceConfig)
    decoder: DecoderSection = field(default_factory=DecoderSection)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    tokenizer_vocab: int = 4000
    train: TrainConfig = field(default_factory=TrainConfig)
    wandb: WandbSection = field(default_factory=WandbSection)
    prepare_from: str | None = None  # share QA items, decoder init and traces with another run dir

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> SFTRunConfig:
        return config_from_dict(cls, d, "sft")
