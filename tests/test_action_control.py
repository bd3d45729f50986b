"""The control loss (forecast_action/control.py) and the decoder loss that carries it (decoder_loss.py)."""

import math

import numpy as np
import pytest
import torch

from forecast_action.control import CONTROLLED, control_loss, counterfactual_actions, path_stats
from forecast_action.decoder import ActionConditionedDecoder
from forecast_action.decoder_loss import DecoderLoss, DecoderRecipe
from forecast_action.derive import QUANTILE_FEATURES, ActionThresholds, actions_from_windows, path_features
from forecast_action.encoder import CODE_FIELDS, ActionEncoderConfig, drop_fields, featurize
from forecast_action.schema import FIELD_SPECS, ForecastAction
from stockr1.data import synthetic_windows
from stockr1.types import train_only
from ts_encoder.config import TSEncoderConfig
from ts_encoder.loss import ts_loss

TH = ActionThresholds(cuts={f: (0.0, 1.0) for f in QUANTILE_FEATURES} | {"volatility": (0.004, 0.006)}, flat_pct=0.5)


def _logsig(z: float) -> float:
    return -math.log1p(math.exp(-z))


def test_path_stats_are_gs_statistics() -> None:
    g = torch.Generator().manual_seed(0)
    mu = 0.01 * torch.randn(3, 10, generator=g, dtype=torch.float64)
    sigma = 0.02 * torch.rand(3, 10, generator=g, dtype=torch.float64) + 1e-3
    eps = torch.randn(3, 4, 10, generator=g, dtype=torch.float64)
    got = path_stats(mu, sigma, eps)
    close = np.exp(np.cumsum((mu[:, None] + sigma[:, None] * eps).reshape(12, 10).numpy(), axis=1))
    want = path_features(close, np.ones(12))
    for k, v in got.items():
        np.testing.assert_allclose(v.reshape(-1).numpy(), want[k], atol=1e-12, err_msg=k)


def test_control_loss_hand_computed() -> None:
    """One deterministic path r = (0.01, 0): volatility std(r) = 0.005, end change 100 (e^0.01 - 1)."""
    mu = torch.tensor([[0.01, 0.0]], dtype=torch.float64)
    sigma = torch.ones_like(mu)
    eps = torch.zeros(1, 2, 2, dtype=torch.float64)  # two identical paths: the share is that path's
    one = featurize([ForecastAction(volatility_level="medium")], [1.0])
    # T = 0.5 (0.006 - 0.004) = 0.001, z1 = 1, z2 = -1: -log(σ(1) σ(1))
    got = control_loss(mu, sigma, one, TH, eps, temperature=0.5)
    assert float(got) == pytest.approx(-2 * _logsig(1.0), rel=1e-7)
    two = featurize([ForecastAction(volatility_level="medium", direction="up")], [1.0])
    chg = 100 * (math.exp(0.01) - 1)  # cuts (-0.5, 0.5), T = 0.5: up = high bin = log σ((chg - 0.5) / 0.5)
    got = control_loss(mu, sigma, two, TH, eps, temperature=0.5)
    assert float(got) == pytest.approx((-2 * _logsig(1.0) - _logsig((chg - 0.5) / 0.5)) / 2, rel=1e-7)
    share = math.exp(2 * _logsig(1.0))  # 0.534: the soft share of paths in the medium bin
    capped = control_loss(mu, sigma, one, TH, eps, temperature=0.5, share_target=0.9)
    assert float(capped) == pytest.approx(math.log(0.9) - math.log(share), rel=1e-7)
    assert float(control_loss(mu, sigma, one, TH, eps, temperature=0.5, share_target=0.5)) == 0.0  # reached
    none = featurize([ForecastAction(monotonicity="mixed")], [1.0])  # no controlled field: nothing to match
    assert float(control_loss(mu, sigma, none, TH, eps, temperature=0.5)) == 0.0


def test_control_loss_gradient_widens_sigma_for_high_volatility() -> None:
    mu = torch.zeros(1, 10, dtype=torch.float64)
    log_sigma = torch.full((1, 10), math.log(0.003), dtype=torch.float64, requires_grad=True)
    eps = torch.randn(1, 64, 10, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    for level, sign in (("high", -1.0), ("low", 1.0)):
        loss = control_loss(mu, log_sigma.exp(), featurize([ForecastAction(volatility_level=level)], [1.0]), TH, eps,
                            0.1)
        (grad,) = torch.autograd.grad(loss, log_sigma)
        assert torch.all(torch.sign(grad.sum()) == sign), level  # descent raises sigma for high, lowers it for low


def _teacher(n: int = 400):
    w = synthetic_windows().split_of("train").select(np.arange(n))
    th = ActionThresholds.fit(train_only(synthetic_windows()))
    return featurize(actions_from_windows(w, th), w.last_close)


def test_field_dropout_gives_empty_single_and_full_actions() -> None:
    t = _teacher()
    d = drop_fields(t, p_none=0.2, generator=torch.Generator().manual_seed(0))
    missing = torch.tensor([FIELD_SPECS[f].n_bins for f in CODE_FIELDS])
    n_given = (d.codes != missing).sum(1) + d.mask.sum(1).long()
    assert (n_given == 0).any() and (n_given == 1).any() and (n_given > 10).any()
    assert torch.all((d.codes == t.codes) | (d.codes == missing))  # a kept field keeps its value


def test_counterfactual_actions() -> None:
    t = _teacher()
    missing = torch.tensor([FIELD_SPECS[f].n_bins for f in CODE_FIELDS])
    single = counterfactual_actions(t, p_single=1.0, generator=torch.Generator().manual_seed(0))
    given = single.codes != missing
    assert torch.all(given.sum(1) == 1) and single.mask.sum() == 0
    fields = {CODE_FIELDS[j] for j in given.nonzero()[:, 1].tolist()}
    assert fields == set(CONTROLLED)
    vol = single.codes[:, CODE_FIELDS.index("volatility_level")]
    assert {0, 1, 2} <= set(vol.tolist())  # both extremes and the middle are requested
    other = counterfactual_actions(t, p_single=0.0, generator=torch.Generator().manual_seed(0))
    rows = {tuple(r) for r in t.codes.tolist()}
    kept = other.codes != missing
    # each row is a (partly dropped) teacher row of another window: some teacher row agrees on its kept fields
    for r, k in zip(other.codes[:20], kept[:20], strict=True):
        assert any(all(a == b for a, b, m in zip(r.tolist(), row, k.tolist(), strict=True) if m) for row in rows)


def _tiny_decoder() -> ActionConditionedDecoder:
    torch.manual_seed(0)
    ts = TSEncoderConfig(lookback=90, horizon=10, d_model=16, n_layers=1, n_heads=2, ffn_dim=32, d_llm=8, dropout=0.0)
    return ActionConditionedDecoder(ts, ActionEncoderConfig(cond_dim=8, emb_dim=4, hidden=16))


def test_decoder_loss_without_control_is_l_ts_under_dropout() -> None:
    dec, t = _tiny_decoder(), _teacher(16)
    w = synthetic_windows().split_of("train").select(np.arange(16))
    x, y = torch.as_tensor(w.x), torch.as_tensor(w.y)
    res = DecoderLoss(DecoderRecipe(control_weight=0.0), None)(dec, x, y, t, torch.Generator().manual_seed(3))
    want, _ = ts_loss(dec(x, drop_fields(t, 0.2, torch.Generator().manual_seed(3))), y)
    assert float(res.total.detach()) == pytest.approx(float(want.detach())) and float(res.control) == 0.0
    with pytest.raises(ValueError, match="thresholds"):
        DecoderLoss(DecoderRecipe(), None)
    # without field dropout: L_TS on the full a*, whatever the generator draws (JointSFT's default). The
    # conditioned heads start at zero (the action has no effect at init), so perturb them first
    torch.manual_seed(0)
    with torch.no_grad():
        for p in dec.parameters():
            p.add_(0.1 * torch.randn_like(p))
    want, _ = ts_loss(dec(x, drop_fields(t, 0.2, torch.Generator().manual_seed(3))), y)
    full = DecoderLoss(DecoderRecipe(p_none=0.0, control_weight=0.0, field_dropout=False), None)
    want_full, _ = ts_loss(dec(x, t), y)
    for seed in (1, 2):
        got = full(dec, x, y, t, torch.Generator().manual_seed(seed)).total
        assert float(got.detach()) == pytest.approx(float(want_full.detach()))
    assert float(want_full.detach()) != pytest.approx(float(want.detach()))  # dropout did change the loss


def test_a_few_steps_of_the_control_loss_make_direction_a_control() -> None:
    """Property: after training on the decoder loss, "up" decodes a higher mean path than "down"."""
    dec = _tiny_decoder()
    all_w = synthetic_windows()
    th = ActionThresholds.fit(train_only(all_w))
    dec.fit_input_stats(train_only(all_w))
    train = all_w.split_of("train").select(np.arange(256))
    test = all_w.split_of("test").select(np.arange(32))
    teacher = featurize(actions_from_windows(train, th), train.last_close)
    loss = DecoderLoss(DecoderRecipe(p_single=1.0, control_weight=1.0, control_samples=16), th)

    def gap() -> float:
        ends = [dec.forecast(test, [ForecastAction(direction=d)] * len(test), 4).close[:, -1] for d in ("up", "down")]
        return float(np.mean(np.log(ends[0] / ends[1])))

    assert gap() == pytest.approx(0.0, abs=1e-9)  # the zero-initialised action path: no control at step 0
    opt = torch.optim.Adam(dec.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(0)
    dec.train()
    for step in range(25):
        idx = torch.arange(step * 32, step * 32 + 32) % len(train)
        res = loss(dec, torch.as_tensor(train.x[idx.numpy()]), torch.as_tensor(train.y[idx.numpy()]),
                   type(teacher)(teacher.codes[idx], teacher.numeric[idx], teacher.mask[idx]), g)
        opt.zero_grad()
        res.total.backward()
        opt.step()
    assert gap() > 0.005  # the 10-day mean log path of "up" ends above that of "down"
