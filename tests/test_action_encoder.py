"""e_ψ featurisation, action dropout, and the conditioned decoder's identity-at-init / load / forecast."""

import math

import numpy as np
import pytest
import torch

from forecast_action.decoder import ActionConditionedDecoder
from forecast_action.encoder import (
    CODE_FIELDS,
    NUMERIC_FIELDS,
    ActionEncoder,
    ActionEncoderConfig,
    drop_fields,
    featurize,
)
from forecast_action.schema import FIELD_SPECS, ForecastAction
from stockr1.data import synthetic_windows
from stockr1.types import train_only
from ts_encoder.config import TSEncoderConfig
from ts_encoder.model import TSEncoder

TINY = TSEncoderConfig(lookback=90, horizon=10, d_model=32, n_layers=1, n_heads=4, ffn_dim=64, d_llm=8,
                       dropout=0.0)


def test_featurize_codes_numeric_and_mask() -> None:
    a = ForecastAction(direction="down", volatility_level="high", end_value=105.0, end_change_pct=-2.5,
                       turning_point_count=4)
    b = featurize([a, None], [100.0, 50.0])
    d, v = CODE_FIELDS.index("direction"), CODE_FIELDS.index("volatility_level")
    assert b.codes[0, d] == 1 and b.codes[0, v] == 2
    assert b.codes[1].tolist() == [FIELD_SPECS[f].n_bins for f in CODE_FIELDS]  # all missing
    e, c, t = (NUMERIC_FIELDS.index(f) for f in ("end_value", "end_change_pct", "turning_point_count"))
    assert b.numeric[0, e].item() == pytest.approx(100 * math.log(1.05) / 5, rel=1e-6)
    assert b.numeric[0, c].item() == pytest.approx(-0.5) and b.numeric[0, t].item() == pytest.approx(0.8)
    assert b.mask[0].sum() == 3 and b.mask[1].sum() == 0
    huge = featurize([ForecastAction(end_value=1e8)], [1.0])
    assert huge.numeric.abs().max() == 10.0  # clipped
    with pytest.raises(ValueError, match="start prices"):
        featurize([a], [1.0, 2.0])


def test_action_dropout() -> None:
    full = featurize([ForecastAction(direction="up", volatility_level="low", end_value=101.0)] * 400,
                     np.full(400, 100.0))
    g = torch.Generator().manual_seed(0)
    gone = drop_fields(full, p_none=1.0, generator=g)
    assert gone.mask.sum() == 0 and (gone.codes == featurize([None], [1.0]).codes).all()
    some = drop_fields(full, p_none=0.0, generator=g)
    kept = (some.codes[:, CODE_FIELDS.index("direction")] == 0).float().mean().item()
    assert 0.35 < kept < 0.65  # E[k] = 1/2 with k ~ U(0, 1)
    assert torch.equal(some.numeric, full.numeric * some.mask)


def test_action_encoder_responds_to_fields() -> None:
    torch.manual_seed(0)
    enc = ActionEncoder(ActionEncoderConfig(cond_dim=12))
    z = enc(featurize([ForecastAction(direction="up"), ForecastAction(direction="down"), None], [1.0] * 3))
    assert z.shape == (3, 12)
    assert not torch.allclose(z[0], z[1]) and not torch.allclose(z[0], z[2])


def test_decoder_starts_as_the_pretrained_encoder() -> None:
    torch.manual_seed(0)
    base = TSEncoder(TINY).eval()
    dec = ActionConditionedDecoder(TINY, ActionEncoderConfig(cond_dim=16)).eval()
    dec.load_encoder_state(base.state_dict())
    w = synthetic_windows().split_of("val").select(np.arange(5))
    x = torch.as_tensor(w.x)
    ref = base(x)
    for acts in ([None] * 5, [ForecastAction(direction="up", volatility_level="high")] * 5):
        out = dec(x, featurize(acts, w.last_close))
        assert torch.allclose(out.mu, ref.mu, atol=1e-6) and torch.allclose(out.sigma, ref.sigma, atol=1e-6)
        assert torch.allclose(out.h_ts, ref.h_ts)
    with pytest.raises(ValueError, match="does not fit"):
        dec.load_encoder_state({"nonsense": torch.zeros(1)})


def test_decoder_forecast_shapes_and_action_effect() -> None:
    torch.manual_seed(0)
    dec = ActionConditionedDecoder(TINY, ActionEncoderConfig(cond_dim=8))
    torch.nn.init.normal_(dec.encoder.film.net[-1].weight, std=0.5)  # a non-identity FiLM
    w = synthetic_windows().split_of("test").select(np.arange(3))
    up, down = ForecastAction(direction="up"), ForecastAction(direction="down")
    g = torch.Generator().manual_seed(1)
    f_up = dec.forecast(w, [up] * 3, n_samples=7, generator=g, batch_size=2)
    f_dn = dec.forecast(w, [down] * 3, n_samples=7, generator=g)
    assert f_up.close_samples.shape == (3, 7, 10) and f_up.close.shape == (3, 10)
    assert not np.allclose(f_up.close, f_dn.close)
    assert dec.training  # restored
    with pytest.raises(ValueError, match="actions for"):
        dec.forecast(w, [up], n_samples=2)


def test_teacher_training_makes_direction_control_the_mean() -> None:
    """A few steps on a* = g(future) must make "up" raise and "down" lower the decoded mean return."""
    from forecast_action.derive import ActionThresholds, actions_from_windows
    from ts_encoder.loss import ts_loss

    torch.manual_seed(0)
    w = synthetic_windows().split_of("train").select(np.arange(128))
    dec = ActionConditionedDecoder(TINY, ActionEncoderConfig(cond_dim=8))
    batch = featurize(actions_from_windows(w, ActionThresholds.fit(train_only(synthetic_windows()))), w.last_close)
    x, y = torch.as_tensor(w.x), torch.as_tensor(w.y)
    opt = torch.optim.Adam(dec.parameters(), lr=1e-2)
    for _ in range(30):
        loss, _ = ts_loss(dec(x, batch), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    dec.eval()
    with torch.no_grad():
        up = dec(x, featurize([ForecastAction(direction="up")] * 128, w.last_close)).mu[:, 1].sum(-1)
        down = dec(x, featurize([ForecastAction(direction="down")] * 128, w.last_close)).mu[:, 1].sum(-1)
    assert (up - down).mean() > 0.005  # > 0.5% of 10-day log return between the two requests
