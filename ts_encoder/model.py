"""Causal multichannel time-series transformer with distributional heads (Stock-R1 §3.2, App. B.1).

Tokens. ``x [B, V=5, L]`` is cut into ``P = L / patch_len`` patches per variable; one token per
(patch, variable), flattened in time order: token ``k = p * V + v`` (K = P * V). A token's time index
is its patch index ``p`` - the paper's "timestamp τ" at patch resolution, since a patch is the
smallest unit the model sees.

Attention (App. B.1). ``softmax(q̃·k̃/√d_h + M + B) v`` with
  * RoPE whose angle depends on the patch index only, so the 5 variables of one patch share it;
  * ``M`` the block-causal mask: token (τ, v) sees every (τ', v') with τ' ≤ τ, i.e. also the other
    variables of its own patch (all of them are observed by the end of patch τ);
  * ``B`` = ``b_intra`` where v = v', ``b_inter`` otherwise; two learnable scalars shared across
    layers. Only ``b_intra - b_inter`` changes the softmax; both are kept, as in the paper.
M + B is one additive float mask passed to ``F.scaled_dot_product_attention``. Since softmax is
shift-invariant, outputs depend on ``b_intra - b_inter`` only (their gradients are opposite).

Dropout (0.1, App. C.2) is applied to the token embeddings and to every residual branch, not to
the attention probabilities: that would double the cost of attention on CPU (a Bernoulli mask on
the [B, H, K, K] scores) for a regulariser the paper does not ask for specifically.

Heads. As in the paper the heads read the LLM-width tokens ``H_ts = proj(hidden)`` (so the
projection the LLM consumes is trained by L_TS too): ``h_t`` (the "aggregated latent state at time
t") is the mean of ``H_ts`` over the V tokens of the last patch - each of them has seen the whole
window, and the mean keeps the heads independent of the token order. Optional ``cond [B, cond_dim]`` modulates ``h_t`` by FiLM,
``h ← h ⊙ (1 + γ(cond)) + β(cond)``, with γ, β zero-initialised so the model is unconditioned at
start; the action-conditioned decoder feeds its action embedding here. Linear heads give, per
horizon step, μ and softplus σ for the O, C, V log returns and the τ=.95 / τ=.05 quantiles of the
H / L log returns.

Scale. Inputs are standardised per channel with ``x_loc`` / ``x_scale`` (buffers fitted on the
training split, saved in the state dict); outputs are mapped back, so ``TSOutput`` is in raw
log-return units and the loss is the paper's, in raw units. The spread heads (σ, and the quantiles'
distance from the channel mean) are in units of the window's own per-channel std ``s`` (all days
≤ t, so no look-ahead) and the heads also see ``log(s / x_scale)``: σ = s · softplus(w_σᵀ h_t).
This is the paper's softplus head reparametrised like RevIN / Chronos mean scaling: at
initialisation the model *is* the trailing-volatility random walk, and it learns how future
volatility departs from the trailing one (clustering, mean reversion). Token causality is
untouched: ``s`` enters only the heads, never ``hidden`` / ``h_ts``.

``scale_ref = "ewma"`` (config; default ``window``) makes ``s`` the RiskMetrics EWMA std of the window
(``ewma_std``: λ = 0.94, the same recursion as the ``ewma`` baseline, around the train mean), which reacts
to the last days as EWMA / GARCH do, and adds ``log(ewma / window)`` to the heads' state (through
``ratio_embed``, zero-initialised) beside ``log(window / train)``: the two ratios are what a GARCH(1,1)
term structure needs (how far the recent level sits from the longer one, and from the long-run one).
Encoders with ``window`` have no ``ratio_embed``, so their state dict and outputs are unchanged.

Absent channels (``channels [B, V]`` bool, False = absent: close-only stocks beside OHLCV indices; the
close is required). Their values (NaN in the data) are replaced by the train mean ``x_loc`` before any
arithmetic; their tokens get the "missing" embedding (``missing_embed``, config ``missing_embed``; zero
when the encoder has none) plus the variable embedding instead of a patch embedding; they are masked
out as attention keys (every query still sees the close tokens of its patch and the earlier ones), the
state ``h_t`` is the mean over the observed variables of the last patch, and their scale features are
zero. So nothing an observed token, the state or any head computes depends on an absent channel: the
missing embedding reaches only the absent tokens' own ``h_ts`` (what the LLM reads), and L_TS alone gives
it no gradient. The heads still emit numbers for absent channels (finite, from the observed data only);
``TSOutput.channels`` carries the mask, and the loss, the uncertainty and the forecasts skip them.
With every channel observed (or ``channels=None``) and no missing embedding the forward is the code
path of before, bit for bit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from stockr1.types import CLOSE, HIGH, LOW, OPEN, VOLUME
from ts_encoder.config import TSEncoderConfig

GAUSSIAN_CHANNELS: tuple[int, ...] = (OPEN, CLOSE, VOLUME)  # rows of mu / sigma
_SOFTPLUS_ONE = math.log(math.e - 1.0)  # softplus(_SOFTPLUS_ONE) == 1
_Z95 = 1.6448536269514722


@dataclass
class TSOutput:
    """mu, sigma: [B, 3, S] for (open, close, volume) log returns; q_high, q_low: [B, S];
    hidden: [B, K, d_model]; h_ts: [B, K, d_llm]; state: [B, d_llm] (h_t after FiLM);
    channels: [B, 5] bool observed channels (None = all): the rows of mu/sigma/q_* of an absent
    channel are placeholders that every consumer must skip."""

    mu: Tensor
    sigma: Tensor
    q_high: Tensor
    q_low: Tensor
    hidden: Tensor
    h_ts: Tensor
    state: Tensor
    channels: Tensor | None = None


def ewma_std(x: Tensor, loc: Tensor, lam: float, floor: Tensor) -> Tensor:
    """RiskMetrics EWMA std per channel of windows ``x [B, V, L]`` (oldest day first, day t last) -> [B, V].

    With ``r_d = x_d - loc`` (loc [V], the train mean): ``v_0 = mean_d r_d²``, ``v_d = λ v_{d-1} + (1-λ) r_d²``
    over the L days, std = sqrt(v_L + floor²) (floor [V] as for the window std). The recursion of
    ``stockr1.baselines.ewma.ewma_variance`` (which has loc = 0), in closed form:
    ``v_L = λ^L v_0 + Σ_d (1-λ) λ^(L-1-d) r_d²``. Reads only the window's days (<= t).
    """
    r2 = (x - loc[:, None]) ** 2
    n = x.shape[-1]
    w = (1.0 - lam) * lam ** torch.arange(n - 1, -1, -1, dtype=x.dtype, device=x.device)  # [L], day t last
    var = lam ** n * r2.mean(-1) + (r2 * w).sum(-1)
    return (var + floor ** 2).sqrt()


class RotaryEmbedding(nn.Module):
    """RoPE on [B, H, K, d_h] with one position per token (here: the token's patch index)."""

    def __init__(self, head_dim: int, positions: Tensor, base: float) -> None:
        super().__init__()
        inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        angles = positions.float()[:, None] * inv_freq[None, :]  # [K, d_h/2]
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        x1, x2 = x[..., 0::2], x[..., 1::2]
        cos, sin = self.cos.to(x.dtype), self.sin.to(x.dtype)
        out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
        return out.flatten(-2)


class Attention(nn.Module):
    def __init__(self, cfg: TSEncoderConfig, rope: RotaryEmbedding) -> None:
        super().__init__()
        self.n_heads = cfg.n_heads
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.out = nn.Linear(cfg.d_model, cfg.d_model)
        self.rope = rope

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        """x: [B, K, d]; mask: [K, K] additive float mask (M + B)."""
        b, k, d = x.shape
        q, kk, v = self.qkv(x).view(b, k, 3, self.n_heads, d // self.n_heads).permute(2, 0, 3, 1, 4)
        q, kk = self.rope(q), self.rope(kk)
        y = F.scaled_dot_product_attention(q, kk, v, attn_mask=mask.to(q.dtype))
        return self.out(y.transpose(1, 2).reshape(b, k, d))


class Block(nn.Module):
    """Pre-norm transformer block."""

    def __init__(self, cfg: TSEncoderConfig, rope: RotaryEmbedding) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(cfg.d_model), nn.LayerNorm(cfg.d_model)
        self.attn = Attention(cfg, rope)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.d_model, cfg.ffn_dim), nn.GELU(), nn.Linear(cfg.ffn_dim, cfg.d_model)
        )
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        x = x + self.drop(self.attn(self.ln1(x), mask))
        return x + self.drop(self.mlp(self.ln2(x)))


class FiLM(nn.Module):
    """h ⊙ (1 + γ(c)) + β(c); the last layer is zero-initialised so FiLM starts as the identity."""

    def __init__(self, cond_dim: int, d_model: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(cond_dim, d_model), nn.SiLU(), nn.Linear(d_model, 2 * d_model))
        nn.init.zeros_(self.net[-1].weight)
        nn.init.zeros_(self.net[-1].bias)

    def forward(self, h: Tensor, cond: Tensor) -> Tensor:
        gamma, beta = self.net(cond).chunk(2, dim=-1)
        return h * (1.0 + gamma) + beta


class TSEncoder(nn.Module):
    """``forward(x [B, 5, L], cond [B, cond_dim] | None, channels [B, 5] bool | None) -> TSOutput``
    (raw log-return units; ``channels`` False = absent, see the module docstring)."""

    def __init__(self, cfg: TSEncoderConfig) -> None:
        super().__init__()
        self.cfg = cfg
        v, p, s, d = cfg.n_vars, cfg.n_patches, cfg.horizon, cfg.d_model
        time_idx = torch.arange(p).repeat_interleave(v)  # [K] patch index of token k = p * V + v
        var_idx = torch.arange(v).repeat(p)  # [K]
        self.register_buffer("causal", torch.where(time_idx[None, :] <= time_idx[:, None], 0.0, -math.inf),
                             persistent=False)
        self.register_buffer("same_var", var_idx[:, None] == var_idx[None, :], persistent=False)
        self.register_buffer("x_loc", torch.zeros(v))
        self.register_buffer("x_scale", torch.ones(v))
        self.register_buffer("mu_mult", torch.tensor([cfg.price_mu_scale, cfg.price_mu_scale, 1.0])[None, :, None],
                             persistent=False)
        self.b_intra = nn.Parameter(torch.zeros(()))
        self.b_inter = nn.Parameter(torch.zeros(()))

        self.patch_embed = nn.Linear(cfg.patch_len, d)
        self.var_embed = nn.Parameter(torch.randn(v, d) * 0.02)
        self.drop = nn.Dropout(cfg.dropout)
        rope = RotaryEmbedding(d // cfg.n_heads, time_idx, cfg.rope_base)
        self.blocks = nn.ModuleList(Block(cfg, rope) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(d)
        self.proj = nn.Linear(d, cfg.d_llm)
        self.scale_embed = nn.Linear(v, cfg.d_llm)  # log(window std / train std) -> heads' state
        nn.init.zeros_(self.scale_embed.weight)
        nn.init.zeros_(self.scale_embed.bias)
        self.ratio_embed = nn.Linear(v, cfg.d_llm) if cfg.scale_ref == "ewma" else None  # log(ewma / window std)
        if self.ratio_embed is not None:
            nn.init.zeros_(self.ratio_embed.weight)
            nn.init.zeros_(self.ratio_embed.bias)
        self.film = FiLM(cfg.cond_dim, cfg.d_llm) if cfg.cond_dim > 0 else None
        # the token of an absent channel: this + its variable embedding (zero-init; created last so the
        # other parameters draw the same initial values as an encoder without it)
        self.missing_embed = nn.Parameter(torch.zeros(d)) if cfg.missing_embed else None
        self.head_mu = nn.Linear(cfg.d_llm, 3 * s)
        self.head_sigma = nn.Linear(cfg.d_llm, 3 * s)
        self.head_high = nn.Linear(cfg.d_llm, s)
        self.head_low = nn.Linear(cfg.d_llm, s)
        # start as the trailing-vol random walk: μ = train mean, σ = window std, q = mean ± 1.645 window std
        for head, bias in ((self.head_mu, 0.0), (self.head_sigma, _SOFTPLUS_ONE),
                           (self.head_high, _Z95), (self.head_low, -_Z95)):
            nn.init.normal_(head.weight, std=0.01)
            nn.init.constant_(head.bias, bias)

    @torch.no_grad()
    def set_input_stats(self, loc: Tensor, scale: Tensor) -> None:
        """Per-channel location / scale [5] of the log-return inputs (fit on the training split)."""
        if loc.shape != self.x_loc.shape or scale.shape != self.x_scale.shape:
            raise ValueError(f"stats must be [{self.cfg.n_vars}], got {tuple(loc.shape)}, {tuple(scale.shape)}")
        if not torch.all(scale > 0):
            raise ValueError(f"x_scale must be positive, got {scale.tolist()}")
        self.x_loc.copy_(loc)
        self.x_scale.copy_(scale)

    def attn_mask(self) -> Tensor:
        """[K, K] additive mask M + B (−inf above the block-causal boundary)."""
        return self.causal + torch.where(self.same_var, self.b_intra, self.b_inter)

    def observed(self, channels: Tensor | None, b: int) -> Tensor | None:
        """The [B, V] observed mask to apply, or None for the unmasked path (every channel observed and
        no missing embedding: the code of before, bit for bit). An encoder with a missing embedding
        always takes the masked path, so its parameter is in every graph (DDP needs it used)."""
        if channels is None:
            return None if self.missing_embed is None else torch.ones(b, self.cfg.n_vars, dtype=torch.bool,
                                                                         device=self.x_loc.device)
        if channels.shape != (b, self.cfg.n_vars) or channels.dtype != torch.bool:
            raise ValueError(f"channels must be bool [B={b}, {self.cfg.n_vars}], got {channels.dtype} {tuple(channels.shape)}")
        if not bool(channels[:, CLOSE].all()):
            raise ValueError("channels: the close must be observed in every row")
        return None if self.missing_embed is None and bool(channels.all()) else channels

    def forward(self, x: Tensor, cond: Tensor | None = None, channels: Tensor | None = None) -> TSOutput:
        cfg = self.cfg
        if x.ndim != 3 or x.shape[1] != cfg.n_vars or x.shape[2] != cfg.lookback:
            raise ValueError(f"x must be [B, {cfg.n_vars}, {cfg.lookback}], got {tuple(x.shape)}")
        b = x.shape[0]
        obs = self.observed(channels, b)
        if obs is not None:  # absent values (NaN) become the train mean before any arithmetic: z = 0
            x = torch.where(obs[:, :, None], x, self.x_loc[:, None].to(x.dtype))
        z = ((x - self.x_loc[:, None]) / self.x_scale[:, None]).clamp(-cfg.input_clip, cfg.input_clip)
        patches = z.reshape(b, cfg.n_vars, cfg.n_patches, cfg.patch_len).transpose(1, 2)  # [B, P, V, patch]
        h = self.patch_embed(patches) + self.var_embed  # [B, P, V, d]
        mask = self.attn_mask()
        if obs is not None:
            missing = self.var_embed if self.missing_embed is None else self.var_embed + self.missing_embed
            h = torch.where(obs[:, None, :, None], h, missing)  # [B, P, V, d]
            keys = obs.repeat(1, cfg.n_patches)  # [B, K]: token k = p * V + v
            mask = mask + torch.zeros_like(keys, dtype=mask.dtype).masked_fill(~keys, -math.inf)[:, None, None, :]
        h = self.drop(h.reshape(b, cfg.n_tokens, cfg.d_model))  # time-major: k = p * V + v
        for block in self.blocks:
            h = block(h, mask)
        hidden = self.ln_f(h)
        h_ts = self.proj(hidden)  # [B, K, d_llm]
        floor = 1e-3 * self.x_scale
        win_std = (x.var(dim=2, unbiased=False) + floor ** 2).sqrt()  # [B, V], days <= t
        last = h_ts[:, -cfg.n_vars:]  # [B, V, d_llm]: the tokens of the last patch
        if obs is None:
            state = last.mean(dim=1)  # [B, d_llm] aggregated state at the last patch time
            scale_feat = torch.log(win_std / self.x_scale)
        else:  # over the observed variables only; an absent channel's scale feature is 0
            w = obs.to(last.dtype)
            state = torch.where(obs[:, :, None], last, 0.0).sum(dim=1) / w.sum(dim=1, keepdim=True)
            scale_feat = torch.log(win_std / self.x_scale) * w
        state = state + self.scale_embed(scale_feat)
        ref = win_std
        if self.ratio_embed is not None:  # scale_ref == "ewma"
            ref = ewma_std(x, self.x_loc, cfg.ewma_lambda, floor)
            ratio = torch.log(ref / win_std)
            state = state + self.ratio_embed(ratio if obs is None else ratio * obs.to(ratio.dtype))
        if cond is not None:
            if self.film is None:
                raise ValueError("cond given but the encoder was built with cond_dim=0")
            if cond.shape != (b, cfg.cond_dim):
                raise ValueError(f"cond must be [B={b}, {cfg.cond_dim}], got {tuple(cond.shape)}")
            state = self.film(state, cond)
        out = self._heads(state, hidden, h_ts, ref)
        out.channels = channels
        return out

    def _heads(self, state: Tensor, hidden: Tensor, h_ts: Tensor, win_std: Tensor) -> TSOutput:
        """win_std: [B, V] the reference scale of the raw inputs (the unit of the spread heads): the
        window's std, or its EWMA std when ``scale_ref == "ewma"``."""
        b, s = state.shape[0], self.cfg.horizon
        gi = list(GAUSSIAN_CHANNELS)
        loc, scale = self.x_loc[gi][None, :, None], self.x_scale[gi][None, :, None]  # [1, 3, 1]
        mu = loc + scale * self.mu_mult * self.head_mu(state).view(b, 3, s)
        sigma = win_std[:, gi, None] * (F.softplus(self.head_sigma(state).view(b, 3, s)) + self.cfg.min_sigma)
        q_high = self.x_loc[HIGH] + win_std[:, HIGH, None] * self.head_high(state)
        q_low = self.x_loc[LOW] + win_std[:, LOW, None] * self.head_low(state)
        return TSOutput(mu=mu, sigma=sigma, q_high=q_high, q_low=q_low, hidden=hidden,
                        h_ts=h_ts, state=state)


def count_parameters(cfg: TSEncoderConfig) -> int:
    """Trainable parameters of ``TSEncoder(cfg)``, built on the meta device (no memory, no time)."""
    with torch.device("meta"):
        model = TSEncoder(cfg)
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
