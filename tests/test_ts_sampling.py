"""Encoder output -> price-space Forecast: hand-computed paths, sample moments, high/low quantiles."""

import math

import numpy as np
import torch

from ts_encoder.model import TSOutput
from ts_encoder.sampling import to_forecast
from ts_encoder.uncertainty import UncertaintyNormalizer, raw_uncertainty

S = 3


def _out(mu_c: float, sd_c: float, mu_v: float = 0.1, qh: float = 0.02, ql: float = -0.03, b: int = 2) -> TSOutput:
    mu = torch.zeros(b, 3, S)
    mu[:, 1], mu[:, 2] = mu_c, mu_v
    sigma = torch.full((b, 3, S), 0.5)
    sigma[:, 1] = sd_c
    return TSOutput(mu=mu, sigma=sigma, q_high=torch.full((b, S), qh), q_low=torch.full((b, S), ql),
                    hidden=torch.zeros(b, 1, 1), h_ts=torch.zeros(b, 1, 1), state=torch.zeros(b, 1))


LAST = np.array([[10.0, 11.0, 9.0, 100.0, 999.0], [1, 1, 1, 50.0, 0.0]])  # O H L C V


def test_mean_path_volume_and_first_step_quantiles_by_hand() -> None:
    f = to_forecast(_out(0.01, 0.02), LAST, n_samples=5)
    np.testing.assert_allclose(f.close[0], 100 * np.exp(0.01 * np.arange(1, S + 1)), rtol=1e-6)
    np.testing.assert_allclose(f.volume[0], 1000 * np.exp(0.1 * np.arange(1, S + 1)) - 1, rtol=1e-6)
    # s = 1: the quantile heads are relative to the known close C_t
    assert math.isclose(f.high[0, 0], 100 * math.exp(0.02), rel_tol=1e-6)
    assert math.isclose(f.low[1, 0], 50 * math.exp(-0.03), rel_tol=1e-6)
    # later steps widen with the close-path uncertainty: ln H = a + sqrt((1.645 sd)^2 + q^2)
    a = math.log(100) + 0.01
    assert math.isclose(math.log(f.high[0, 1]), a + math.sqrt((1.6448536269514722 * 0.02) ** 2 + 0.02**2), rel_tol=1e-6)
    assert np.all(f.high > f.close) and np.all(f.low < f.close)
    assert f.close_samples.shape == (2, 5, S)
    assert np.all(np.isnan(f.uncertainty))  # no normaliser given


def test_zero_sigma_samples_equal_mean_path() -> None:
    f = to_forecast(_out(0.01, 0.0), LAST, n_samples=4)
    np.testing.assert_allclose(f.close_samples, np.broadcast_to(f.close[:, None], f.close_samples.shape), rtol=1e-6)
    np.testing.assert_allclose(f.high[0], f.close[0] / np.exp(0.01) * np.exp(0.02), rtol=1e-6)


def test_sample_log_returns_have_the_model_moments() -> None:
    gen = torch.Generator().manual_seed(0)
    f = to_forecast(_out(0.003, 0.02, b=1), LAST[:1], n_samples=40000, generator=gen)
    logp = np.log(f.close_samples[0] / 100.0)  # [M, S] cumulative log returns
    assert abs(logp[:, -1].mean() - 3 * 0.003) < 3 * 0.02 * math.sqrt(3) / math.sqrt(40000) * 4
    assert abs(logp[:, -1].std() / (0.02 * math.sqrt(3)) - 1) < 0.02
    steps = np.diff(np.concatenate([np.zeros((40000, 1)), logp], 1), axis=1)
    assert abs(np.corrcoef(steps[:, 0], steps[:, 1])[0, 1]) < 0.03  # independent steps
    # the seeded generator makes paths reproducible
    f2 = to_forecast(_out(0.003, 0.02, b=1), LAST[:1], n_samples=40000, generator=torch.Generator().manual_seed(0))
    np.testing.assert_array_equal(f.close_samples, f2.close_samples)


def test_uncertainty_uses_fitted_normaliser() -> None:
    lo, hi = _out(0.0, 0.01), _out(0.0, 0.05)
    norm = UncertaintyNormalizer().fit(torch.cat([raw_uncertainty(lo), raw_uncertainty(hi)]) * torch.tensor([1.0, 1.1, 0.9, 1.2]))
    f_lo, f_hi = to_forecast(lo, LAST, 2, norm), to_forecast(hi, LAST, 2, norm)
    assert np.all(f_hi.uncertainty > f_lo.uncertainty)
    assert np.all((f_lo.uncertainty >= 0) & (f_hi.uncertainty <= 1))
