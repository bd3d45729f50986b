"""Every field a question's answer needs is in the tool's observation: for every template and every
parameter cell, the answer computed from the parsed observation text (``llm.qa.core.observed_path``)
equals the answer computed from the decoded ``Forecast`` it was rendered from.

The forecasts here sit on the rendering grid (closes at the decimals ``price_decimals`` prints, volumes
at 3 significant figures of their unit), so rounding cannot move an answer and any difference means a
field the answer reads is missing from the text. How often rounding of off-grid (real) forecasts moves
an answer is measured by ``stockr1 bench tokens`` (results/tokens)."""

from __future__ import annotations

import numpy as np
import pytest

from forecast_action.render import price_decimals, render_observation, volume_scale
from llm.qa import TEMPLATES
from llm.qa.core import NO, YES, Decision, NewsItem, QAContext, forecast_path, observed_path
from stockr1.types import Forecast

HORIZON = 10


def _decision(sentiment: str, level: float) -> Decision:
    """A decision whose context satisfies every template's needs (yields, a month-ago macro value, news
    mostly of ``sentiment``, a filing); closes around ``level``."""
    rng = np.random.default_rng(1)
    close = level * np.exp(np.cumsum(rng.normal(0, 0.01, 90)))
    other = "negative" if sentiment == "positive" else "positive"
    news = tuple(NewsItem("2020-01-0" + str(9 - j), f"headline {j}", s)
                 for j, s in enumerate([sentiment, sentiment, other, "neutral"]))
    ctx = QAContext(macro={"3M": 1.2, "2Y": 1.5, "10Y": 2.1}, macro_prev={"10Y": 2.3}, news=news,
                    fundamentals={"liabilities_to_equity": 1.4})
    return Decision("TKR", "2020-01-10", close, rng.uniform(0.8e6, 1.2e6, 90), ctx)


def _on_grid(rng: np.random.Generator, d: Decision, style: str) -> Forecast:
    """A one-row forecast whose close and volume paths are exactly what ``style`` prints."""
    close = d.last_close * np.exp(np.cumsum(rng.normal(0, 0.015, HORIZON)))
    dp = 2 if style == "full" else price_decimals(float(np.max(close)))
    close = np.round(close, dp)
    volume = rng.integers(80, 140, HORIZON) * 1e4 * rng.choice([1.0, 1.5])  # 0.8-2.1M: crosses 1.2x / 1.5x the average
    if style == "compact":
        unit, _, digits = volume_scale(volume)
        volume = np.round(volume / unit, digits) * unit
    samples = close[None, None, :] * np.linspace(0.95, 1.05, 8)[None, :, None]
    return Forecast(close[None], samples, close[None] * 1.02, close[None] * 0.98, volume[None], np.array([0.4]))


@pytest.mark.parametrize("style", ["compact", "full"])
@pytest.mark.parametrize("level", [100.0, 2663.42])  # a stock / rebased frame (2 dp) and an index level (1 dp)
def test_every_template_answers_the_same_from_the_observation(style: str, level: float) -> None:
    rng = np.random.default_rng(0)
    decisions = [_decision("negative", level), _decision("positive", level)]
    forecasts = [_on_grid(rng, decisions[0], style) for _ in range(25)]
    checked = set()
    for t in TEMPLATES:
        d = next((d for d in decisions if t.usable(d)), None)
        assert d is not None, f"no test decision satisfies {t.key}'s needs"
        answers = set()
        for params in t.grid:
            for fc in forecasts:
                text = render_observation(fc, 0, style=style)
                want = t.answer(forecast_path(fc, 0), d, params)
                got = t.answer(observed_path(text), d, params)
                assert got == want, (t.key, params, style, text)
                answers.add(want)
        assert len(answers) > 1, f"{t.key}: every forecast gave {answers}: the comparison was not exercised"
        checked.add(t.key)
    assert checked == {t.key for t in TEMPLATES}


def test_a_field_missing_from_the_text_is_caught() -> None:
    """The check above can fail: an answer that reads the high path (not in the compact text) differs."""
    rng = np.random.default_rng(0)
    d = _decision("negative", 100.0)

    def reads_high(path, d, p):
        return YES if float(np.max(path.high[: p["x"]])) > d.last_close else NO

    fcs = [_on_grid(rng, d, "compact") for _ in range(25)]
    same = [reads_high(observed_path(render_observation(fc, 0)), d, {"x": 5}) == reads_high(forecast_path(fc, 0), d, {"x": 5})
            for fc in fcs]
    assert not all(same)
