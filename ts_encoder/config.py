"""Configs of the time-series encoder: architecture (``TSEncoderConfig``) and loss weights.

Task and optimiser settings (lr, warmup, batch size, data source) live on the LightningModule /
DataModule, so a checkpoint's architecture is exactly this dataclass.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

SCALE_REFS: tuple[str, ...] = ("window", "ewma")
# U = Σ σ² over these rows of the Gaussian heads (0 = open, 1 = close, 2 = volume): the paper's O, C, V,
# or the close alone, which every series observes (a universe that mixes close-only stocks and OHLCV indices)
UNCERTAINTY_CHANNELS: dict[str, tuple[int, ...]] = {"ocv": (0, 1, 2), "close": (1,)}

@dataclass(frozen=True)
class TSEncoderConfig:
    """Architecture of ``ts_encoder.model.TSEncoder`` (Stock-R1 §3.2, App. B.1, C.2).

    lookback:   L, days of history per window (90 in the paper); must be a multiple of patch_len
    horizon:    S, forecast steps (10)
    patch_len:  days per patch (5); one token per (patch, variable), K = (L / patch_len) * n_vars
    n_vars:     input channels (5: open, high, low, close, volume)
    d_model, n_layers, n_heads, ffn_dim: transformer sizes (Table 4 for small/base/large)
    dropout:    residual, attention and embedding dropout (0.1)
    d_llm:      width of the soft tokens ``h_ts`` handed to the LLM (Qwen3-4B: 2560)
    cond_dim:   width of the optional conditioning vector fed through FiLM (0 = unconditioned)
    rope_base:  RoPE frequency base
    min_sigma:  floor added to softplus(σ) (in units of the window std), keeps the NLL finite
    input_clip: normalised inputs are clipped to ±input_clip (data errors in volume reach 20 σ)
    price_mu_scale: output multiplier of the open / close mean heads. Under Adam a multiplier κ < 1
                is a κ-times smaller step for those means: daily index returns have almost no
                predictable mean, and a small model otherwise fits spurious drifts (see docs)
    scale_ref:  the reference scale ``s`` of the spread heads (σ = s · softplus(w·h)): ``window`` (default,
                the shipped encoders) = the equal-weight std of the L-day window; ``ewma`` = the RiskMetrics
                EWMA std of the window (decay ``ewma_lambda``, days <= t only, around the train mean
                ``x_loc``), and the heads also see log(ewma / window) next to log(window / train), so they
                can learn how far the recent volatility reverts over the horizon (``model.ewma_std``)
    ewma_lambda: the EWMA decay (0.94, RiskMetrics daily); read only when scale_ref == "ewma"
    missing_embed: learn a "missing" embedding for the tokens of absent channels (close-only series;
                ``TSEncoder.forward(..., channels=)``). False (default, the shipped encoders): no such
                parameter, so their state dict is unchanged; they still accept masks, a masked token
                then being its variable embedding alone
    uncertainty: the channels of U = Σ_s Σ_i σ² (``ts_encoder.uncertainty``): ``ocv`` (default, the paper's
                open, close and volume) or ``close`` (the close alone). A close-only row has no open or volume
                σ, so under ``ocv`` its U is not comparable with an OHLCV row's; an encoder of a universe that
                mixes them uses ``close``, the one channel every series has
    """

    lookback: int = 90
    horizon: int = 10
    patch_len: int = 5
    n_vars: int = 5
    d_model: int = 512
    n_layers: int = 8
    n_heads: int = 8
    ffn_dim: int = 2048
    dropout: float = 0.1
    d_llm: int = 2560
    cond_dim: int = 0
    rope_base: float = 10000.0
    min_sigma: float = 1e-3
    input_clip: float = 10.0
    price_mu_scale: float = 1.0
    scale_ref: str = "window"
    ewma_lambda: float = 0.94
    missing_embed: bool = False
    uncertainty: str = "ocv"

    def __post_init__(self) -> None:
        if self.uncertainty not in UNCERTAINTY_CHANNELS:
            raise ValueError(f"uncertainty must be one of {sorted(UNCERTAINTY_CHANNELS)}, got {self.uncertainty!r}")
        if self.scale_ref not in SCALE_REFS:
            raise ValueError(f"scale_ref must be one of {SCALE_REFS}, got {self.scale_ref!r}")
        if not 0.0 < self.ewma_lambda < 1.0:
            raise ValueError(f"ewma_lambda must be in (0, 1), got {self.ewma_lambda}")
        if self.lookback % self.patch_len:
            raise ValueError(f"lookback={self.lookback} must be a multiple of patch_len={self.patch_len}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} must be divisible by n_heads={self.n_heads}")
        if (self.d_model // self.n_heads) % 2:
            raise ValueError(f"head dim {self.d_model // self.n_heads} must be even for RoPE")
        for name in ("lookback", "horizon", "patch_len", "n_vars", "n_layers", "ffn_dim", "d_llm"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.cond_dim < 0:
            raise ValueError(f"cond_dim must be >= 0, got {self.cond_dim}")

    @property
    def n_patches(self) -> int:
        return self.lookback // self.patch_len

    @property
    def u_channels(self) -> tuple[int, ...]:
        """Rows of the Gaussian heads (0 = O, 1 = C, 2 = V) that U sums (``uncertainty``)."""
        return UNCERTAINTY_CHANNELS[self.uncertainty]

    @property
    def n_tokens(self) -> int:
        """K, the number of time-series tokens."""
        return self.n_patches * self.n_vars

    def to_dict(self) -> dict[str, Any]:
        """The fields, without ``missing_embed`` while it is False and ``uncertainty`` while it is ``ocv``:
        the saved configs of encoders without them (the earlier shipped ones) stay byte for byte what they
        were, and ``from_any`` reads the defaults back."""
        d = asdict(self)
        if not d["missing_embed"]:
            del d["missing_embed"]
        if d["uncertainty"] == "ocv":
            del d["uncertainty"]
        return d

    @classmethod
    def from_any(cls, value: TSEncoderConfig | dict[str, Any] | None) -> TSEncoderConfig:
        """Accept a config, a plain dict (as stored in a checkpoint) or None (defaults)."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        known = {f.name for f in fields(cls)}
        unknown = set(value) - known
        if unknown:
            raise ValueError(f"unknown TSEncoderConfig fields {sorted(unknown)}; known: {sorted(known)}")
        return cls(**value)


@dataclass(frozen=True)
class LossWeights:
    """λ_i of L_TS (Stock-R1 Eq. in §3.2): Gaussian NLL for O, C, V and pinball for H (τ=.95), L (τ=.05)."""

    open: float = 1.0
    close: float = 1.0
    volume: float = 1.0
    high: float = 1.0
    low: float = 1.0
    tau_high: float = 0.95
    tau_low: float = 0.05
    close_crps: float = 0.0  # weight of the cumulative close's Gaussian CRPS (ts_encoder.loss; 0 = the paper's L_TS)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_any(cls, value: LossWeights | dict[str, Any] | None) -> LossWeights:
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        return cls(**value)
