"""The default corpus of the offline tokenizer (``stockr1 tokenizer build``), deterministic, train
split only: the shared system prompt, the chat-formatted QA prompts (`llm.qa` generator on the
embedded sample, with context and ``<ts>`` placeholders), and SFT-style traces written by
`llm.traces.TraceWriter` around a *persistence* forecaster (flat path at the last close: no decoder
training needed and no future data touches the text), plus each item's target action block.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from forecast_action.derive import ActionThresholds, derive_actions
from llm.build import load_data
from llm.qa import QAConfig, generate_qa
from llm.qa.prompt import SYSTEM_PROMPT, user_message
from llm.special_tokens import ts_placeholders
from llm.tokenizer import format_chat
from llm.tools import ForecastTool
from llm.traces import TraceConfig, TraceWriter
from stockr1.types import CLOSE, Forecast, Windows, train_only


class PersistenceForecaster:
    """Flat forecast at the last close/volume: the decoder stand-in for corpus text."""

    def forecast(self, windows: Windows, actions: Sequence, n_samples: int, generator=None) -> Forecast:
        s = windows.y.shape[2]
        close = np.repeat(windows.last_close[:, None], s, 1)
        vol = np.repeat(windows.last_volume[:, None], s, 1)
        return Forecast(close, np.repeat(close[:, None], 2, 1), close, close, vol, None)


def default_corpus(n_items: int = 1500, k_ts: int = 8, seed: int = 0) -> list[str]:
    """The project's own prompt/answer text (see module docstring)."""
    windows, context_fn = load_data({"source": "sample"})
    items, _ = generate_qa(windows, QAConfig(n_train=n_items, n_val=0, n_test=0, seed=seed), context_fn)
    items = [it for it in items if it.split == "train"]
    thresholds = ActionThresholds.fit(train_only(windows))
    ctx = windows.context if len(windows.context) == len(windows) else None
    texts = [SYSTEM_PROMPT]
    for it in items:
        user = user_message(it, str(ctx[it.window]) if ctx is not None else "", ts_placeholders(k_ts))
        texts.append(format_chat([{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]))
    idx = np.array([it.window for it in items])
    for a in derive_actions(windows.future[idx, :, CLOSE], windows.last_close[idx], thresholds):
        texts.append(a.to_block())
    writer = TraceWriter(windows, ForecastTool(PersistenceForecaster(), windows, n_samples=2), thresholds,
                         context_fn=context_fn, ts_placeholder=ts_placeholders(k_ts), cfg=TraceConfig(drop_trivial=False))
    traces, _ = writer.write(items)
    texts += [t.completion for t in traces]
    return texts
