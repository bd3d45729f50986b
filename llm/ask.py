"""Ask a trained Stock-R1 policy a question about the trading days after the end of your own data.

The whole Stock-R1 path on one series: the last ``lookback + 1`` rows of an OHLCV frame become the
decision window (``forecast_action.forecaster.inference_window``: the training features, adjusted as of
the last row, no future rows), the policy reads the same prompt as in SFT, GRPO and ``bench qa``
(``llm.qa.prompt``), writes its rationale and a forecast action, the run's saved decoder turns the
action into a trajectory (``llm.tools.ForecastTool``, the text every stage renders), and the policy
answers. Greedy, so the same inputs give the same answer. The trajectory is dated on the exchange's
trading days (``stockr1.data.calendar``; ``exchange="auto"``: the source's declared exchange, else inferred
from the series' own dates, else weekdays), and ``Answer.calendar`` says which.

A run directory is any finished ``stockr1 sft`` or ``stockr1 grpo`` run: ``policy/`` + ``decoder/``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from llm.qa.core import QAItem
from stockr1.data.calendar import AUTO, TradingCalendar, calendars_for
from stockr1.data.sources.frames import present_channels
from stockr1.types import CHANNELS, Windows

ANSWER_TYPES = ("yes_no", "choice", "numeric")


@dataclass(frozen=True)
class Answer:
    """What the policy wrote, and what the tool returned. ``trajectory``: one row per future trading
    day (date, close mean and its 5/50/95% sample quantiles, high q0.95, low q0.05, volume); empty when
    the action could not be decoded. ``calendar``: what the dates count (a MIC, or "weekdays (<why>)")."""

    ticker: str
    decision_date: str
    question: str
    rationale: str
    action: dict[str, Any] | None
    action_errors: list[str]
    uncertainty: float | None
    answer: str | None
    completion: str
    trajectory: list[dict[str, Any]] = field(default_factory=list)
    calendar: str = ""
    price_frame: str = ""  # e.g. "as traded on 2024-05-31" (stockr1.data.price_frame.describe)
    last_close: float | None = None  # the close of the decision day in that frame

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def render(self) -> str:
        """Human-readable: rationale, action, trajectory table, answer."""
        lines = [f"{self.ticker} as of {self.decision_date}: {self.question}",
                 *([f"Prices {self.price_frame}; last close {self.last_close:.2f}"] if self.last_close is not None else []),
                 "", "Rationale:",
                 self.rationale.strip() or "(none)", "", "Forecast action:"]
        import json

        lines.append(json.dumps(self.action) if self.action is not None
                     else f"(not parseable: {', '.join(map(str, self.action_errors)) or 'no action'})")
        if self.trajectory:
            u = f"uncertainty U = {self.uncertainty:.2f}, " if self.uncertainty is not None else ""
            lines += ["", f"Decoded trajectory ({u}dated on {self.calendar or 'weekdays'}):",
                      "date        close_q0.05  close_mean  close_q0.95"]
            lines += [f"{r['date']}  {r['close_q0.05']:11.2f}  {r['close_mean']:10.2f}  {r['close_q0.95']:11.2f}"
                      for r in self.trajectory]
        lines += ["", f"Answer: {self.answer if self.answer is not None else '(none parseable)'}"]
        return "\n".join(lines)


def ask_context(frame: pd.DataFrame, ticker: str, notes: str = "") -> str:
    """The context block of the last row, rendered as every training prompt's is (``stockr1.data.render``:
    ticker, date, the price frame and last close), then the user's ``notes``. The frame is ``as_of_t``
    whatever the file's adjustment convention: its last row is t, so no later split or dividend can be
    in its prices."""
    from stockr1.data.context import PointInTimeStore

    as_of_t = frame.copy()
    as_of_t.attrs = {}  # as traded: the frame ends at t (see above)
    text = PointInTimeStore({ticker: as_of_t}).render_context(ticker, frame.index[-1])
    return f"{text}\n{notes.strip()}" if notes.strip() else text


def ask_window(frame: pd.DataFrame, lookback: int, horizon: int, ticker: str, context: str = "") -> Windows:
    """A one-row ``Windows`` whose decision day is the frame's last row. ``y`` / ``future`` are NaN:
    nothing after the last row exists, and nothing on this path may read it."""
    from forecast_action.forecaster import inference_window

    if len(frame) < lookback + 1:
        raise ValueError(f"{ticker}: {len(frame)} rows, the policy's encoder needs at least {lookback + 1} "
                         f"(lookback {lookback} + the previous close)")
    x, hist = inference_window(frame, lookback)
    ch = present_channels(frame)  # an absent channel (e.g. a Date + Close CSV) stays NaN and is masked
    if not np.isfinite(x[ch]).all():
        raise ValueError(f"{ticker}: non-finite log returns in the last {lookback + 1} rows")
    return Windows(ticker=np.array([ticker]), date=np.array([frame.index[-1]], dtype="datetime64[ns]"),
                   x=x[None], y=np.full((1, len(CHANNELS), horizon), np.nan, dtype=np.float32), hist=hist[None],
                   future=np.full((1, horizon, len(CHANNELS)), np.nan), split=np.array(["test"]),
                   context=np.array([context], dtype=object), channels=ch[None])


def question_item(question: str, ticker: str, date: str, answer_type: str = "yes_no",
                  choices: Sequence[str] = (), tolerance: float = 0.5) -> QAItem:
    """The user's question as a QA item (no answer: nobody knows it yet)."""
    if not question.strip():
        raise ValueError("the question is empty")
    if answer_type not in ANSWER_TYPES:
        raise ValueError(f"answer type must be one of {ANSWER_TYPES}, got {answer_type!r}")
    if (answer_type == "choice") != bool(choices):
        raise ValueError("--choices go with --answer-type choice (and choice needs at least two)")
    if answer_type == "choice" and len(choices) < 2:
        raise ValueError(f"a choice question needs at least two choices, got {list(choices)}")
    return QAItem(id="ask", family="user", template="user", question=question.strip(), answer="",
                  answer_type=answer_type, window=0, ticker=ticker, date=date, split="test",
                  choices=tuple(choices), tolerance=float(tolerance) if answer_type == "numeric" else 0.0)


def trajectory_rows(forecast, start: pd.Timestamp,
                    calendar: TradingCalendar = TradingCalendar()) -> list[dict[str, Any]]:
    """The decoded one-row ``Forecast`` as dated rows (``calendar``'s trading days after ``start``)."""
    s = forecast.close.shape[1]
    q05, q50, q95 = np.quantile(forecast.close_samples[0], [0.05, 0.5, 0.95], axis=0)
    return [{"date": str(d.date()), "close_mean": float(forecast.close[0, h]), "close_q0.05": float(q05[h]),
             "close_q0.5": float(q50[h]), "close_q0.95": float(q95[h]), "high_q0.95": float(forecast.high[0, h]),
             "low_q0.05": float(forecast.low[0, h]), "volume": float(forecast.volume[0, h])}
            for h, d in enumerate(calendar.days_after(start, s))]


def load_run(run_dir: str | Path):
    """(policy, decoder) of a finished SFT or GRPO run directory, in eval mode."""
    from forecast_action.decoder import ActionConditionedDecoder
    from llm.policy import Policy

    run_dir = Path(run_dir)
    missing = [d for d in ("policy", "decoder") if not (run_dir / d).is_dir()]
    if missing:
        raise FileNotFoundError(f"{run_dir} is not a finished stockr1 sft/grpo run: no {' or '.join(missing)}/")
    return Policy.from_pretrained(run_dir / "policy").eval(), ActionConditionedDecoder.load(run_dir / "decoder").eval()


def ask_prompt(tokenizer, item: QAItem, context: str, n_ts_tokens: int, max_context_chars: int | None = None) -> str:
    """The chat prompt of ``item``: the one SFT, GRPO and ``bench qa`` build (``llm.qa.prompt``)."""
    from llm.qa.prompt import SYSTEM_PROMPT, user_message
    from llm.special_tokens import ts_placeholders
    from llm.tokenizer import chat_prompt

    return chat_prompt(tokenizer, user_message(item, context, ts_placeholders(n_ts_tokens), max_context_chars),
                       SYSTEM_PROMPT)


def ask(policy, decoder, frames: Mapping[str, pd.DataFrame], question: str, answer_type: str = "yes_no",
        choices: Sequence[str] = (), tolerance: float = 0.5, context: str = "",
        max_new_tokens: int = 640, max_context_chars: int | None = None, tokenizer=None,
        exchange: str | Mapping[str, str] = AUTO, declared: Mapping[str, str | None] | None = None) -> list[Answer]:
    """One greedy Stock-R1 rollout per ticker of ``frames`` (normalised, quality-checked OHLCV frames).
    ``tokenizer``: the policy's (default ``policy.tokenizer``). ``exchange`` / ``declared``: the calendar
    of the trajectory's dates (``stockr1.data.calendar.calendars_for``)."""
    from llm.rollout import RolloutEngine
    from llm.special_tokens import FORECAST_ACTION_OPEN
    from llm.tools import ForecastTool

    cfg, tok = decoder.ts_cfg, tokenizer if tokenizer is not None else policy.tokenizer
    calendars = calendars_for(frames, exchange, declared)
    from stockr1.data.price_frame import describe
    from stockr1.types import AS_OF_T

    out = []
    for ticker, frame in frames.items():
        text = ask_context(frame, ticker, context)
        w = ask_window(frame, cfg.lookback, cfg.horizon, ticker, text)
        item = question_item(question, ticker, str(frame.index[-1].date()), answer_type, choices, tolerance)
        prompt = ask_prompt(tok, item, text, cfg.n_tokens, max_context_chars)
        engine = RolloutEngine(policy, tok, [ForecastTool(decoder, w)], max_new_tokens=max_new_tokens,
                               temperature=0.0, seed=0)
        with torch.no_grad():
            h_ts = decoder.encoder(torch.as_tensor(w.x), channels=torch.as_tensor(w.channels)).h_ts
            roll = engine.generate([prompt], h_ts, sample_refs=[0])[0]
        model_text = "".join(s.text for s in roll.segments if s.kind == "model")
        rationale = model_text.split(FORECAST_ACTION_OPEN, 1)[0]
        fc = roll.forecast
        out.append(Answer(ticker=ticker, decision_date=item.date, question=item.question, rationale=rationale,
                          action=roll.action.model_dump(exclude_none=True) if roll.action is not None else None,
                          action_errors=[str(e) for e in roll.action_errors] if roll.action is None else [],
                          uncertainty=None if roll.uncertainty is None else float(roll.uncertainty),
                          answer=roll.answer, completion=roll.completion,
                          trajectory=trajectory_rows(fc, frame.index[-1], calendars[ticker]) if fc is not None else [],
                          calendar=calendars[ticker].label, price_frame=describe(AS_OF_T, item.date),
                          last_close=float(w.last_close[0])))
    return out
