"""TSEncoder: shapes, block-causality, RoPE by patch time, the bias scalars, FiLM identity at init."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ts_encoder.config import TSEncoderConfig
from ts_encoder.model import TSEncoder

CFG = TSEncoderConfig(lookback=30, horizon=4, d_model=32, n_layers=2, n_heads=4, ffn_dim=64, d_llm=24)


def _model(cfg: TSEncoderConfig = CFG, seed: int = 0) -> TSEncoder:
    torch.manual_seed(seed)
    model = TSEncoder(cfg).eval()
    with torch.no_grad():  # random, non-trivial biases so the test does not pass by b = 0
        model.b_intra.fill_(0.3)
        model.b_inter.fill_(-0.2)
    return model


def test_shapes() -> None:
    model = _model()
    out = model(torch.randn(3, 5, 30))
    k = (30 // 5) * 5
    assert out.mu.shape == out.sigma.shape == (3, 3, 4)
    assert out.q_high.shape == out.q_low.shape == (3, 4)
    assert out.hidden.shape == (3, k, 32)
    assert out.h_ts.shape == (3, k, 24)
    assert out.state.shape == (3, 24)
    assert torch.all(out.sigma > 0)


def test_bad_shapes_raise() -> None:
    model = _model()
    with pytest.raises(ValueError, match=r"x must be \[B, 5, 30\]"):
        model(torch.randn(2, 5, 25))
    with pytest.raises(ValueError, match="cond_dim=0"):
        model(torch.randn(2, 5, 30), cond=torch.randn(2, 3))
    with pytest.raises(ValueError, match="multiple of patch_len"):
        TSEncoderConfig(lookback=33)


@pytest.mark.parametrize("tau", [0, 2, 4])
def test_block_causality(tau: int) -> None:
    """Changing any input day in a patch > τ leaves every token at patch time ≤ τ unchanged."""
    model = _model()
    x = torch.randn(2, 5, 30)
    x2 = x.clone()
    first_future_day = (tau + 1) * 5
    x2[:, :, first_future_day:] += torch.randn_like(x2[:, :, first_future_day:]) * 3
    a, b = model(x), model(x2)
    n_seen = (tau + 1) * 5  # tokens of patches 0..τ, all 5 variables
    torch.testing.assert_close(a.hidden[:, :n_seen], b.hidden[:, :n_seen], rtol=0, atol=1e-6)
    torch.testing.assert_close(a.h_ts[:, :n_seen], b.h_ts[:, :n_seen], rtol=0, atol=1e-6)
    # and the future does change later tokens (the test would be vacuous otherwise)
    assert (a.hidden[:, n_seen:] - b.hidden[:, n_seen:]).abs().max() > 1e-3


def test_same_patch_variables_see_each_other() -> None:
    """The mask is block-causal, not token-causal: the open token of patch τ sees the volume of patch τ."""
    model = _model()
    x = torch.randn(1, 5, 30)
    x2 = x.clone()
    x2[:, 4, 10:15] += 2.0  # volume, patch 2
    a, b = model(x), model(x2)
    open_tok_patch2 = 2 * 5 + 0
    assert (a.hidden[:, open_tok_patch2] - b.hidden[:, open_tok_patch2]).abs().max() > 1e-4
    torch.testing.assert_close(a.hidden[:, :10], b.hidden[:, :10], rtol=0, atol=1e-6)


def test_attention_matches_reference_formula() -> None:
    """One attention layer equals softmax(q̃k̃/√d + M + B) v computed by hand (App. B.1)."""
    model = _model()
    attn = model.blocks[0].attn
    k_tok, d, h = CFG.n_tokens, CFG.d_model, CFG.n_heads
    x = torch.randn(2, k_tok, d)
    q, k, v = attn.qkv(x).view(2, k_tok, 3, h, d // h).permute(2, 0, 3, 1, 4)
    q, k = attn.rope(q), attn.rope(k)
    t = torch.arange(k_tok) // 5
    var = torch.arange(k_tok) % 5
    mask = torch.where(t[None, :] <= t[:, None], 0.0, -math.inf)
    bias = torch.where(var[:, None] == var[None, :], 0.3, -0.2)
    logits = q @ k.transpose(-1, -2) / math.sqrt(d // h) + mask + bias
    ref = attn.out((logits.softmax(-1) @ v).transpose(1, 2).reshape(2, k_tok, d))
    torch.testing.assert_close(attn(x, model.attn_mask()), ref, rtol=1e-5, atol=1e-5)


def test_rope_angle_depends_on_patch_time_only() -> None:
    """Same q, k vectors: score depends on the patch-time offset, not on the variable or absolute time."""
    rope = _model().blocks[0].attn.rope
    hd = CFG.d_model // CFG.n_heads
    q, k = torch.randn(hd), torch.randn(hd)
    big_q = q.expand(1, 1, CFG.n_tokens, hd).contiguous()
    big_k = k.expand(1, 1, CFG.n_tokens, hd).contiguous()
    scores = rope(big_q)[0, 0] @ rope(big_k)[0, 0].T  # [K, K]
    # tokens of the same patch share the rotation: same score to every variable of a patch
    assert torch.allclose(scores[7], scores[5], atol=1e-5)  # patch 1, variables 2 and 0
    # relative: (patch 3 -> patch 1) equals (patch 4 -> patch 2)
    assert torch.allclose(scores[15, 5], scores[20, 10], atol=1e-5)
    assert not torch.allclose(scores[15, 5], scores[15, 10], atol=1e-3)


def test_b_inter_changes_outputs_and_gets_gradient() -> None:
    model = _model()
    x = torch.randn(2, 5, 30)
    before = model(x)
    with torch.no_grad():
        model.b_inter.fill_(1.5)
    after = model(x)
    assert (before.mu - after.mu).abs().max() > 1e-4
    assert (before.hidden - after.hidden).abs().max() > 1e-3
    model.train()
    out = model(x)
    (out.mu.sum() + out.sigma.sum() + out.hidden.pow(2).sum()).backward()
    assert model.b_intra.grad is not None and model.b_intra.grad.abs() > 0
    assert model.b_inter.grad is not None and model.b_inter.grad.abs() > 0
    # softmax is shift-invariant: only b_intra - b_inter matters, so the gradients are opposite
    torch.testing.assert_close(model.b_inter.grad, -model.b_intra.grad, rtol=1e-3, atol=1e-6)


def test_sdpa_mask_is_not_ignored() -> None:
    """Dropping M + B changes the layer output (guards against a refactor that loses the mask)."""
    model = _model()
    attn = model.blocks[0].attn
    x = torch.randn(1, CFG.n_tokens, CFG.d_model)
    with_mask = attn(x, model.attn_mask())
    no_mask = attn(x, torch.zeros_like(model.attn_mask()))
    assert (with_mask - no_mask).abs().max() > 1e-3


def test_film_identity_at_init_then_active() -> None:
    cfg = TSEncoderConfig(**{**CFG.to_dict(), "cond_dim": 6})
    model = _model(cfg)
    x = torch.randn(3, 5, 30)
    plain, c1, c2 = model(x), model(x, torch.randn(3, 6)), model(x, torch.randn(3, 6))
    for out in (c1, c2):
        torch.testing.assert_close(out.mu, plain.mu)
        torch.testing.assert_close(out.sigma, plain.sigma)
        torch.testing.assert_close(out.q_high, plain.q_high)
    with torch.no_grad():
        model.film.net[-1].weight.normal_(std=0.5)
    c1, c2 = model(x, torch.randn(3, 6)), model(x, torch.randn(3, 6))
    assert (c1.mu - c2.mu).abs().max() > 1e-4
    assert (c1.sigma - plain.sigma).abs().max() > 1e-4
    # cond acts on the heads' state only; the LLM tokens do not depend on it
    torch.testing.assert_close(c1.h_ts, plain.h_ts)
    with pytest.raises(ValueError, match="cond must be"):
        model(x, torch.randn(3, 5))


def test_input_stats_rescale_outputs() -> None:
    """Standardising inputs and rescaling outputs: stats (loc, c*scale) on c*x give c-scaled μ, σ."""
    model = _model()
    x = torch.randn(2, 5, 30) * 0.01
    loc, scale = torch.zeros(5), torch.full((5,), 0.01)
    model.set_input_stats(loc, scale)
    a = model(x)
    model.set_input_stats(loc, scale * 3)
    b = model(x * 3)
    torch.testing.assert_close(b.mu, a.mu * 3, rtol=1e-4, atol=1e-7)
    torch.testing.assert_close(b.sigma, a.sigma * 3, rtol=1e-4, atol=1e-7)
    assert F.mse_loss(b.q_high, a.q_high * 3) < 1e-10
    with pytest.raises(ValueError, match="positive"):
        model.set_input_stats(loc, torch.zeros(5))


def test_price_mu_scale_scales_open_close_means_only() -> None:
    base = _model()
    half = TSEncoder(TSEncoderConfig(**{**CFG.to_dict(), "price_mu_scale": 0.5})).eval()
    half.load_state_dict(base.state_dict())
    x = torch.randn(2, 5, 30)
    a, b = base(x), half(x)
    torch.testing.assert_close(b.mu[:, :2], a.mu[:, :2] * 0.5)  # x_loc = 0 here
    torch.testing.assert_close(b.mu[:, 2], a.mu[:, 2])
    torch.testing.assert_close(b.sigma, a.sigma)


# ------------------------------------------------------------------ scale_ref: window (default) | ewma
def test_ewma_std_by_hand_and_equal_to_the_ewma_baseline() -> None:
    """λ = 0.5, days 1, 2, 3: v0 = mean r² = 14/3, then v = .5 v + .5 r² for r = 1, 2, 3 -> 6.208333."""
    from stockr1.baselines.ewma import ewma_variance
    from ts_encoder.model import ewma_std

    x = torch.tensor([[[1.0, 2.0, 3.0]]], dtype=torch.float64)
    zero = torch.zeros(1, dtype=torch.float64)
    assert ewma_std(x, zero, 0.5, zero).item() == pytest.approx(math.sqrt(6.2083333333), rel=1e-9)
    # around loc = 1: r = 0, 1, 2 -> v0 = 5/3 -> 0.833333 -> 0.916667 -> 2.458333; the floor adds in quadrature
    one = torch.ones(1, dtype=torch.float64)
    assert ewma_std(x, one, 0.5, torch.full((1,), 0.1, dtype=torch.float64)).item() == \
        pytest.approx(math.sqrt(2.4583333333 + 0.01), rel=1e-9)
    r = torch.randn(4, 1, 90, dtype=torch.float64) * 0.01  # the RiskMetrics baseline's recursion (loc = 0)
    np.testing.assert_allclose(ewma_std(r, zero, 0.94, zero)[:, 0].pow(2).numpy(),
                               ewma_variance(r[:, 0].numpy(), 0.94), rtol=1e-12)


def _spread_model(scale_ref: str) -> TSEncoder:
    """σ's head weights zeroed: σ = s · (softplus(bias) + min_sigma) = s · 1.001, s the reference scale."""
    m = _model(TSEncoderConfig(**{**CFG.to_dict(), "scale_ref": scale_ref}))
    with torch.no_grad():
        m.head_sigma.weight.zero_()
    return m


def test_sigma_is_in_units_of_the_ewma_std_when_scale_ref_is_ewma() -> None:
    from stockr1.types import CLOSE
    from ts_encoder.model import ewma_std

    x = torch.randn(3, 5, 30) * 0.01
    x[:, :, -5:] *= 4  # a volatile last week: EWMA reacts, the equal-weight window much less
    floor = 1e-3 * torch.ones(5)
    win = _spread_model("window")(x).sigma[:, 1, 0]
    ewm = _spread_model("ewma")(x).sigma[:, 1, 0]
    torch.testing.assert_close(win, x[:, CLOSE].var(-1, unbiased=False).add(1e-6).sqrt() * 1.001)
    torch.testing.assert_close(ewm, ewma_std(x, torch.zeros(5), 0.94, floor)[:, CLOSE] * 1.001)
    assert torch.all(ewm > 1.15 * win)


def test_window_default_has_no_new_weights_and_ewma_adds_the_ratio_input() -> None:
    assert TSEncoderConfig().scale_ref == "window"
    assert not any("ratio_embed" in k for k in _model().state_dict())
    ewm = _model(TSEncoderConfig(**{**CFG.to_dict(), "scale_ref": "ewma"}))
    assert {"ratio_embed.weight", "ratio_embed.bias"} <= set(ewm.state_dict())
    with pytest.raises(ValueError, match="scale_ref"):
        TSEncoderConfig(scale_ref="garch")
    with pytest.raises(ValueError, match="ewma_lambda"):
        TSEncoderConfig(ewma_lambda=1.0)


def test_ewma_encoder_is_causal_in_the_price_series() -> None:
    """Windows built from a price series, the series perturbed after day t: every output of decision days
    <= t is unchanged (the EWMA reads the window only), and later ones move (the test is not vacuous)."""
    from stockr1.data import build_windows, load_source
    from stockr1.data.quality import check_frames
    from stockr1.data.splits import SplitSpec

    frames, _ = check_frames(load_source("synthetic", n_tickers=1, n_days=160, seed=3))
    name, frame = next(iter(frames.items()))
    split = SplitSpec(val_start="2100-01-01", test_start="2100-01-02")
    t = frame.index[100]
    moved = frame.copy()
    moved.loc[moved.index > t, ["open", "high", "low", "close"]] *= np.exp(
        np.random.default_rng(0).normal(0, 0.05, (int((moved.index > t).sum()), 1)))
    moved.loc[moved.index > t, "volume"] *= 3.0
    a = build_windows({name: frame}, lookback=30, horizon=4, split=split)
    b = build_windows({name: moved}, lookback=30, horizon=4, split=split)
    model = _model(TSEncoderConfig(**{**CFG.to_dict(), "scale_ref": "ewma"}))
    with torch.no_grad():
        model.ratio_embed.weight.normal_(0, 0.5)  # zero-initialised: make the EWMA ratio reach the heads
    oa, ob = model(torch.as_tensor(a.x)), model(torch.as_tensor(b.x))
    past = torch.as_tensor(a.date <= np.datetime64(t))
    assert past.any() and (~past).any()
    for k in ("mu", "sigma", "q_high", "q_low", "state"):
        torch.testing.assert_close(getattr(oa, k)[past], getattr(ob, k)[past], rtol=0, atol=0)
    assert (oa.sigma[~past] - ob.sigma[~past]).abs().max() > 1e-4
