"""rl.grpo: advantages, uncertainty weight, clipped loss and KL against hand-computed values."""

import math

import pytest
import torch

from rl.grpo import (
    ADV_EPS,
    GRPOLossConfig,
    UncertaintyWeightConfig,
    group_advantages,
    group_spread,
    grpo_loss,
    kl_k3,
    uncertainty_weight,
)


def test_group_advantages_hand_computed() -> None:
    r = torch.tensor([1.0, 0.0, 0.0, 1.0, 2.0, 2.0, 2.0, 2.0])
    adv = group_advantages(r, group_size=4)
    std = math.sqrt(1.0 / 3.0)  # unbiased std of (1, 0, 0, 1)
    a = 0.5 / (std + ADV_EPS)
    assert torch.allclose(adv, torch.tensor([a, -a, -a, a, 0, 0, 0, 0]), atol=1e-6)
    assert torch.equal(adv[4:], torch.zeros(4))  # zero-spread group: exactly 0
    assert torch.allclose(group_spread(r, 4), torch.tensor([std, 0.0]), atol=1e-6)


def test_group_advantages_roundoff_group_is_exactly_zero_and_nan_excluded() -> None:
    r = torch.tensor([0.1, 0.1, 0.1, 1.0, float("nan"), 3.0], dtype=torch.float64)
    adv = group_advantages(r, group_size=3)
    assert torch.equal(adv[:3], torch.zeros(3, dtype=torch.float64))
    s = math.sqrt(2.0)  # unbiased std of (1, 3)
    assert torch.allclose(adv[3:], torch.tensor([-1 / (s + ADV_EPS), 0.0, 1 / (s + ADV_EPS)], dtype=torch.float64))


def test_group_advantages_rejects_bad_shape() -> None:
    with pytest.raises(ValueError, match="G=4"):
        group_advantages(torch.zeros(6), group_size=4)


@pytest.mark.parametrize(
    ("u", "w"),
    [
        (0.0, 1.0),
        (0.2499, 1.0),
        (0.25, 1.0),  # at u0: still 1
        (0.2501, math.exp(-math.log(2) * 0.0001 / 0.25)),  # just above u0: continuous, slightly < 1
        (0.4999, 0.5 ** (0.2499 / 0.25)),
        (0.50, 0.5),  # at u_hi: w_hi
        (0.5001, 0.5 ** (0.2501 / 0.25)),
        (0.75, 0.25),
        (1.0, 0.125),  # at u_cap: the floor
        (3.0, 0.125),  # above u_cap: capped
    ],
)
def test_uncertainty_weight_at_and_around_thresholds(u: float, w: float) -> None:
    got = uncertainty_weight(torch.tensor([u], dtype=torch.float64))
    assert got.item() == pytest.approx(w, rel=1e-9, abs=1e-12)


def test_uncertainty_weight_options() -> None:
    cfg = UncertaintyWeightConfig()
    assert cfg.decay == pytest.approx(math.log(2)) and cfg.floor == pytest.approx(0.125)
    explicit = UncertaintyWeightConfig(alpha=1.0)
    assert uncertainty_weight(torch.tensor([0.5]), explicit).item() == pytest.approx(math.exp(-1.0))
    assert uncertainty_weight(torch.tensor([0.9, float("nan")]), UncertaintyWeightConfig(enabled=False)).tolist() == [1.0, 1.0]
    assert uncertainty_weight(torch.tensor([float("nan")])).item() == 1.0
    w = uncertainty_weight(torch.linspace(0, 2, 201))
    assert bool((w[1:] <= w[:-1]).all())  # non-increasing in U
    with pytest.raises(ValueError, match="u0 < u_hi"):
        UncertaintyWeightConfig(u0=0.5, u_hi=0.25)


def test_kl_k3_hand_computed() -> None:
    kl = kl_k3(torch.tensor([math.log(0.5)]), torch.tensor([math.log(0.25)]))
    assert kl.item() == pytest.approx(0.5 + math.log(2) - 1)
    assert kl_k3(torch.tensor([-1.3]), torch.tensor([-1.3])).item() == 0.0


def _hand_batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    old = torch.tensor([[-1.0, -2.0, -0.5], [-1.0, -2.0, -0.5]])
    ratio = torch.tensor([[1.5, 0.5, 1.0], [1.5, 0.5, 1.0]])
    logp = (old + ratio.log()).requires_grad_(True)
    adv = torch.tensor([1.0, -1.0])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    return logp, old, adv, mask


def test_clipped_loss_hand_computed() -> None:
    logp, old, adv, mask = _hand_batch()
    out = grpo_loss(logp, adv, mask, old_logp=old)
    # row 0 (A=+1): -min(1.5, 1.2) = -1.2, -min(0.5, 0.8) = -0.5, third token masked -> -0.85
    # row 1 (A=-1): -min(-1.5, -1.2) = 1.5, -min(-0.5, -0.8) = 0.8, -min(-1, -1) = 1 -> 1.1
    assert out.loss.item() == pytest.approx((-0.85 + 1.1) / 2, abs=1e-6)
    assert out.clip_high.item() == pytest.approx(1 / 5) and out.clip_low.item() == pytest.approx(1 / 5)
    weighted = grpo_loss(logp, adv, mask, old_logp=old, weights=torch.tensor([1.0, 0.5]))
    assert weighted.loss.item() == pytest.approx((-0.85 + 0.55) / 2, abs=1e-6)


def test_masked_tokens_get_no_gradient_and_on_policy_gradient_is_minus_weighted_advantage() -> None:
    torch.manual_seed(0)
    logp = (-torch.rand(2, 4) * 3).requires_grad_(True)
    adv = torch.tensor([0.7, -1.3])
    mask = torch.tensor([[1, 0, 1, 0], [1, 1, 1, 0]])  # zeros = tool observation / padding
    w = torch.tensor([1.0, 0.25])
    grpo_loss(logp, adv, mask, weights=w).loss.backward()
    expected = -(adv * w / mask.sum(1)).unsqueeze(1) * mask / 2  # d/dlogp of -r*A at r=1, N=2
    assert torch.allclose(logp.grad, expected, atol=1e-7)
    assert torch.equal(logp.grad[mask == 0], torch.zeros(int((mask == 0).sum())))


def _naive_grpo(logp, old, ref, adv, mask, eps, beta):
    """Eq. 1 of App. B.3, token by token."""
    total = 0.0
    for i in range(logp.shape[0]):
        terms = []
        for t in range(logp.shape[1]):
            if mask[i, t]:
                r = torch.exp(logp[i, t] - old[i, t])
                surr = torch.min(r * adv[i], torch.clamp(r, 1 - eps, 1 + eps) * adv[i])
                d = ref[i, t] - logp[i, t]
                terms.append(-(surr - beta * (torch.exp(d) - d - 1)))
        total = total + torch.stack(terms).mean()
    return total / logp.shape[0]


def test_unit_weights_reduce_to_plain_grpo_with_kl() -> None:
    torch.manual_seed(1)
    n, t = 6, 5
    old = -torch.rand(n, t) * 2
    ref = -torch.rand(n, t) * 2
    logp = (old + 0.3 * torch.randn(n, t)).requires_grad_(True)
    adv = group_advantages(torch.randn(n), group_size=3)
    mask = (torch.rand(n, t) > 0.3).long()
    mask[:, 0] = 1
    cfg = GRPOLossConfig(beta=0.04, kl_ratio_correction=False)  # Eq. 1 as written
    ours = grpo_loss(logp, adv, mask, old_logp=old, ref_logp=ref, weights=torch.ones(n), cfg=cfg)
    (g_ours,) = torch.autograd.grad(ours.loss, logp)
    naive = _naive_grpo(logp, old, ref, adv, mask, eps=0.2, beta=0.04)
    (g_naive,) = torch.autograd.grad(naive, logp)
    assert ours.loss.item() == pytest.approx(naive.item(), abs=1e-6)
    assert torch.allclose(g_ours, g_naive, atol=1e-7)
    unweighted = grpo_loss(logp, adv, mask, old_logp=old, ref_logp=ref, cfg=cfg)
    assert unweighted.loss.item() == ours.loss.item()
    assert ours.kl.item() > 0


def test_beta_without_reference_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="ref_logp"):
        grpo_loss(torch.zeros(1, 2), torch.zeros(1), torch.ones(1, 2), cfg=GRPOLossConfig(beta=0.1))
