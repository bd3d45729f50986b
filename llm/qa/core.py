"""QA building blocks: the item, the point-in-time state a question may use, and the future path
an answer is computed from.

The split between :class:`Decision` (everything stamped at or before the decision time t) and
:class:`Path` (the next S days) is what makes the generator causal by construction: a question's
text is rendered from a ``Decision`` only, its answer from ``(Path, Decision)``. The same answer
function runs on the realised future (ground truth), on the decoder's trajectory (cold-start traces
and the policy's own reasoning) and on a flat path (the random-walk baseline).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from stockr1.types import CHANNELS, CLOSE, HIGH, LOW, VOLUME, Forecast, Windows

AnswerType = Literal["yes_no", "choice", "numeric"]
FAMILIES: tuple[str, ...] = ("forecast", "event", "fundamental", "news", "multi_signal")
FAMILY_TITLES: dict[str, str] = {
    "forecast": "Forecast QA",
    "event": "Event Detection",
    "fundamental": "Fundamental QA",
    "news": "News Analysis",
    "multi_signal": "Multi-signal Reasoning",
}
YES, NO = "Yes", "No"


@dataclass(frozen=True)
class QAItem:
    """One question grounded at a decision time.

    window: row of the source ``Windows`` (the full set, not the split subset).
    answer: canonical answer text ("Yes"/"No", one of ``choices``, or a number with 2 decimals).
    tolerance: absolute tolerance for numeric answers (same unit as the answer), 0 otherwise.
    """

    id: str
    family: str
    template: str
    question: str
    answer: str
    answer_type: AnswerType
    window: int
    ticker: str
    date: str
    split: str
    choices: tuple[str, ...] = ()
    tolerance: float = 0.0
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class NewsItem:
    date: str
    headline: str
    sentiment: str  # positive | negative | neutral


@dataclass(frozen=True)
class QAContext:
    """Point-in-time text/tabular context at t (from the data layer's ``PointInTimeStore``).

    macro:        latest release of each indicator before t, e.g. {"2Y": 3.90, "10Y": 4.38} (Treasury
                  yields use the keys 1M/3M/2Y/10Y/30Y) or {"default_spread": 1.09, "wti": 74.99}
    macro_labels: human label and unit per indicator, e.g. {"wti": ("WTI crude oil spot", "$")}
    macro_prev:   the same indicators as of about one month earlier (for "shift" questions), may be empty
    news:         the most recent headlines, newest first, all stamped before the close of t-1
    fundamentals: latest quarterly snapshot published before t (empty for an index)
    """

    macro: Mapping[str, float] = field(default_factory=dict)
    macro_labels: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    macro_prev: Mapping[str, float] = field(default_factory=dict)
    news: tuple[NewsItem, ...] = ()
    fundamentals: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Decision:
    """Everything a question may reference: history up to and including t, and the context.

    close: [L] closes for t-L+1..t; volume: [L] volumes for the same days (NaN when absent);
    channels: the channels the series has (``Windows.channels``; a close-only stock has ("close",)).
    """

    ticker: str
    date: str
    close: np.ndarray
    volume: np.ndarray
    context: QAContext
    channels: tuple[str, ...] = CHANNELS

    def macro_text(self, name: str, value: float | None = None) -> str:
        """e.g. "WTI crude oil spot at $74.99" / "Baa-Aaa default spread at 1.09%"."""
        label, unit = self.context.macro_labels.get(name, (name, ""))
        v = self.context.macro[name] if value is None else value
        return f"{label} at {unit}{v:.2f}" if unit == "$" else f"{label} at {v:.2f}{unit}"

    @property
    def last_close(self) -> float:
        return float(self.close[-1])

    def past_vol(self, x: int) -> float:
        """Std of the last x daily log returns of the close (needs x+1 closes)."""
        return float(np.std(np.diff(np.log(self.close[-(x + 1):]))))

    def avg_volume(self, n: int = 20) -> float:
        return float(np.mean(self.volume[-n:]))


@dataclass(frozen=True)
class Path:
    """A future trajectory for days t+1..t+S: close/high/low/volume, each [S].

    From the realised future, from a decoder ``Forecast`` row, or flat (random walk)."""

    close: np.ndarray
    high: np.ndarray
    low: np.ndarray
    volume: np.ndarray

    @property
    def horizon(self) -> int:
        return int(self.close.shape[0])


def realised_path(windows: Windows, i: int) -> Path:
    f = windows.future[i]
    return Path(close=f[:, CLOSE], high=f[:, HIGH], low=f[:, LOW], volume=f[:, VOLUME])


def forecast_path(forecast: Forecast, i: int) -> Path:
    return Path(close=forecast.close[i], high=forecast.high[i], low=forecast.low[i], volume=forecast.volume[i])


def observed_path(text: str) -> Path:
    """The path a ``<forecast_ts>`` observation shows (``forecast_action.render.parse_observation``): what
    the policy reads, rounded as rendered. Channels the text does not carry (high and low in the compact
    layout, volume of a close-only stock) are NaN, so an answer that needed one could not come out the
    same as from the decoded forecast (tests/test_observation_fields.py checks every template)."""
    from forecast_action.render import parse_observation

    obs = parse_observation(text)
    nan = np.full_like(obs.close, np.nan)
    return Path(close=obs.close, high=nan if obs.high is None else obs.high, low=nan if obs.low is None else obs.low,
                volume=nan if obs.volume is None else obs.volume)


def flat_path(decision: Decision, horizon: int) -> Path:
    """The random-walk (no-change) forecast: every future close equals today's close."""
    c = np.full(horizon, decision.last_close)
    return Path(close=c, high=c.copy(), low=c.copy(), volume=np.full(horizon, decision.avg_volume()))


def decision_at(windows: Windows, i: int, context: QAContext | None = None) -> Decision:
    """The point-in-time state of window i (history only; never ``y``/``future``)."""
    h = windows.hist[i]
    return Decision(
        ticker=str(windows.ticker[i]),
        date=str(np.datetime_as_string(np.datetime64(windows.date[i], "D"))),
        close=np.asarray(h[:, CLOSE], dtype=float),
        volume=np.asarray(h[:, VOLUME], dtype=float),
        context=context or QAContext(),
        channels=tuple(c for c, ok in zip(CHANNELS, windows.channels[i], strict=True) if ok),
    )


# --- path statistics shared by templates and trace reasoning ---------------------------------


def cum_return_pct(path: Path, d: Decision, x: int) -> float:
    """Close-to-close return from t to t+x, in percent."""
    return 100.0 * (float(path.close[x - 1]) / d.last_close - 1.0)


def max_drawdown_pct(path: Path, d: Decision, x: int) -> float:
    """Largest peak-to-trough fall of the close over t..t+x (today's close is the first peak), %."""
    c = np.concatenate([[d.last_close], np.asarray(path.close[:x], dtype=float)])
    peak = np.maximum.accumulate(c)
    return float(100.0 * np.max(1.0 - c / peak))


def future_vol(path: Path, d: Decision, x: int) -> float:
    """Std of the daily log returns of the close over t..t+x (x returns)."""
    c = np.concatenate([[d.last_close], np.asarray(path.close[:x], dtype=float)])
    return float(np.std(np.diff(np.log(c))))


# A template's answer function: (path, decision, params) -> canonical answer text.
AnswerFn = Callable[[Path, Decision, Mapping[str, Any]], str]
