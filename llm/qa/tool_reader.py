"""Tool-reader baselines: answer each QA question from a forecast distribution alone (issue 31 part 4).

A tool-reader takes a forecaster's sample paths for the question's window and answers through the same
``Template.answer`` that grades the realised future: every sampled close path gives one answer, and
the reader returns the most frequent (categorical: yes/no, choice) or the median (numeric, rounded to
two decimals as the other numeric baselines). No prompt text, no context: what a policy that passed its
tool's information faithfully to its answer could reach, so it is the ceiling the policy is held to.

Simplified, and said: the ``Forecast`` type carries one high/low/volume path per window (the 0.95 / 0.05
quantile paths and the volume point forecast), not one per sample, so templates on the high, low or
volume read those beside each sampled close. A row whose window lacks a channel has NaN there, as the
policy's compact observation does.

Readers (``tool_reader_answer_fns``):
- ``tool_reader_ts``: a TS encoder ensemble's calibrated sample paths (``EncoderEnsemble``);
- ``tool_reader_garch``: GJR-GARCH(1,1,1)-t fitted per ticker on the train split (``benchmarks.qa.command``: the
  baseline forecasters live in ``benchmarks``, a floor above this one);
- ``tool_reader_decoder``: the policy's own decoder with no action, its ``tool_samples`` paths.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from llm.qa.core import Path, QAItem, decision_at
from llm.qa.families import TEMPLATES_BY_KEY
from stockr1.types import Forecast, Windows

AnswerFn = Callable[[QAItem], str | None]
Forecaster = Callable[[Windows], Forecast]


def sample_paths(forecast: Forecast, row: int) -> list[Path]:
    """One ``Path`` per sampled close path of ``forecast`` row ``row`` (high/low/volume shared)."""
    return [Path(close=c, high=forecast.high[row], low=forecast.low[row], volume=forecast.volume[row])
            for c in forecast.close_samples[row]]


def read_answer(item: QAItem, windows: Windows, paths: Sequence[Path]) -> str | None:
    """The answer ``item``'s template gives most often over ``paths`` (numeric: their median).

    Ties between classes go to the class met first in sample order (deterministic for fixed samples).
    None if no path gives an answer."""
    d = decision_at(windows, item.window)
    t = TEMPLATES_BY_KEY[item.template]
    answers = [a for a in (t.answer(p, d, item.params) for p in paths) if a is not None]
    if not answers:
        return None
    if item.answer_type == "numeric":
        vals = [float(a) for a in answers]
        vals = [v for v in vals if np.isfinite(v)]
        return f"{float(np.median(vals)):.2f}" if vals else None
    return Counter(answers).most_common(1)[0][0]


class ToolReader:
    """Answers items from ``forecaster``'s forecast of their windows, computed once for all of them."""

    def __init__(self, forecaster: Forecaster, windows: Windows, items: Sequence[QAItem]) -> None:
        self.windows = windows
        rows = np.array(sorted({int(it.window) for it in items}), dtype=int)
        self.row_of = {int(w): r for r, w in enumerate(rows)}
        self.forecast = forecaster(windows.select(rows)) if len(rows) else None

    def answer(self, item: QAItem) -> str | None:
        if self.forecast is None or int(item.window) not in self.row_of:
            raise KeyError(f"tool reader: item {item.id} (window {item.window}) was not forecast")
        return read_answer(item, self.windows, sample_paths(self.forecast, self.row_of[int(item.window)]))


def ensemble_forecaster(path: str, n_samples: int = 100, seed: int = 0) -> Forecaster:
    """A saved TS encoder (``ts fit``'s ``pretrained/``, e.g. ``release/smollm2-135m/ts``) or a saved ensemble
    (``stockr1 bench forecast_search --save``): ``Forecaster.load`` reads both."""
    from forecast_action.forecaster import Forecaster as TSForecaster

    fc = TSForecaster.load(path)
    return lambda w: fc.forecast_windows(w, n_samples=n_samples, seed=seed)


def decoder_forecaster(decoder, seed: int = 0) -> Forecaster:
    """The action-conditioned decoder with no action, drawing its saved ``tool_samples`` paths."""
    import torch

    n = int(getattr(decoder, "tool_samples", 16) or 16)
    return lambda w: decoder.forecast(w, None, n_samples=n, generator=torch.Generator().manual_seed(seed))


def tool_reader_answer_fns(forecasters: Mapping[str, Forecaster], windows: Windows,
                           items: Sequence[QAItem]) -> dict[str, AnswerFn]:
    """``{name: answer_fn}`` of a ``ToolReader`` per forecaster, each forecasting ``items``' windows once."""
    return {name: ToolReader(f, windows, items).answer for name, f in forecasters.items()}
