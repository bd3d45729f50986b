"""Cold-start SFT traces (Stock-R1 §3.4, App. A.3).

For each QA item a trace is: a rationale that cites the point-in-time context, the target action
a* = g(realised future), the decoder's trajectory *executed for a** (never the realised future: the
official code inserted the true future here, which the policy never sees at inference), final
reasoning that computes the answer from that trajectory, and ``<answer>…</answer>``. The reasoning
reads the trajectory *as the observation shows it* (``llm.qa.core.observed_path``: the rendered,
rounded numbers), so every number it writes can be derived from text the policy has seen.

Filter (reported in :class:`TraceReport`): drop a sample when the executed trajectory does not
support the target answer (the template's answer function on the observed path disagrees with the
truth), when the teacher's answer disagrees, or — optionally — when a trivial baseline (the
random-walk answer) already solves it.

Counterfactual traces (``TraceConfig.counterfactual``): in every kept trace the observation agrees
with the truth, so SFT cannot tell "answer what the trajectory says" from "answer the template's
usual answer", and a policy trained on them alone answered what its own observed trajectory implies
in only half of its test rollouts (results/qa, "own trajectory"). A counterfactual trace executes
another train item's a* instead, one whose observed path implies a *different* answer, and reasons
to that answer. Only its final reasoning is trained (the rationale and the action it executes are
masked: they do not describe this window's future), and its decoder target stays this window's a*.
The label is the observation's answer, never the realised one; it uses no future but that of train
windows, as a* itself does.

Teachers: :class:`TemplateTeacher` (offline, deterministic) and :class:`OpenAITeacher` (any
OpenAI-compatible ``/chat/completions`` endpoint; base URL, key and model from
``STOCKR1_TEACHER_BASE_URL`` / ``STOCKR1_TEACHER_API_KEY`` / ``STOCKR1_TEACHER_MODEL``).
"""

from __future__ import annotations

import json
import os
import re
import urllib.request
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path as FsPath
from typing import Any, Protocol

import numpy as np

from forecast_action.render import volume_scale
from llm.qa.answers import extract_answer, is_correct, normalize_answer
from llm.qa.baselines import random_walk_answer
from llm.qa.core import Decision, Path, QAItem, observed_path
from llm.qa.families import TEMPLATES_BY_KEY, pick_macro
from llm.qa.generator import ContextFn
from llm.qa.prompt import QUESTION, answer_options, question_line, user_message
from llm.special_tokens import ANSWER_CLOSE, ANSWER_OPEN
from stockr1.types import Windows


@dataclass(frozen=True)
class Trace:
    """One SFT sample. ``segments``: (text, written_by_model); tool observations have False."""

    item_id: str
    window: int
    user: str
    segments: tuple[tuple[str, bool], ...]
    action: dict[str, Any]  # a* as ForecastAction.present(): the decoder's L_TS target (also in a counterfactual trace)
    answer: str  # the trace's final answer: the truth, or in a counterfactual trace the observation's answer

    @property
    def completion(self) -> str:
        return "".join(s for s, _ in self.segments)


@dataclass
class TraceReport:
    n_items: int = 0
    kept: int = 0
    dropped: Counter = field(default_factory=Counter)  # reason -> count
    counterfactual: int = 0  # counterfactual traces written beside the kept ones
    counterfactual_skipped: Counter = field(default_factory=Counter)  # reason -> count

    def as_dict(self) -> dict:
        return {"n_items": self.n_items, "kept": self.kept, "dropped": dict(self.dropped),
                "counterfactual": self.counterfactual, "counterfactual_skipped": dict(self.counterfactual_skipped)}


class Teacher(Protocol):
    def rationale(self, user: str, item: QAItem, d: Decision, action_text: str) -> str: ...

    def reasoning(self, user: str, item: QAItem, d: Decision, before: str, observation: str, path: Path) -> str:
        """Final reasoning ending in ``<answer>…</answer>``."""
        ...


# --- offline template teacher -----------------------------------------------------------------


def _pct(a: float, b: float) -> float:
    return 100.0 * (a / b - 1.0)


def price_evidence(d: Decision) -> str:
    """The rationale's first sentence: ticker, date, last close, 5- and 20-session returns and 10-session
    volatility, from the price history alone. In a rebased frame (100 = the close of t) the close is a
    constant, so this sentence, not ``start_value``, is what shows a policy read its prompt
    (``llm.qa.evaluate.evidence_read_rate``)."""
    c = d.close
    return (f"{d.ticker} closed at {d.last_close:.2f} on {d.date}, {_pct(c[-1], c[-6]):+.2f}% over 5 sessions and "
            f"{_pct(c[-1], c[-21]):+.2f}% over 20; daily volatility over the last 10 sessions was "
            f"{100 * d.past_vol(10):.2f}%.")


def cite_context(d: Decision) -> str:
    """Sentences that cite the decision-time evidence: the close and its recent moves, the headline
    macro indicator (the 10Y-2Y spread where there are yields, else the first of ``MACRO_PREFERENCE``)
    and the sentiment count of the latest headlines.

    One indicator and no headline quote: a pretrained tokenizer spends one token per digit, and three
    macro values plus a quoted headline were ~80 of the rationale's ~180 tokens (``stockr1 bench tokens``)."""
    out = [price_evidence(d)]
    m = d.context.macro
    if {"2Y", "10Y"} <= set(m):
        out.append(f"The 10Y-2Y Treasury spread is {m['10Y'] - m['2Y']:+.2f} pp.")
    elif m:
        out.append(f"Macro: {d.macro_text(pick_macro(set(m)))}.")
    if d.context.news:
        s = [n.sentiment for n in d.context.news]
        out.append(f"Of the {len(s)} latest headlines {s.count('positive')} are positive and "
                   f"{s.count('negative')} negative.")
    return " ".join(out)


RECALL = QUESTION  # the final reasoning opens with the prompt's question line (`explain`)
# The protocol part of `explain`, as opposed to its arithmetic: the recalled question line and the closing
# sentence with the answer. ``train.emphasis`` up-weights these tokens in L_SFT (llm.sft.encode_trace).
PROTOCOL_SPANS = re.compile(
    rf"{re.escape(RECALL)}[^\n]*|So the answer \([^)]*\) is [^\n]*\n{re.escape(ANSWER_OPEN)}.*?{re.escape(ANSWER_CLOSE)}",
    re.S)


def explain(item: QAItem, d: Decision, path: Path) -> str:
    """Reasoning that computes the item's answer from ``path`` (the decoded trajectory).

    It opens by copying the prompt's question line verbatim (``RECALL`` + question + answer
    instruction, the same tokens as in the prompt). By then the question is ~490 tokens back. A small
    policy trained without a restatement wrote one reasoning template whatever was asked; one that
    restated only the answer instruction still picked the body (what to compute) by recalling the
    question from afar, got it wrong on ~1 in 8 held-out questions (2 in 3 numeric ones) and then
    closed with that other template's answer space (results/sft_recipe). Copying the whole line is one
    induction-style copy, and the body and the answer space then follow from text ~40 tokens back.
    The closing sentence names the answer space again ("So the answer (one of: rise, fall) is rise."),
    so the answer is written right after its type."""
    t = TEMPLATES_BY_KEY[item.template]
    p = item.params
    x = int(p.get("x", path.horizon))
    last = d.last_close
    ans = t.answer(path, d, p)
    # no re-listing of the trajectory: it sits just above, and copying x of its values was where the
    # tiny policy looped until the token limit (results/sft_recipe)
    head = f"Today's close is {last:.2f} and the horizon is {x} days."
    k = t.key
    if k.startswith("fq_mdd") or k == "fd_macro_drawdown":
        body = f"Tracking the running peak from {last:.2f}, the largest peak-to-trough fall is the maximum drawdown."
    elif k == "fq_max_gain" or k in ("ev_rise_paper", "nw_negative_recover_paper", "ev_new_high"):
        hi = float(np.max(path.close[:x]))
        body = f"The highest forecast close is {hi:.2f}, {_pct(hi, last):+.2f}% versus today."
    elif k in ("ev_drop_paper", "nw_positive_fall"):
        lo = float(np.min(path.close[:x]))
        body = f"The lowest forecast close is {lo:.2f}, {_pct(lo, last):+.2f}% versus today."
    elif k in ("fd_spread_vol_paper", "fd_macro_vol", "ms_vol_direction_paper"):
        lr = np.diff(np.log(np.concatenate([[last], path.close[:x]])))
        body = (f"The forecast daily volatility is {100 * float(np.std(lr)):.2f}% against "
                f"{100 * d.past_vol(x):.2f}% over the past {x} days.")
    elif k == "ev_volume_spike":  # in the observation's volume unit (3 significant figures)
        unit, name, dg = volume_scale(path.volume)
        name = f" {name}" if name else ""
        body = (f"The largest forecast volume is {float(np.max(path.volume[:x])) / unit:.{dg}f}{name} against "
                f"{p['m']}x the 20-day average = {p['m'] * d.avg_volume(20) / unit:.{dg + 1}f}{name}.")
    elif k == "ms_up_with_bounded_risk":
        c, lo = float(path.close[x - 1]), float(np.min(path.close[:x]))
        body = (f"The day-{x} close is {c:.2f} ({_pct(c, last):+.2f}%) and the lowest close is {lo:.2f} "
                f"({_pct(lo, last):+.2f}%) against a limit of -{p['k']}%.")
    elif k == "ms_peak_timing":
        body = f"The highest forecast close is on day {int(np.argmax(path.close[:x])) + 1} of {x}."
    else:
        c = float(path.close[x - 1])
        body = f"The day-{x} close is {c:.2f}, a cumulative return of ({c:.2f} - {last:.2f}) / {last:.2f} = {_pct(c, last):+.2f}%."
    return (f"{question_line(item)}\n{head} {body} So the answer ({answer_options(item)}) is {ans}."
            f"\n{ANSWER_OPEN}{ans}{ANSWER_CLOSE}")


class TemplateTeacher:
    """Deterministic offline teacher: cites the context, justifies a*, computes the answer."""

    def rationale(self, user: str, item: QAItem, d: Decision, action_text: str) -> str:
        return f"{cite_context(d)} Weighing this evidence I set the forecast action as follows.\n"

    def reasoning(self, user: str, item: QAItem, d: Decision, before: str, observation: str, path: Path) -> str:
        return explain(item, d, path)


# --- OpenAI-compatible teacher ----------------------------------------------------------------

ChatClient = Callable[[list[dict[str, str]]], str]


def http_chat_client(base_url: str, api_key: str, model: str, timeout: float = 120.0) -> ChatClient:
    """POST ``{base_url}/chat/completions`` (OpenAI wire format) and return the first message text."""

    def call(messages: list[dict[str, str]]) -> str:
        body = json.dumps({"model": model, "messages": messages, "temperature": 0.2}).encode()
        req = urllib.request.Request(
            base_url.rstrip("/") + "/chat/completions", data=body,
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {api_key}"},
        )
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())["choices"][0]["message"]["content"]

    return call


class OpenAITeacher:
    """Distil traces from a real LLM. ``client`` defaults to the endpoint named in the environment."""

    def __init__(self, client: ChatClient | None = None) -> None:
        if client is None:
            base = os.environ.get("STOCKR1_TEACHER_BASE_URL")
            key = os.environ.get("STOCKR1_TEACHER_API_KEY", "")
            if not base:
                raise ValueError("OpenAITeacher needs STOCKR1_TEACHER_BASE_URL (and STOCKR1_TEACHER_API_KEY)")
            client = http_chat_client(base, key, os.environ.get("STOCKR1_TEACHER_MODEL", "gpt-5"))
        self.client = client

    def rationale(self, user: str, item: QAItem, d: Decision, action_text: str) -> str:
        msg = (f"{user}\n\nWrite a concise market analysis (4-6 sentences) that cites the context above and "
               f"justifies this forecast outlook: {action_text}. Do not state future prices as facts and "
               f"do not answer the question yet.")
        return self.client([{"role": "user", "content": msg}]).strip() + "\n"

    def reasoning(self, user: str, item: QAItem, d: Decision, before: str, observation: str, path: Path) -> str:
        msg = (f"{user}\n\n{before}{observation}\n\nUsing only the forecast trajectory above, compute the "
               f"answer step by step and finish with {ANSWER_OPEN}your answer{ANSWER_CLOSE}. Begin with the line "
               f"'{question_line(item)}' and end with 'So the answer ({answer_options(item)}) is "
               f"X.' before the answer tags.")
        return self.client([{"role": "user", "content": msg}]).strip()


# --- the writer -------------------------------------------------------------------------------


@dataclass(frozen=True)
class TraceConfig:
    batch_size: int = 256
    drop_trivial: bool = True
    max_context_chars: int | None = None
    counterfactual: float = 0.0  # share of kept traces that also get a counterfactual trace (module docstring)
    counterfactual_tries: int = 8  # other items' a* tried, in a seeded random order, for a differing answer
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.counterfactual <= 1.0 or self.counterfactual_tries < 1:
            raise ValueError(f"traces.counterfactual must be in [0, 1] and counterfactual_tries >= 1, got "
                             f"{self.counterfactual}, {self.counterfactual_tries}")


class TraceWriter:
    """``TraceWriter(windows, tool, thresholds, teacher).write(items) -> (traces, report)``.

    ``tool`` is the rollout engine's ``llm.tools.ForecastTool`` (decoder + parser + renderer): the
    trace's observation is exactly what the tool returns at inference when the model writes a*.
    """

    def __init__(
        self, windows: Windows, tool: Any, thresholds: Any, teacher: Teacher | None = None,
        context_fn: ContextFn | None = None, ts_placeholder: str = "", cfg: TraceConfig | None = None,
    ) -> None:
        from llm.qa.generator import QAGenerator

        self.windows, self.tool, self.thresholds = windows, tool, thresholds
        self.teacher = teacher or TemplateTeacher()
        self.ts_placeholder = ts_placeholder
        self.cfg = cfg or TraceConfig()
        self._gen = QAGenerator(windows, context_fn)

    def context_text(self, i: int) -> str:
        ctx = self.windows.context
        return str(ctx[i]) if len(ctx) == len(self.windows) else ""

    def target_actions(self, idx: Sequence[int]) -> list:
        from forecast_action.derive import derive_actions
        from stockr1.types import CLOSE

        idx = np.asarray(idx)
        return derive_actions(self.windows.future[idx, :, CLOSE], self.windows.last_close[idx], self.thresholds)

    def write(self, items: Sequence[QAItem]) -> tuple[list[Trace], TraceReport]:
        """Traces of ``items`` (in order), then the counterfactual ones (``report.counterfactual``)."""
        report = TraceReport(n_items=len(items))
        traces: list[Trace] = []
        kept: list[tuple[QAItem, Any]] = []
        for s in range(0, len(items), self.cfg.batch_size):
            batch = list(items[s : s + self.cfg.batch_size])
            actions = self.target_actions([it.window for it in batch])
            results = self.tool.call_batch([it.window for it in batch], [a.to_text() for a in actions])
            for it, a, res in zip(batch, actions, results, strict=True):
                tr = self._one(it, a, res, report)
                if tr is not None:
                    traces.append(tr)
                    kept.append((it, a))
        report.kept = len(traces)
        if self.cfg.counterfactual > 0 and len(kept) > 1:
            cf = self.counterfactuals(kept, report)
            report.counterfactual = len(cf)
            traces += cf
        return traces, report

    def counterfactuals(self, kept: Sequence[tuple[QAItem, Any]], report: TraceReport) -> list[Trace]:
        """For a seeded ``counterfactual`` share of ``kept`` (item, a*) pairs: execute another kept item's
        a* on this item's window, tried in a random order, and keep the first whose observed path implies
        an answer other than the truth; the trace reasons to that answer (module docstring)."""
        rng = np.random.default_rng(self.cfg.seed)
        chosen = rng.choice(len(kept), size=round(self.cfg.counterfactual * len(kept)), replace=False)
        out = []
        for k in sorted(chosen):
            it, target = kept[k]
            others = [j for j in rng.permutation(len(kept)) if j != k][: self.cfg.counterfactual_tries]
            alts = [kept[j][1] for j in others]
            results = self.tool.call_batch([it.window] * len(alts), [a.to_text() for a in alts])
            d = self._gen.decision(it.window)
            t = TEMPLATES_BY_KEY[it.template]
            for alt, res in zip(alts, results, strict=True):
                if res.error is not None or getattr(res.payload, "forecast", None) is None:
                    continue
                path = observed_path(res.observation)
                ans = t.answer(path, d, it.params)
                if is_correct(it, ans):
                    continue  # this action's trajectory agrees with the truth: it teaches nothing new
                user, before, after = self._compose(it, d, alt, res.observation, path)
                if normalize_answer(it, extract_answer(after)) != normalize_answer(it, ans):
                    report.counterfactual_skipped["teacher_disagrees"] += 1
                    break
                out.append(Trace(it.id, it.window, user, ((before, False), (res.observation, False), (after, True)),
                                 target.present(), str(ans)))
                break
            else:
                report.counterfactual_skipped["every_try_agrees"] += 1
        return out

    def _compose(self, it: QAItem, d: Decision, action: Any, observation: str, path: Path) -> tuple[str, str, str]:
        """(prompt, rationale + executed action block, final reasoning) of one trace."""
        user = user_message(it, self.context_text(it.window), self.ts_placeholder, self.cfg.max_context_chars)
        before = self.teacher.rationale(user, it, d, action.to_text()) + action.to_block()
        return user, before, self.teacher.reasoning(user, it, d, before, observation, path)

    def _one(self, it: QAItem, action: Any, res: Any, report: TraceReport) -> Trace | None:
        fc = getattr(res.payload, "forecast", None)
        if res.error is not None or fc is None:
            report.dropped["tool_error"] += 1
            return None
        d = self._gen.decision(it.window)
        # the trace reasons from what the policy reads: the observation's numbers, rounded as rendered
        path = observed_path(res.observation)
        t = TEMPLATES_BY_KEY[it.template]
        if not is_correct(it, t.answer(path, d, it.params)):
            report.dropped["trajectory_contradicts_answer"] += 1
            return None
        if self.cfg.drop_trivial and is_correct(it, random_walk_answer(it, self.windows, d.context)):
            report.dropped["trivial_random_walk"] += 1
            return None
        user, before, after = self._compose(it, d, action, res.observation, path)
        if not is_correct(it, normalize_answer(it, extract_answer(after))):
            report.dropped["teacher_answer_wrong"] += 1
            return None
        return Trace(it.id, it.window, user, ((before, True), (res.observation, False), (after, True)),
                     action.present(), it.answer)


def save_traces(traces: Sequence[Trace], path: str | FsPath) -> FsPath:
    path = FsPath(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for t in traces:
            f.write(json.dumps({**asdict(t), "segments": [list(s) for s in t.segments]}) + "\n")
    return path


def load_traces(path: str | FsPath) -> list[Trace]:
    out = []
    for n, line in enumerate(FsPath(path).read_text().splitlines(), 1):
        if line.strip():
            try:
                d = json.loads(line)
                out.append(Trace(**{**d, "segments": tuple((s, bool(m)) for s, m in d["segments"])}))
            except (json.JSONDecodeError, TypeError, KeyError, ValueError) as e:
                raise ValueError(f"{path}:{n}: not a trace record ({e})") from e
    return out
