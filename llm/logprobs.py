"""Per-token log-probabilities and entropies of a sequence under the policy: the one function SFT
and GRPO both call, so the loss sees exactly the distribution the rollout engine sampled from.

Alignment: ``out[:, t]`` scores ``input_ids[:, t]`` given ``input_ids[:, :t]``; a row's first real
token (position 0, or the first after left padding) scores 0.
So the result lines up with ``Rollout.gen_mask`` / padded masks position by position and a loss is
``-(logprobs * gen_mask).sum() / gen_mask.sum()``.

``temperature`` and ``banned_token_ids`` reproduce the engine's sampling distribution (logits /
T, banned ids at -inf), which GRPO's importance ratio needs; SFT leaves them at the defaults.

``logits_to_keep=k`` (HF's name and convention, 0 = all): only the last ``k`` positions are scored and
the LM head runs on the last ``k + 1`` hidden states only, so the ``[B, T, V]`` logits (V = 152k for
Qwen, 2.4 GB in fp32 per 4k-token row) are never built for the prompt. Positions before ``T - k`` are
0, as masked positions already are; the kept positions are computed exactly as without ``k``.
`keep_for_mask(loss_mask)` gives the smallest ``k`` that covers every position a loss uses.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def pad_sequences(
    seqs: Sequence[Sequence[int]],
    pad_id: int,
    masks: Sequence[Sequence[int]] | None = None,
    side: str = "right",
    mask_dtype: torch.dtype = torch.long,
) -> tuple[Tensor, Tensor, Tensor | None]:
    """Pad token lists to ``input_ids [B, T]``, ``attention_mask [B, T]`` and (if given) ``masks [B, T]``
    of ``mask_dtype`` (SFT passes float32 loss weights)."""
    if side not in ("left", "right"):
        raise ValueError(f"side must be 'left' or 'right', got {side!r}")
    t = max((len(s) for s in seqs), default=0)
    ids = torch.full((len(seqs), t), pad_id, dtype=torch.long)
    att = torch.zeros((len(seqs), t), dtype=torch.long)
    out_mask = torch.zeros((len(seqs), t), dtype=mask_dtype) if masks is not None else None
    for i, s in enumerate(seqs):
        sl = slice(t - len(s), t) if side == "left" else slice(0, len(s))
        ids[i, sl] = torch.as_tensor(list(s), dtype=torch.long)
        att[i, sl] = 1
        if masks is not None:
            if len(masks[i]) != len(s):
                raise ValueError(f"row {i}: mask length {len(masks[i])} != sequence length {len(s)}")
            out_mask[i, sl] = torch.as_tensor(list(masks[i]), dtype=mask_dtype)
    return ids, att, out_mask


def keep_for_mask(mask: Tensor) -> int:
    """mask [B, T] -> the smallest ``k`` whose last-``k`` window holds every nonzero entry (1 if none)."""
    cols = mask.bool().any(0).nonzero()
    return int(mask.shape[1] - cols[0, 0]) if len(cols) else 1


def _logits(policy, input_ids: Tensor, attention_mask: Tensor, ts_tokens: Tensor | None,
            temperature: float, banned_token_ids: Sequence[int] | None, logits_to_keep: int) -> Tensor:
    """[B, n, V] float32 logits predicting input_ids[:, T-n:]; n = T-1, or logits_to_keep when 0 < it < T-1."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 for log-probs, got {temperature}")
    if logits_to_keep < 0:
        raise ValueError(f"logits_to_keep must be >= 0 (0 = all positions), got {logits_to_keep}")
    if 0 < logits_to_keep < input_ids.shape[1] - 1:  # hidden state t-1 predicts token t: one more row
        out = policy(input_ids, attention_mask, ts_tokens, logits_to_keep=logits_to_keep + 1)
    else:
        out = policy(input_ids, attention_mask, ts_tokens)
    logits = out.logits[:, :-1].float()
    if temperature != 1.0:
        logits = logits / temperature
    if banned_token_ids:
        logits[..., list(banned_token_ids)] = float("-inf")
    return logits


def _per_row(logits: Tensor, targets: Tensor, entropy: bool) -> tuple[Tensor, Tensor | None]:
    """Row by row so only one [T, V] log-softmax is alive at a time (V is 152k for Qwen)."""
    lps, ents = [], []
    for lg, tg in zip(logits, targets, strict=True):
        logp = torch.log_softmax(lg, dim=-1)
        lps.append(logp.gather(-1, tg.unsqueeze(-1)).squeeze(-1))
        if entropy:
            p = logp.exp()
            ents.append(-(p * logp.masked_fill(p == 0, 0.0)).sum(-1))
    return torch.stack(lps), (torch.stack(ents) if entropy else None)


def _finish(x: Tensor, attention_mask: Tensor) -> Tensor:
    """x [B, n] scores the last n tokens -> [B, T]; zero unscored positions (position 0, or before
    ``T - n``), padding, and banned (tool-only, -inf) targets.

    Banned tokens only ever come from the tool, so gen_mask is 0 there; zeroing them keeps a
    masked loss finite (-inf * 0 would be NaN).
    """
    x = torch.cat([x.new_zeros(x.shape[0], attention_mask.shape[1] - x.shape[1]), x], dim=1)
    m = attention_mask.bool()
    has_context = torch.cat([torch.zeros_like(m[:, :1]), m[:, :-1]], dim=1)  # first real token has none
    return torch.where(m & has_context & torch.isfinite(x), x, torch.zeros_like(x))


def token_logprobs(
    policy,
    input_ids: Tensor,
    attention_mask: Tensor,
    ts_tokens: Tensor | None = None,
    *,
    temperature: float = 1.0,
    banned_token_ids: Sequence[int] | None = None,
    logits_to_keep: int = 0,
) -> Tensor:
    """input_ids [B, T], attention_mask [B, T], ts_tokens [B, K, d_ts] -> log p(token_t | <t) [B, T].

    Each row's first real token, padded positions, banned-token positions and (with
    ``logits_to_keep=k > 0``) positions before ``T - k`` are 0.
    """
    logits = _logits(policy, input_ids, attention_mask, ts_tokens, temperature, banned_token_ids, logits_to_keep)
    lp, _ = _per_row(logits, input_ids[:, input_ids.shape[1] - logits.shape[1]:], entropy=False)
    return _finish(lp, attention_mask)


def token_logprobs_and_entropy(
    policy,
    input_ids: Tensor,
    attention_mask: Tensor,
    ts_tokens: Tensor | None = None,
    *,
    temperature: float = 1.0,
    banned_token_ids: Sequence[int] | None = None,
    logits_to_keep: int = 0,
) -> tuple[Tensor, Tensor]:
    """As `token_logprobs`, plus the entropy [B, T] of the distribution that produced token t."""
    logits = _logits(policy, input_ids, attention_mask, ts_tokens, temperature, banned_token_ids, logits_to_keep)
    lp, ent = _per_row(logits, input_ids[:, input_ids.shape[1] - logits.shape[1]:], entropy=True)
    return _finish(lp, attention_mask), _finish(ent, attention_mask)


def next_token_logprobs(policy, input_ids: Tensor, ts_tokens: Tensor | None = None) -> Tensor:
    """input_ids [B, T] (unpadded rows), ts_tokens [B, K, d_ts] -> [B, V] float32 log p(next token | the row),
    at temperature 1, from one forward that keeps only the last position's logits."""
    out = policy(input_ids, torch.ones_like(input_ids), ts_tokens, logits_to_keep=1)
    return torch.log_softmax(out.logits[:, -1].float(), dim=-1)


def masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    """Mean of x over mask == 1, or the mask-weighted mean for float weights (0 when the mask is empty)."""
    mask = mask.to(x.dtype)
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def logprob_gap(a: Tensor, b: Tensor, mask: Tensor) -> dict[str, float]:
    """How far two scorings of the same tokens sit apart (a policy in two precisions; a sampler's draws
    against the policy). a, b [N, T] per-token log-probs; mask [N, T] the tokens to compare (generated ones).
    Returns the per-token |a − b| (``token_mean``, ``token_p99``, ``token_max``, over ``tokens``) and the
    per-row |Σ a − Σ b| (``row_sum_mean``, ``row_sum_max``: signed within a row, so opposite gaps cancel)."""
    if a.shape != b.shape or a.shape != mask.shape:
        raise ValueError(f"logprob_gap: shapes {tuple(a.shape)}, {tuple(b.shape)} and mask {tuple(mask.shape)} differ")
    m = mask.bool()
    if not bool(m.any()):
        raise ValueError("logprob_gap: the mask selects no token")
    diff = (a.double() - b.double()) * m
    tok = diff.abs()[m]
    rows = diff.sum(1).abs()[m.any(1)]
    return {"tokens": int(m.sum()), "token_mean": float(tok.mean()), "token_p99": float(torch.quantile(tok, 0.99)),
            "token_max": float(tok.max()), "row_sum_mean": float(rows.mean()), "row_sum_max": float(rows.max())}
