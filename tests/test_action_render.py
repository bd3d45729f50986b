"""The <forecast_ts> observation: both layouts, rounding, absent channels, uncertainty, the error line,
and the parser that reads the numbers back."""

import numpy as np
import pytest

from forecast_action.parser import parse_action
from forecast_action.render import (
    parse_error_text,
    parse_observation,
    price_decimals,
    render_observation,
    volume_scale,
)
from stockr1.types import Forecast


def _forecast(unc: float, close=(82.364, 79.731, 82.24), volume=(12916896.4, 1.0e7, 9.6e6)) -> Forecast:
    close = np.array([close], dtype=float)
    samples = np.stack([close * f for f in np.linspace(0.9, 1.1, 21)], axis=1)
    return Forecast(close=close, close_samples=samples, high=close * 1.05, low=close * 0.95,
                    volume=np.array([volume], dtype=float), uncertainty=np.array([unc]))


def test_full_layout_and_rounding() -> None:
    text = render_observation(_forecast(0.421), 0, style="full")
    lines = text.splitlines()
    assert lines[0] == "<forecast_ts>" and lines[-1] == "</forecast_ts>"
    assert lines[1] == "Close price: [82.36, 79.73, 82.24]"
    assert lines[2] == "High price: [86.48, 83.72, 86.35]"
    assert lines[4] == "Volume: [12916896, 10000000, 9600000]"
    # 5% / 95% quantiles of 21 evenly spaced factors 0.9..1.1 are 0.91 and 1.09 of 82.24
    assert lines[5] == f"Close 90% interval at t+3: [{0.91 * 82.24:.2f}, {1.09 * 82.24:.2f}]"
    assert lines[6] == "Uncertainty: 0.42"
    assert "Uncertainty" not in render_observation(_forecast(float("nan")), 0, style="full")


def test_compact_layout_and_rounding() -> None:
    lines = render_observation(_forecast(0.421), 0).splitlines()  # compact is the default
    assert lines == ["<forecast_ts>", "Close price: [82.36, 79.73, 82.24]",
                     f"Close 90% interval at t+3: [{0.91 * 82.24:.2f}, {1.09 * 82.24:.2f}]",
                     "Volume (millions): [12.9, 10.0, 9.6]", "Uncertainty: 0.42", "</forecast_ts>"]
    # an index level: 1 decimal resolves a basis point; volumes in billions with 3 significant figures
    big = render_observation(_forecast(0.5, close=(1057.04, 1059.83, 1068.30), volume=(5.0369e9, 5.1563e9, 4.9e9)), 0)
    assert "Close price: [1057.0, 1059.8, 1068.3]" in big and "Volume (billions): [5.04, 5.16, 4.90]" in big
    assert [price_decimals(x) for x in (82.36, 100.0, 999.9, 1057.0, 15321.0, 0.5)] == [2, 2, 2, 1, 0, 2]
    assert volume_scale(np.array([950.0, 12.0])) == (1.0, "", 0)
    assert volume_scale(np.array([1.234e5])) == (1e3, "thousands", 0)


@pytest.mark.parametrize("style", ["compact", "full"])
def test_an_absent_channel_has_no_line(style: str) -> None:
    """A close-only stock: volume, high and low are NaN; no line prints NaN."""
    fc = _forecast(0.3, volume=(np.nan,) * 3)
    fc = Forecast(fc.close, fc.close_samples, np.full_like(fc.close, np.nan), np.full_like(fc.close, np.nan),
                  fc.volume, fc.uncertainty)
    text = render_observation(fc, 0, style=style)
    assert "nan" not in text.lower() and "Volume" not in text and "High" not in text
    obs = parse_observation(text)
    assert obs.volume is None and obs.high is None and obs.close.tolist() == [82.36, 79.73, 82.24]


@pytest.mark.parametrize("style", ["compact", "full"])
def test_parse_reads_back_what_was_rendered(style: str) -> None:
    fc = _forecast(0.421, close=(1057.04, 1059.83, 1068.30), volume=(5.0369e9, 5.1563e9, 4.9e9))
    obs = parse_observation(render_observation(fc, 0, style=style))
    digits = 2 if style == "full" else 1
    np.testing.assert_allclose(obs.close, np.round(fc.close[0], digits))
    np.testing.assert_allclose(obs.volume, [5.04e9, 5.16e9, 4.90e9] if style == "compact" else np.round(fc.volume[0]))
    assert obs.interval_step == 3 and obs.uncertainty == 0.42
    assert (obs.high is not None) == (style == "full")
    with pytest.raises(ValueError, match="not part of the <forecast_ts> layout"):
        parse_observation("<forecast_ts>\nClose price: [1, 2]\nsomething else\n</forecast_ts>")
    with pytest.raises(ValueError, match="no 'Close price'"):
        parse_observation("<forecast_ts>\nUncertainty: 0.5\n</forecast_ts>")
    with pytest.raises(ValueError, match="style"):
        render_observation(fc, 0, style="short")


def test_error_observation_for_unusable_action() -> None:
    bad = parse_action("<forecast_action>it will go up a lot</forecast_action>")
    err = parse_error_text(bad)
    assert err is not None and "unconditioned" in err and "no usable field" in err
    text = render_observation(_forecast(0.5), 0, error=err)
    assert text.splitlines()[1].startswith("Error: the forecast action had no usable field")
    assert "Close price:" in text  # the rollout still gets a forecast
    assert parse_observation(text).error == err
    assert parse_error_text(parse_action('{"direction": "up"}')) is None
