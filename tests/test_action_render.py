"""The <forecast_ts> observation: case-study layout, rounding, uncertainty, error observation."""

import numpy as np

from forecast_action.parser import parse_action
from forecast_action.render import parse_error_text, render_observation
from stockr1.types import Forecast


def _forecast(unc: float) -> Forecast:
    close = np.array([[82.364, 79.731, 82.24]])
    samples = np.stack([close * f for f in np.linspace(0.9, 1.1, 21)], axis=1)
    return Forecast(close=close, close_samples=samples, high=close * 1.05, low=close * 0.95,
                    volume=np.array([[12916896.4, 1.0e7, 9.6e6]]), uncertainty=np.array([unc]))


def test_layout_and_rounding() -> None:
    text = render_observation(_forecast(0.421), 0)
    lines = text.splitlines()
    assert lines[0] == "<forecast_ts>" and lines[-1] == "</forecast_ts>"
    assert lines[1] == "Close price: [82.36, 79.73, 82.24]"
    assert lines[2] == "High price: [86.48, 83.72, 86.35]"
    assert lines[4] == "Volume: [12916896, 10000000, 9600000]"
    # 5% / 95% quantiles of 21 evenly spaced factors 0.9..1.1 are 0.91 and 1.09 of 82.24
    assert lines[5] == f"Close 90% interval at t+3: [{0.91 * 82.24:.2f}, {1.09 * 82.24:.2f}]"
    assert lines[6] == "Uncertainty: 0.42"
    assert "Uncertainty" not in render_observation(_forecast(float("nan")), 0)


def test_error_observation_for_unusable_action() -> None:
    bad = parse_action("<forecast_action>it will go up a lot</forecast_action>")
    err = parse_error_text(bad)
    assert err is not None and "unconditioned" in err and "no usable field" in err
    text = render_observation(_forecast(0.5), 0, error=err)
    assert text.splitlines()[1].startswith("Error: the forecast action had no usable field")
    assert "Close price:" in text  # the rollout still gets a forecast
    assert parse_error_text(parse_action('{"direction": "up"}')) is None
