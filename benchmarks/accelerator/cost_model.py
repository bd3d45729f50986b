"""Cost model of the Qwen3 + LoRA recipes: parameters, FLOPs per token and memory per component.

Pure arithmetic (no torch), so it can size a run before any GPU is lent. ``benchmarks.gpu_check.command`` uses
it for its MFU estimate and ``benchmarks.accelerator.readme`` writes its tables for the 4B and 8B
recipes into ``results/accelerator/README.md``.

Conventions (one multiply-add = 2 FLOPs):

- Forward of one token: ``2 * (M + R + V*h [LM head, only where logits are kept]) + A`` where ``M`` is
  the matmul weights of the layers, ``R`` the LoRA weights, ``A = 4 * L * n_heads * head_dim * ctx``
  the two attention products over ``ctx`` attended keys (causal: position i attends to i keys).
- Training with a frozen base (LoRA): the backward still propagates activation gradients through
  every frozen matmul (``2 * (M + R + V*h)`` again, attention ``2 * A``) but computes weight gradients
  only for the adapter (``2 * R``): about 2x the forward, against 3x (the usual 6N) for full
  fine-tuning. Gradient checkpointing recomputes the layers' forward once more (hardware FLOPs, not
  model FLOPs: the MFU below counts model FLOPs only).
- Memory: exact for weights, adapter, gradients and Adam states (fp32 adapter, as peft keeps it under
  a bf16 base); activations, logits and the KV cache are estimates from the tensors each op saves for
  backward (see ``activation_bytes_per_token_layer``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

GIB = 2**30
LORA_TARGETS: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
# bf16 dense peak of the chips a lent machine may have (vendor figures, TFLOP/s, no sparsity)
PEAK_BF16_TFLOPS: dict[str, float] = {"H200": 989.4, "H100": 989.4, "A100": 312.0, "L40S": 362.05, "A10": 125.0}
HBM_TBPS: dict[str, float] = {"H200": 4.8, "H100": 3.35, "A100": 2.0}  # memory bandwidth, TB/s


@dataclass(frozen=True)
class Arch:
    """The Qwen3 shape: what ``Qwen3ForCausalLM`` allocates."""

    vocab: int
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    tied: bool

    @classmethod
    def from_config(cls, c: Mapping[str, Any]) -> Arch:
        """From a ``Qwen3Config.to_dict()`` or a ``llm.arch.QWEN3_ARCHS`` entry."""
        return cls(int(c["vocab_size"]), int(c["hidden_size"]), int(c["intermediate_size"]),
                   int(c["num_hidden_layers"]), int(c["num_attention_heads"]), int(c["num_key_value_heads"]),
                   int(c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]),
                   bool(c.get("tie_word_embeddings", False)))

    def with_(self, **kw: int) -> Arch:
        return Arch(**{**self.__dict__, **kw})

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    def linears(self) -> dict[str, tuple[int, int]]:
        """(in, out) of each projection of one layer."""
        h, q, kv, i = self.hidden, self.q_dim, self.kv_dim, self.intermediate
        return {"q_proj": (h, q), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (q, h),
                "gate_proj": (h, i), "up_proj": (h, i), "down_proj": (i, h)}

    def layer_matmul_params(self) -> int:
        return sum(a * b for a, b in self.linears().values())

    def layer_params(self) -> int:
        """Projections + q/k RMSNorm (over head_dim) + the two RMSNorms (over hidden)."""
        return self.layer_matmul_params() + 2 * self.head_dim + 2 * self.hidden

    def embedding_params(self) -> int:
        return self.vocab * self.hidden * (1 if self.tied else 2)

    def base_params(self) -> int:
        return self.embedding_params() + self.layers * self.layer_params() + self.hidden


@dataclass(frozen=True)
class Adapter:
    """What the policy trains on top of the frozen base (configs/policy/*.yaml)."""

    lora_r: int = 32
    targets: tuple[str, ...] = LORA_TARGETS
    protocol_tokens: int = 11  # rows trained under LoRA (llm.special_tokens.PROTOCOL_TOKENS)
    d_ts: int = 2560
    projector: str = "mlp"  # mlp | linear

    def layer_lora_params(self, arch: Arch) -> int:
        return sum(self.lora_r * (a + b) for n, (a, b) in arch.linears().items() if n in self.targets)

    def lora_params(self, arch: Arch) -> int:
        return arch.layers * self.layer_lora_params(arch)

    def token_params(self, arch: Arch) -> int:
        """peft's trainable-token deltas: one [n, hidden] for a tied head, one per matrix otherwise."""
        return self.protocol_tokens * arch.hidden * (1 if arch.tied else 2)

    def projector_params(self, arch: Arch) -> int:
        h = arch.hidden
        first = self.d_ts * h + h
        return first if self.projector == "linear" else first + h * h + h


def param_counts(arch: Arch, ad: Adapter) -> dict[str, int]:
    """Parameters of ``llm.policy.Policy`` (what ``sum(p.numel() for p in policy.parameters())`` counts)."""
    base, lora, tok, proj = arch.base_params(), ad.lora_params(arch), ad.token_params(arch), ad.projector_params(arch)
    return {"base": base, "base_non_embedding": base - arch.embedding_params(), "lora": lora,
            "trainable_tokens": tok, "projector": proj, "trainable": lora + tok + proj,
            "total": base + lora + tok + proj}


# ----------------------------------------------------------------------------------- FLOPs
def attention_flops(arch: Arch, keys: float) -> float:
    """QK^T and PV of one query position over ``keys`` keys, all layers (forward)."""
    return 4.0 * arch.layers * arch.q_dim * keys


def forward_flops_per_token(arch: Arch, ad: Adapter, keys: float, lm_head: bool = True) -> float:
    """Forward FLOPs of one token attending to ``keys`` keys (see module docstring)."""
    dense = arch.layers * (arch.layer_matmul_params() + ad.layer_lora_params(arch))
    return 2.0 * (dense + (arch.vocab * arch.hidden if lm_head else 0)) + attention_flops(arch, keys)


def causal_keys(t: int) -> float:
    """Mean keys per position of a causal sequence of ``t`` tokens: (t + 1) / 2."""
    return (t + 1) / 2.0


def sequence_flops(arch: Arch, ad: Adapter, tokens: int, kept: int | None = None, train: bool = True,
                   checkpointing: bool = True, full_finetune: bool = False) -> dict[str, float]:
    """FLOPs of one causal sequence of ``tokens`` with logits on the last ``kept`` positions.

    Returns ``model`` (forward, plus backward when ``train``) and ``hardware`` (+ the recomputed
    forward of the layers under gradient checkpointing)."""
    kept = tokens if kept is None else min(kept, tokens)
    dense = arch.layers * (arch.layer_matmul_params() + ad.layer_lora_params(arch))
    head = arch.vocab * arch.hidden * kept
    attn = attention_flops(arch, causal_keys(tokens)) * tokens
    fwd = 2.0 * (dense * tokens + head) + attn
    if not train:
        return {"model": fwd, "hardware": fwd}
    act_grad = 2.0 * (dense * tokens + head) + 2.0 * attn
    w_grad = 2.0 * (dense if full_finetune else arch.layers * ad.layer_lora_params(arch)) * tokens
    model = fwd + act_grad + w_grad
    recompute = (2.0 * dense * tokens + attn) if checkpointing else 0.0
    return {"model": model, "hardware": model + recompute}


def generation_flops(arch: Arch, ad: Adapter, rows: int, prompt: int, new: int) -> float:
    """Prefill of ``prompt`` tokens and ``new`` decode steps, per row, times ``rows`` (KV cached; the
    LM head runs on the last prompt position and on every decode step)."""
    dense = arch.layers * (arch.layer_matmul_params() + ad.layer_lora_params(arch))
    prefill = 2.0 * dense * prompt + attention_flops(arch, causal_keys(prompt)) * prompt
    decode = sum(forward_flops_per_token(arch, ad, prompt + k + 1) for k in range(new))
    return rows * (prefill + 2.0 * arch.vocab * arch.hidden + decode)


def grpo_step_flops(arch: Arch, ad: Adapter, rows: int, prompt: int, new: int, num_iterations: int,
                    kl: bool, checkpointing: bool = True) -> dict[str, float]:
    """One u-GRPO step of ``rows`` rollouts: generation, pi_old log-probs (when mu > 1), reference
    log-probs (when beta != 0) and mu training passes; logits only over the generated span."""
    t = prompt + new
    gen = generation_flops(arch, ad, rows, prompt, new)
    fwd = sequence_flops(arch, ad, t, new, train=False)["model"] * rows
    train = sequence_flops(arch, ad, t, new, train=True, checkpointing=checkpointing)
    extra = fwd * ((num_iterations > 1) + kl)
    return {"generation": gen, "logprob_forwards": extra,
            "model": gen + extra + num_iterations * rows * train["model"],
            "hardware": gen + extra + num_iterations * rows * train["hardware"]}


def decode_seconds_lower_bound(arch: Arch, ad: Adapter, rows: int, prompt: int, new: int, hbm_tbps: float,
                               weight_bytes: int = 2, act_bytes: int = 2) -> float:
    """Decode is bandwidth-bound: every step reads all weights (+ the fp32 adapter) and the KV cache so
    far, so ``new`` steps take at least their bytes / HBM bandwidth (launch overheads not counted)."""
    weights = arch.base_params() * weight_bytes + ad.lora_params(arch) * 4
    kv = sum(kv_cache_bytes(arch, rows, prompt + k, act_bytes) for k in range(new))
    return (new * weights + kv) / (hbm_tbps * 1e12)


def mfu(flops: float, seconds: float, peak_tflops: float | None) -> float:
    """Model FLOPs utilisation: achieved model FLOP/s over the chip's bf16 peak (NaN when unknown)."""
    if not peak_tflops or seconds <= 0:
        return math.nan
    return flops / seconds / (peak_tflops * 1e12)


def peak_tflops_for(device_name: str) -> float | None:
    """The bf16 dense peak of a CUDA device name, e.g. 'NVIDIA H200' -> 989.4 (None when unknown)."""
    for key, v in PEAK_BF16_TFLOPS.items():
        if key in device_name.upper():
            return v
    return None


# ----------------------------------------------------------------------------------- memory
def activation_bytes_per_token_layer(arch: Arch, act_bytes: int = 2, lora_dropout: bool = True) -> int:
    """Bytes one token's activations hold in one layer between forward and backward (an estimate from
    the tensors each op of ``Qwen3DecoderLayer`` + peft LoRA saves; sdpa without an s^2 matrix):

    - 2 RMSNorms: their normalised output (+ an fp32 copy of the input when activations are bf16);
    - q/k head RMSNorms on q_dim + kv_dim, likewise; sdpa: q, k and v expanded to the query heads, out;
    - MLP: gate out, silu(gate), up out, their product (the down input);
    - LoRA with dropout: each wrapped module keeps its dropped-out input and the 1-byte mask.
    """
    h, q, kv, i = arch.hidden, arch.q_dim, arch.kv_dim, arch.intermediate
    fp32_copy = 4 if act_bytes < 4 else 0
    norms = 2 * h * (act_bytes + fp32_copy) + (q + kv) * (act_bytes + fp32_copy)
    attn = act_bytes * (3 * q + q)  # q, k, v (GQA repeated to q heads), output (= o_proj input)
    mlp = act_bytes * 4 * i
    lora = 0
    if lora_dropout:
        ins = [a for a, _ in arch.linears().values()]
        lora = sum(ins) * (act_bytes + 1)
    return norms + attn + mlp + lora


def training_memory(arch: Arch, ad: Adapter, tokens: int, kept: int, weight_bytes: int = 2, act_bytes: int = 2,
                    logit_bytes: int = 10, checkpointing: bool = True, decoder_params: int = 0,
                    decoder_trained: bool = True) -> dict[str, float]:
    """Bytes of one training step over ``tokens`` tokens (the batch) with logits on ``kept`` positions.

    ``logit_bytes`` per kept position and vocabulary entry: bf16 LM-head output (2) + fp32
    log-softmax saved for backward (4) + its fp32 gradient (4) = 10 under bf16-mixed; fp32: 4+4+4 = 12."""
    pc = param_counts(arch, ad)
    per_layer = activation_bytes_per_token_layer(arch, act_bytes)
    if checkpointing:  # each layer keeps its input; one layer's activations live during its recompute
        acts = tokens * (arch.layers * arch.hidden * act_bytes + per_layer)
    else:
        acts = tokens * arch.layers * per_layer
    out = {"weights": pc["base"] * weight_bytes, "adapter": pc["trainable"] * 4, "gradients": pc["trainable"] * 4,
           "adam": pc["trainable"] * 8, "activations": acts, "logits": kept * arch.vocab * logit_bytes,
           "decoder": decoder_params * (16 if decoder_trained else 4)}
    out["total"] = sum(out.values())
    return out


def kv_cache_bytes(arch: Arch, rows: int, tokens: int, act_bytes: int = 2) -> int:
    """K and V of every layer for ``rows`` sequences of ``tokens`` tokens."""
    return rows * tokens * arch.layers * 2 * arch.kv_dim * act_bytes


def grpo_memory(arch: Arch, ad: Adapter, rows: int, prompt: int, new: int, micro_batch: int,
                weight_bytes: int = 2, act_bytes: int = 2, decoder_params: int = 0) -> dict[str, float]:
    """Peak bytes of a u-GRPO step: the larger of the generation (weights + KV cache of every row) and
    a loss micro-batch (``training_memory`` of ``micro_batch`` rollouts, logits on the new tokens).
    The decoder serves the tool frozen on the CPU (rl.cli), so it is not on the GPU here."""
    train = training_memory(arch, ad, micro_batch * (prompt + new), micro_batch * new, weight_bytes, act_bytes)
    kv = kv_cache_bytes(arch, rows, prompt + new, act_bytes)
    gen_logits = rows * arch.vocab * 4 * 2  # fp32 logits + probabilities of one decode step
    fixed = train["weights"] + train["adapter"] + train["gradients"] + train["adam"]
    out = {**{k: train[k] for k in ("weights", "adapter", "gradients", "adam")}, "kv_cache": kv,
           "generation_logits": gen_logits, "loss_activations": train["activations"], "loss_logits": train["logits"],
           "decoder_cpu": decoder_params * 4}
    out["peak_generation"] = fixed + kv + gen_logits
    out["peak_loss"] = fixed + train["activations"] + train["logits"]
    out["peak"] = max(out["peak_generation"], out["peak_loss"])
    return out
