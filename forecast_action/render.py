"""The tool observation returned to the LLM after ``<forecast_action>`` (Stock-R1 App. C.6 case study),
and its parser. Two layouts (``STYLES``), chosen by the decoder that renders them (saved with it, as
its ``tool_samples``), so a policy always reads the layout it was trained on:

``compact`` (default for new decoders; what a real tokenizer can afford, issue 31)::

    <forecast_ts>
    Close price: [1057.0, 1059.8, ...]      mean close path, to >= 1 bp of its level (at most 2 dp)
    Close 90% interval at t+10: [1033.5, 1154.5]   5% / 95% quantiles of the sampled closes at t+S
    Volume (billions): [5.04, 5.16, ...]    mean volume path, 3 significant figures of its largest day
    Uncertainty: 0.42                       normalised U in [0, 1] (omitted when the model has none)
    </forecast_ts>

``full`` (the layout release/tiny was trained on; decoders saved before ``observation`` existed)::

    Close price: [82.36, ...]  High price: [...]  Low price: [...]   2 dp (high/low: 0.95 / 0.05 quantiles)
    Volume: [12916896, ...]                 integer shares
    Close 90% interval at t+S: [lo, hi] / Uncertainty: as above

Why compact: in SmolLM2's tokenizer (one token per digit) the full block of a 10-day horizon on an index
is ~450 tokens, of which high, low and integer volume are ~340; no question's answer reads the high or
low path (``tests/test_observation_fields.py`` checks every template against the parsed observation),
and volume questions compare with a multiple (1.2x, 1.5x) of an average, which 3 significant figures
resolve. Precision choices: a close to 1 basis point of its level moves a percentage answer by at most
0.005 points (answers are graded at >= 0.6 points); ``stockr1 bench tokens`` measures the tokens saved and
how often the rounding changes an answer.

A channel the decoder did not forecast (NaN: a close-only stock has no volume, high or low) has no line.
When the action had no usable field the decoder runs unconditioned and the observation starts with an
``Error:`` line that says so, so the rollout continues and the reward can see it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from forecast_action.parser import ParseResult
from stockr1.types import Forecast

TS_OPEN, TS_CLOSE = "<forecast_ts>", "</forecast_ts>"
STYLES = ("compact", "full")
COMPACT, FULL = STYLES
_UNITS = ((1e12, "trillions"), (1e9, "billions"), (1e6, "millions"), (1e3, "thousands"))


def _arr(x: np.ndarray, digits: int) -> str:
    if digits == 0:
        return "[" + ", ".join(str(int(round(float(v)))) for v in x) + "]"
    return "[" + ", ".join(f"{float(v):.{digits}f}" for v in x) + "]"


def price_decimals(level: float) -> int:
    """Decimals that resolve 1 basis point of ``level``, at most 2 (82.36, 1057.0, 15321)."""
    if not math.isfinite(level) or level <= 0:
        return 2
    return int(min(2, max(0, 4 - math.floor(math.log10(level)))))


def volume_scale(values: np.ndarray) -> tuple[float, str, int]:
    """(unit, unit name, decimals) that print the largest of ``values`` with 3 significant figures."""
    top = float(np.max(np.abs(values))) if len(values) else 0.0
    unit, name = next(((u, n) for u, n in _UNITS if top >= u), (1.0, ""))
    digits = 0 if top <= 0 else int(max(0, 2 - math.floor(math.log10(top / unit))))
    return unit, name, digits


def _present(x: np.ndarray) -> bool:
    """A forecast channel is shown only when every value is finite (NaN = the source has no such data)."""
    return bool(np.all(np.isfinite(x)))


def render_observation(forecast: Forecast, i: int, error: str | None = None, style: str = COMPACT) -> str:
    """The ``<forecast_ts>`` block for window ``i`` of ``forecast`` in ``style``; ``error`` adds an
    ``Error:`` line."""
    if style not in STYLES:
        raise ValueError(f"observation style must be one of {STYLES}, got {style!r}")
    lines = [TS_OPEN]
    if error:
        lines.append(f"Error: {error}")
    close = forecast.close[i]
    last = forecast.close_samples[i, :, -1]
    lo, hi = np.quantile(last, [0.05, 0.95])
    dp = 2 if style == FULL else price_decimals(float(np.max(np.abs(close))))
    lines.append(f"Close price: {_arr(close, dp)}")
    if style == FULL:
        for name, x, digits in (("High price", forecast.high[i], 2), ("Low price", forecast.low[i], 2),
                                ("Volume", forecast.volume[i], 0)):
            if _present(x):
                lines.append(f"{name}: {_arr(x, digits)}")
    lines.append(f"Close 90% interval at t+{forecast.close.shape[1]}: [{lo:.{dp}f}, {hi:.{dp}f}]")
    vol = forecast.volume[i]
    if style == COMPACT and _present(vol):
        unit, name, digits = volume_scale(vol)
        lines.append(f"Volume{f' ({name})' if name else ''}: {_arr(vol / unit, digits)}")
    if forecast.uncertainty is not None and np.isfinite(forecast.uncertainty[i]):
        lines.append(f"Uncertainty: {float(forecast.uncertainty[i]):.2f}")
    lines.append(TS_CLOSE)
    return "\n".join(lines)


@dataclass(frozen=True)
class Observation:
    """What an observation text carries, as numbers. close: [S]; high / low / volume: [S] or None
    (not in the text); interval: (lo, hi) of the close at t+``interval_step``; uncertainty or None."""

    close: np.ndarray
    interval: tuple[float, float]
    interval_step: int
    high: np.ndarray | None = None
    low: np.ndarray | None = None
    volume: np.ndarray | None = None
    uncertainty: float | None = None
    error: str | None = None


_LINE = re.compile(r"^(Close price|High price|Low price|Volume(?: \((\w+)\))?): \[([^\]]*)\]$")
_INTERVAL = re.compile(r"^Close 90% interval at t\+(\d+): \[([-\d.e+]+), ([-\d.e+]+)\]$")
_UNIT_OF = {name: u for u, name in _UNITS}


def parse_observation(text: str) -> Observation:
    """The numbers of a ``render_observation`` text (either style); ValueError naming the first line it
    cannot read or a missing close / interval line. Volumes come back in shares (unit applied)."""
    got: dict[str, np.ndarray] = {}
    interval, step, unc, err = None, None, None, None
    for line in text.strip().splitlines():
        line = line.strip()
        if line in ("", TS_OPEN, TS_CLOSE):
            continue
        if line.startswith("Error: "):
            err = line[len("Error: "):]
        elif line.startswith("Uncertainty: "):
            unc = float(line[len("Uncertainty: "):])
        elif (m := _INTERVAL.match(line)) is not None:
            step, interval = int(m.group(1)), (float(m.group(2)), float(m.group(3)))
        elif (m := _LINE.match(line)) is not None:
            values = np.array([float(v) for v in m.group(3).split(",")], dtype=float)
            key = m.group(1).split(" ")[0].lower()
            if m.group(2) is not None:
                if m.group(2) not in _UNIT_OF:
                    raise ValueError(f"observation line {line[:60]!r}: unknown unit {m.group(2)!r}")
                values = values * _UNIT_OF[m.group(2)]
            got[key] = values
        else:
            raise ValueError(f"observation line {line[:60]!r} is not part of the <forecast_ts> layout")
    if "close" not in got or interval is None or step is None:
        raise ValueError("observation has no 'Close price' or no 'Close 90% interval' line")
    return Observation(got["close"], interval, step, got.get("high"), got.get("low"), got.get("volume"), unc, err)


def parse_error_text(result: ParseResult, max_errors: int = 3) -> str | None:
    """The error line for an action with no usable field (None when the action is usable)."""
    if result.action is not None:
        return None
    detail = "; ".join(e.message for e in result.errors[-max_errors:]) or "no action found"
    return f"the forecast action had no usable field ({detail}); this is the unconditioned forecast"
