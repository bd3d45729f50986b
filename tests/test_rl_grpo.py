"""rl.grpo: advantages, uncertainty weight, clipped loss and KL against hand-computed values."""

import math

import pytest
import torch

from rl.grpo import (
    ADV_EPS,
    GRPOLossConfig,
    UncertaintyWeightConfig,
    advantage_noise,
    group_advantages,
    group_spread,
    grpo_loss,
    kl_k3,
    normalised_weights,
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


def test_normalised_weights_have_mean_one_over_the_global_batch() -> None:
    w = uncertainty_weight(torch.tensor([0.7, 0.7, 0.7]))
    assert torch.equal(normalised_weights(w), torch.ones(3, dtype=torch.float64))  # a shared U: exactly 1
    got = normalised_weights(torch.tensor([1.0, 0.5]))
    assert torch.allclose(got, torch.tensor([4 / 3, 2 / 3], dtype=torch.float64)) and got.mean() == 1.0
    # on one rank of two: the mean is the global batch's (1.0, 0.5 here; 0.25, 0.25 on the other rank)
    assert torch.allclose(normalised_weights(torch.tensor([1.0, 0.5]), total=2.0, count=4),
                          torch.tensor([2.0, 1.0], dtype=torch.float64))
    with pytest.raises(ValueError, match="positive mean"):
        normalised_weights(torch.zeros(2))


def test_the_kl_term_is_not_weighted_unless_asked() -> None:
    torch.manual_seed(3)
    logp = (-torch.rand(2, 3)).requires_grad_(True)
    ref = logp.detach() - 0.3
    mask, zero_adv, w = torch.ones(2, 3), torch.zeros(2), torch.tensor([0.5, 0.5])
    cfg = GRPOLossConfig(beta=0.1)
    plain = grpo_loss(logp, zero_adv, mask, ref_logp=ref, cfg=cfg).loss  # advantage 0: only the KL is left
    assert grpo_loss(logp, zero_adv, mask, ref_logp=ref, weights=w, cfg=cfg).loss.item() == pytest.approx(plain.item())
    both = grpo_loss(logp, zero_adv, mask, ref_logp=ref, weights=w, cfg=cfg, kl_weights=w).loss
    assert both.item() == pytest.approx(0.5 * plain.item())


def test_differing_u_moves_gradient_share_to_the_calm_query() -> None:
    """Two queries (G = 2) on a log-linear toy policy, logp = x . theta: query 0 calm (U = 0.1, w = 1), query 1
    volatile (U = 0.9, w = 2^-2.6 = 0.165). Normalised (1.717 and 0.283), the calm query's part of the step's
    gradient grows by the factor w0 / w1 = 6.06 in odds, and AdamW's first update turns towards the calm query's own gradient. A
    factor shared by the batch changes nothing: Adam's update is invariant to it (why w is normalised)."""
    torch.manual_seed(0)
    x = torch.randn(4, 5, 6)  # [N rollouts, T tokens, d]
    adv = torch.tensor([1.0, -1.0, 1.0, -1.0])
    mask = torch.ones(4, 5)
    w = normalised_weights(uncertainty_weight(torch.tensor([0.1, 0.9]))).float().repeat_interleave(2)

    def grads(weights, rows=slice(None)):
        theta = torch.zeros(6, requires_grad=True)
        logp = torch.einsum("ntd,d->nt", x, theta) - 1.0
        out = grpo_loss(logp[rows], adv[rows], mask[rows], weights=None if weights is None else weights[rows],
                        batch_sequences=4)
        (g,) = torch.autograd.grad(out.loss, theta)
        return g

    def share(weights):
        g0, g1 = grads(weights, slice(0, 2)).norm(), grads(weights, slice(2, 4)).norm()
        return float(g0 / (g0 + g1))

    plain_share, u_share = share(None), share(w)
    assert u_share > plain_share
    assert u_share / (1 - u_share) == pytest.approx(w[0] / w[2] * plain_share / (1 - plain_share), rel=1e-5)

    def adam_update(weights, scale=1.0):
        theta = torch.zeros(6, requires_grad=True)
        opt = torch.optim.AdamW([theta], lr=0.1, weight_decay=0.0)
        logp = torch.einsum("ntd,d->nt", x, theta) - 1.0
        (scale * grpo_loss(logp, adv, mask, weights=weights).loss).backward()
        opt.step()
        return theta.detach()

    calm = -grads(None, slice(0, 2))  # the calm query's own descent direction
    cos = torch.nn.functional.cosine_similarity
    assert cos(adam_update(w), calm, dim=0) > cos(adam_update(None), calm, dim=0)
    # Adam undoes a factor shared by the whole batch: an all-volatile step is not a smaller step
    assert torch.allclose(adam_update(None, scale=0.2), adam_update(None), atol=1e-6)


def test_advantage_noise_falls_with_the_group_size_and_ignores_groups_without_signal() -> None:
    """A rollout's advantage redrawn against resampled group mates: with G = 4 the baseline is loose, with
    G = 32 it is pinned down; zero-spread groups carry no advantage to be noisy about."""
    half = [0.0, 1.0]
    small = advantage_noise(torch.tensor(half * 2 * 8), 4, seed=0)  # 8 groups of [0, 1, 0, 1]
    large = advantage_noise(torch.tensor(half * 16 * 8), 32, seed=0)
    assert 0 < large["std"] < small["std"] and 0 <= large["sign_flip"] <= small["sign_flip"] <= 1
    none = advantage_noise(torch.ones(16), 4)
    assert math.isnan(none["std"]) and math.isnan(none["sign_flip"])
