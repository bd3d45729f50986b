"""`ForecastTool`: the Stock-R1 tool. Parses the model's ``<forecast_action>`` text, runs the
action-conditioned decoder on that sample's history, and returns the ``<forecast_ts>`` observation.

Malformed action (the parser found no usable field): the decoder still runs *unconditioned*
(action None) and the observation carries both the error and that trajectory, so the model can
finish its answer and the reward scores the failed action (`Rollout.action` is None, the parser's
errors are in `Rollout.action_errors`). A decoder that raises yields an error-only observation.

``sample_ref`` is an int index into the tool's ``windows`` or a one-row `Windows`.

The tool is a pure function of (decoder, window, action): each row's sample paths come from a
generator seeded by ``(seed, the window's raw history up to t, canonical action)`` and the decoder runs
one row at a time, so the same window and action render byte-identical text in SFT traces, RL
rollouts and evaluation, whatever else was in the batch or was called before (a shared generator,
or the global torch RNG, made two identical `bench qa` runs differ). The number of sample paths is
the decoder's ``tool_samples`` (saved with it), so no stage can draw a different number.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from forecast_action.decoder import concat_forecasts
from llm.rollout import FORECAST_TOOL_NAME, ToolResult
from llm.special_tokens import (
    FORECAST_ACTION_CLOSE,
    FORECAST_ACTION_OPEN,
    FORECAST_TS_CLOSE,
    FORECAST_TS_OPEN,
)
from stockr1.distributed import full_precision
from stockr1.types import Forecast, Windows


@dataclass(frozen=True)
class ForecastObservation:
    """Payload of one forecast call. forecast: the one-row decoded `Forecast` (None if it failed)."""

    action: Any  # forecast_action.schema.ForecastAction | None
    errors: list = field(default_factory=list)
    forecast: Forecast | None = None
    uncertainty: float | None = None


def forecast_row(fc: Forecast, i: int) -> Forecast:
    """Row ``i`` of a batched Forecast as a one-row Forecast."""
    unc = fc.uncertainty[i : i + 1] if fc.uncertainty is not None else None
    return Forecast(fc.close[i : i + 1], fc.close_samples[i : i + 1], fc.high[i : i + 1], fc.low[i : i + 1],
                    fc.volume[i : i + 1], unc)


def concat_windows(parts: Sequence[Windows]) -> Windows:
    """Stack Windows row-wise (context kept only when every part has one per row)."""
    has_ctx = all(len(w.context) == len(w) for w in parts)
    return Windows(
        ticker=np.concatenate([w.ticker for w in parts]),
        date=np.concatenate([w.date for w in parts]),
        x=np.concatenate([w.x for w in parts]),
        y=np.concatenate([w.y for w in parts]),
        hist=np.concatenate([w.hist for w in parts]),
        future=np.concatenate([w.future for w in parts]),
        split=np.concatenate([w.split for w in parts]),
        context=np.concatenate([w.context for w in parts]) if has_ctx else np.array([], dtype=object),
        channels=np.concatenate([w.channels for w in parts]),
    )


def _wrap(obs: str) -> str:
    obs = obs.strip("\n")
    if not obs.startswith(FORECAST_TS_OPEN):
        obs = f"{FORECAST_TS_OPEN}{obs}{FORECAST_TS_CLOSE}"
    return f"\n{obs}\n"


class ForecastTool:
    """decoder: anything with ``.forecast(windows, actions, n_samples, generator) -> Forecast``
    (`forecast_action.decoder.ActionConditionedDecoder`). ``parse``/``render`` default to
    `forecast_action.parser.parse_action` and `forecast_action.render.render_observation` in the layout
    the decoder carries (``decoder.observation``; ``full`` for a test double without one).
    ``seed``: of the tool's sample generator (None: torch's global RNG)."""

    name = FORECAST_TOOL_NAME
    open_tag = FORECAST_ACTION_OPEN
    close_tag = FORECAST_ACTION_CLOSE

    def __init__(
        self,
        decoder,
        windows: Windows | None = None,
        n_samples: int | None = None,
        parse: Callable[[str], Any] | None = None,
        render: Callable[..., str] | None = None,
        seed: int | None = 0,
    ):
        """``n_samples``: None = the decoder's ``tool_samples`` (what every pipeline stage uses); an int
        only for decoders that carry none (test doubles, baselines). ``seed`` None: torch's global RNG."""
        if parse is None:
            from forecast_action.parser import parse_action as parse
        if render is None:  # the layout the decoder carries (saved with it): what its policy was trained on
            from functools import partial

            from forecast_action.render import FULL, render_observation

            render = partial(render_observation, style=getattr(decoder, "observation", FULL))
        if n_samples is None:
            n_samples = getattr(decoder, "tool_samples", None)
            if n_samples is None:
                raise ValueError(f"{type(decoder).__name__} has no tool_samples: pass n_samples")
        self.decoder, self.windows, self.n_samples, self.seed = decoder, windows, int(n_samples), seed
        self.parse, self.render = parse, render

    def row_generator(self, windows: Windows, i: int, action: Any) -> torch.Generator | None:
        """The CPU generator of row ``i`` (the decoder samples on the CPU, ts_encoder.sampling):
        seeded from the tool seed, the window's history (days <= t) and the canonical action."""
        if self.seed is None:
            return None
        key = action.model_dump_json(exclude_none=True) if hasattr(action, "model_dump_json") else repr(action)
        h = hashlib.blake2b(digest_size=8)
        for part in (str(self.seed), key):
            h.update(part.encode() + b"\0")
        h.update(np.ascontiguousarray(windows.hist[i], dtype=np.float64).tobytes())  # raw OHLCV <= t
        return torch.Generator().manual_seed(int.from_bytes(h.digest(), "little") & (2**63 - 1))

    def __call__(self, sample_ref: Any, call_text: str) -> ToolResult:
        return self.call_batch([sample_ref], [call_text])[0]

    def _windows(self, refs: Sequence[Any]) -> Windows:
        if all(isinstance(r, Windows) for r in refs):
            return concat_windows(list(refs))
        if self.windows is None:
            raise ValueError("ForecastTool got int sample_refs but was built without `windows`")
        try:
            return self.windows.select(np.asarray(refs, dtype=int))
        except (TypeError, ValueError, IndexError) as e:
            raise ValueError(f"ForecastTool: sample_refs must be ints into windows (n={len(self.windows)}) "
                             f"or one-row Windows; got {refs!r}") from e

    def call_batch(self, sample_refs: Sequence[Any], call_texts: Sequence[str]) -> list[ToolResult]:
        """One decoder call for all rows: [n] refs and call texts -> [n] ToolResults."""
        parsed = [self.parse(t) for t in call_texts]
        actions = [p.action for p in parsed]
        errors = [list(p.errors) for p in parsed]
        windows = self._windows(sample_refs)  # a bad ref is the caller's bug: raise, don't hide it
        try:  # one row per call: a row's forecast never depends on its batch neighbours
            with full_precision():
                fc = concat_forecasts([
                    self.decoder.forecast(windows.select(np.array([i])), [a], self.n_samples,
                                          generator=self.row_generator(windows, i, a))
                    for i, a in enumerate(actions)])
        except Exception as e:  # the decoder failing must not lose the rollout
            msg = f"decoder failed: {type(e).__name__}: {e}"
            return [ToolResult(_wrap(f"error: {msg}"), ForecastObservation(a, errs + [msg]), error=msg)
                    for a, errs in zip(actions, errors, strict=True)]
        out = []
        for i, (a, errs) in enumerate(zip(actions, errors, strict=True)):
            err = None if a is not None else (
                "invalid forecast action (" + ("; ".join(_msg(e) for e in errs) or "no fields")
                + "); this is the unconditioned forecast")
            row = forecast_row(fc, i)
            unc = float(row.uncertainty[0]) if row.uncertainty is not None else None
            obs = _wrap(self.render(fc, i, error=err))
            out.append(ToolResult(obs, ForecastObservation(a, errs, row, unc), error=err))
        return out


def _msg(e: Any) -> str:
    return getattr(e, "message", None) or str(e)
