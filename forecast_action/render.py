"""The tool observation returned to the LLM after ``<forecast_action>`` (Stock-R1 App. C.6 case study).

    <forecast_ts>
    Close price: [82.36, 79.73, ...]        mean path, 2 dp (price space)
    High price: [...]  Low price: [...]     0.95 / 0.05 quantile paths of the high / low
    Volume: [12916896, ...]                 integer shares
    Close 90% interval at t+S: [lo, hi]     from the sampled close paths
    Uncertainty: 0.42                       normalised U in [0, 1] (omitted when the model has none)
    </forecast_ts>

When the action had no usable field the decoder runs unconditioned and the observation starts with an
``Error:`` line that says so, so the rollout continues and the reward can see it.
"""

from __future__ import annotations

import numpy as np

from forecast_action.parser import ParseResult
from stockr1.types import Forecast

TS_OPEN, TS_CLOSE = "<forecast_ts>", "</forecast_ts>"


def _arr(x: np.ndarray, digits: int) -> str:
    if digits == 0:
        return "[" + ", ".join(str(int(round(float(v)))) for v in x) + "]"
    return "[" + ", ".join(f"{float(v):.{digits}f}" for v in x) + "]"


def render_observation(forecast: Forecast, i: int, error: str | None = None) -> str:
    """The ``<forecast_ts>`` block for window ``i`` of ``forecast``; ``error`` adds an ``Error:`` line."""
    lines = [TS_OPEN]
    if error:
        lines.append(f"Error: {error}")
    lines += [
        f"Close price: {_arr(forecast.close[i], 2)}",
        f"High price: {_arr(forecast.high[i], 2)}",
        f"Low price: {_arr(forecast.low[i], 2)}",
        f"Volume: {_arr(forecast.volume[i], 0)}",
    ]
    last = forecast.close_samples[i, :, -1]
    lo, hi = np.quantile(last, [0.05, 0.95])
    lines.append(f"Close 90% interval at t+{forecast.close.shape[1]}: [{lo:.2f}, {hi:.2f}]")
    if forecast.uncertainty is not None and np.isfinite(forecast.uncertainty[i]):
        lines.append(f"Uncertainty: {float(forecast.uncertainty[i]):.2f}")
    lines.append(TS_CLOSE)
    return "\n".join(lines)


def parse_error_text(result: ParseResult, max_errors: int = 3) -> str | None:
    """The error line for an action with no usable field (None when the action is usable)."""
    if result.action is not None:
        return None
    detail = "; ".join(e.message for e in result.errors[-max_errors:]) or "no action found"
    return f"the forecast action had no usable field ({detail}); this is the unconditioned forecast"
