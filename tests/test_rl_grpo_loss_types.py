"""``GRPOLossConfig.loss_type``: the three reductions by hand, and chunked calls summing to the whole batch.

Equality with TRL's own ``compute_loss`` for each type is in ``tests/test_rl_trl_equivalence.py``.
"""

import pytest
import torch

from rl.grpo import LOSS_TYPES, GRPOLossConfig, group_advantages, grpo_loss

L_MAX = 9


def _batch(seed: int = 0):
    """6 rollouts (3 queries x 2), off-policy, uneven lengths, a tool gap, non-unit weights, float64."""
    g = torch.Generator().manual_seed(seed)
    n, t = 6, 7
    old = -torch.rand(n, t, generator=g, dtype=torch.float64) * 2
    ref = -torch.rand(n, t, generator=g, dtype=torch.float64) * 2
    logp = (old + 0.3 * torch.randn(n, t, generator=g, dtype=torch.float64)).requires_grad_(True)
    adv = group_advantages(torch.randn(n, generator=g, dtype=torch.float64), group_size=2)
    mask = torch.ones(n, t, dtype=torch.long)
    mask[1, 3:] = 0  # short completion
    mask[2, 1:3] = 0  # tool observation
    mask[4, 5:] = 0
    w = torch.tensor([1.0, 1.0, 0.5, 0.5, 0.125, 0.125], dtype=torch.float64)
    return logp, old, ref, adv, mask, w


def _cfg(loss_type: str) -> GRPOLossConfig:
    return GRPOLossConfig(beta=0.04, loss_type=loss_type, max_completion_length=L_MAX)


def _naive(logp, old, ref, adv, mask, w, cfg: GRPOLossConfig):
    """Token by token: l_it = w_i (-min(r A, clip(r) A) + beta * r * k3), then each type's reduction."""
    n, t = logp.shape
    seq_sums, seq_means = [], []
    for i in range(n):
        terms = []
        for j in range(t):
            if mask[i, j]:
                r = torch.exp(logp[i, j] - old[i, j])
                surr = torch.min(r * adv[i], torch.clamp(r, 1 - cfg.epsilon_low, 1 + cfg.epsilon_high) * adv[i])
                d = ref[i, j] - logp[i, j]
                terms.append(w[i] * (-surr + cfg.beta * r * (torch.exp(d) - d - 1)))
        seq_sums.append(torch.stack(terms).sum())
        seq_means.append(torch.stack(terms).mean())
    if cfg.loss_type == "grpo":
        return torch.stack(seq_means).sum() / n
    if cfg.loss_type == "dapo":
        return torch.stack(seq_sums).sum() / mask.sum()
    return torch.stack(seq_sums).sum() / (n * cfg.max_completion_length)


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_each_loss_type_matches_its_formula_token_by_token(loss_type: str) -> None:
    logp, old, ref, adv, mask, w = _batch()
    cfg = _cfg(loss_type)
    ours = grpo_loss(logp, adv, mask, old_logp=old, ref_logp=ref, weights=w, cfg=cfg, kl_weights=w)
    (g_ours,) = torch.autograd.grad(ours.loss, logp)
    naive = _naive(logp, old, ref, adv, mask, w, cfg)
    (g_naive,) = torch.autograd.grad(naive, logp)
    assert ours.loss.item() == pytest.approx(naive.item(), rel=1e-12, abs=1e-14)
    assert torch.allclose(g_ours, g_naive, rtol=1e-10, atol=1e-14)
    # per_sequence is the weighted per-sequence token mean whatever the type
    means = grpo_loss(logp, adv, mask, old_logp=old, ref_logp=ref, weights=w, cfg=_cfg("grpo"), kl_weights=w).per_sequence
    assert torch.allclose(ours.per_sequence, means)


def test_loss_types_differ_on_uneven_lengths() -> None:
    logp, old, ref, adv, mask, w = _batch()
    losses = {lt: grpo_loss(logp, adv, mask, old, ref, w, _cfg(lt)).loss.item() for lt in LOSS_TYPES}
    assert len({round(v, 10) for v in losses.values()}) == 3, losses
    # dr_grpo is dapo rescaled by tokens / (N * L_max)
    assert losses["dr_grpo"] == pytest.approx(losses["dapo"] * float(mask.sum()) / (6 * L_MAX), rel=1e-12)


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
@pytest.mark.parametrize("sizes", [(6,), (2, 2, 2), (4, 1, 1), (1, 3, 2)], ids=lambda s: "-".join(map(str, s)))
def test_chunk_losses_sum_to_the_whole_batch_loss(loss_type: str, sizes: tuple[int, ...]) -> None:
    logp, old, ref, adv, mask, w = _batch(seed=3)
    cfg = _cfg(loss_type)
    whole = grpo_loss(logp, adv, mask, old_logp=old, ref_logp=ref, weights=w, cfg=cfg)
    (g_whole,) = torch.autograd.grad(whole.loss, logp)

    n, n_tok = logp.shape[0], float(mask.sum())
    total, start = 0.0, 0
    for k, size in enumerate(sizes):
        sl = slice(start, start + size)
        start += size
        # the token total both as a python float and as a tensor, as a trainer may pass either
        tok = n_tok if k % 2 == 0 else mask.sum()
        out = grpo_loss(logp[sl], adv[sl], mask[sl], old_logp=old[sl], ref_logp=ref[sl], weights=w[sl], cfg=cfg,
                        batch_sequences=n, batch_tokens=tok)
        total = total + out.loss
    assert start == n
    (g_chunks,) = torch.autograd.grad(total, logp)
    assert total.item() == pytest.approx(whole.loss.item(), rel=1e-12, abs=1e-14)
    assert torch.allclose(g_chunks, g_whole, rtol=1e-10, atol=1e-14)


def test_default_batch_totals_are_the_chunk() -> None:
    logp, old, ref, adv, mask, w = _batch()
    for lt in LOSS_TYPES:
        cfg = _cfg(lt)
        default = grpo_loss(logp, adv, mask, old, ref, w, cfg).loss
        explicit = grpo_loss(logp, adv, mask, old, ref, w, cfg, batch_sequences=6, batch_tokens=float(mask.sum())).loss
        assert default.item() == pytest.approx(explicit.item(), rel=1e-12), lt


def test_bad_loss_type_names_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="grpo, dapo, dr_grpo"):
        GRPOLossConfig(loss_type="bnpo")


def test_dr_grpo_needs_max_completion_length() -> None:
    cfg = GRPOLossConfig(loss_type="dr_grpo")  # allowed to build (it may be filled in later) ...
    with pytest.raises(ValueError, match="max_completion_length"):  # ... but not to use
        grpo_loss(torch.zeros(1, 2), torch.zeros(1), torch.ones(1, 2), cfg=cfg)
    with pytest.raises(ValueError, match="max_completion_length"):
        GRPOLossConfig(loss_type="dr_grpo", max_completion_length=0)
