"""U = Σ σ² and its training-split normaliser: hand values, monotone in σ, bounded, round-trips."""

import torch

from ts_encoder.model import TSOutput
from ts_encoder.uncertainty import UncertaintyNormalizer, raw_uncertainty


def _out(sigma: torch.Tensor) -> TSOutput:
    b, _, s = sigma.shape
    z = torch.zeros(b, s)
    return TSOutput(mu=torch.zeros_like(sigma), sigma=sigma, q_high=z, q_low=z,
                    hidden=torch.zeros(b, 1, 1), h_ts=torch.zeros(b, 1, 1), state=torch.zeros(b, 1))


def test_raw_uncertainty_hand_value() -> None:
    sigma = torch.tensor([[[1.0, 2.0], [0.5, 0.5], [3.0, 0.0]]])  # O, C, V over S=2
    assert torch.isclose(raw_uncertainty(_out(sigma)), torch.tensor([1 + 4 + 0.25 + 0.25 + 9 + 0.0]))
    assert torch.isclose(raw_uncertainty(_out(sigma), channels=(1,)), torch.tensor([0.5]))


def test_normalised_uncertainty_monotone_in_sigma_and_bounded() -> None:
    gen = torch.Generator().manual_seed(0)
    train_sigma = torch.rand(500, 3, 4, generator=gen) * 0.05 + 0.005
    norm = UncertaintyNormalizer().fit(raw_uncertainty(_out(train_sigma)))
    base = torch.rand(1, 3, 4, generator=gen) * 0.05 + 0.005
    scales = torch.linspace(0.05, 5.0, 200)
    u = norm(raw_uncertainty(_out(base * scales[:, None, None])))
    assert torch.all(u[1:] >= u[:-1])  # monotone
    assert torch.all((u >= 0) & (u <= 1))
    assert u[0] == 0 and u[-1] == 1  # below / above the training range
    inside = (u > 0) & (u < 1)
    assert inside.sum() > 20 and torch.all(torch.diff(u[inside]) > 0)  # strict inside the range
    # the training median maps to ~0.5: it is the empirical CDF of the training split
    train_u = raw_uncertainty(_out(train_sigma))
    assert abs(norm(train_u.median()[None]).item() - 0.5) < 0.02
    assert abs(norm(train_u).mean().item() - 0.5) < 0.02


def test_normaliser_state_round_trip_and_errors() -> None:
    norm = UncertaintyNormalizer().fit(torch.rand(100) + 0.1)
    other = UncertaintyNormalizer()
    other.load_state_dict(norm.state_dict())
    x = torch.rand(10) + 0.1
    torch.testing.assert_close(other(x), norm(x))
    try:
        UncertaintyNormalizer()(x)
    except RuntimeError as e:
        assert "not fitted" in str(e)
    else:
        raise AssertionError("unfitted normaliser must raise")
    try:
        UncertaintyNormalizer().fit(torch.tensor([1.0, -1.0]))
    except ValueError as e:
        assert "positive" in str(e)
    else:
        raise AssertionError("non-positive uncertainties must raise")
