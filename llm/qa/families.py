"""Question templates for the five Stock-R1 task families (§4.1, App. A.4).

Each template renders its text from the decision-time state only (``Decision`` + params) and
computes its answer from a future ``Path``. The App. A.4 examples are here verbatim in spirit
(``*_paper`` keys) beside more of the same kind.

Choices made where the paper is silent (tested in tests/test_qa_generator.py):
- "drop/rise more than k% ... within x days" is judged on the daily *close* path, so the answer is
  computable from the decoder's close trajectory exactly as from the realised future.
- "stay positive" means the close-to-close cumulative return at day x is > 0.
- "higher/lower volatility" compares the std of daily close log returns over the next x days with
  the same statistic over the last x days of history.
- On an index (no company filings) "Fundamental QA" is macro-conditioned, as in the paper's
  yield-spread examples: Treasury-yield templates where the context has 2Y/10Y yields, otherwise
  the same questions conditioned on whichever macro indicator the point-in-time store has (the
  offline sample: Baa-Aaa default spread, crude oil, core CPI). Templates that need a company
  fundamental are used only where the context has one, and those that need a channel the series
  lacks (the volume of a close-only stock: ``needs={"volume"}``) only where it has it.
- Numeric answers are in percent with an absolute tolerance that grows like sqrt(x).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from llm.qa.core import (
    NO,
    YES,
    AnswerFn,
    AnswerType,
    Decision,
    Path,
    cum_return_pct,
    future_vol,
    max_drawdown_pct,
)

Params = Mapping[str, Any]
FieldsFn = Callable[[Decision, Params], dict[str, Any]]


@dataclass(frozen=True)
class Template:
    key: str
    family: str
    answer_type: AnswerType
    text: str  # str.format over params + fields(decision, params)
    answer: AnswerFn
    grid: tuple[dict[str, Any], ...]
    choices: tuple[str, ...] = ()
    tolerance: Callable[[Params], float] | None = None
    needs: frozenset[str] = frozenset()  # subset of {"macro", "yields", "macro_prev", "news", "fundamentals", "volume"}
    fields: FieldsFn | None = None
    applies: Callable[[Decision], bool] | None = None  # extra decision-time precondition
    numeric_bins: tuple[int, int] = (-2, 1)  # first/last bin index of a numeric answer (see answer_class)

    def usable(self, d: Decision) -> bool:
        ctx = d.context
        have = {
            "macro": len(ctx.macro) > 0,
            "yields": {"2Y", "10Y"} <= set(ctx.macro),
            "macro_prev": len(set(ctx.macro) & set(ctx.macro_prev)) > 0,
            "news": len(ctx.news) > 0,
            "fundamentals": len(ctx.fundamentals) > 0,
            "volume": "volume" in d.channels,  # a close-only stock has no volume to ask about
        }
        return all(have[n] for n in self.needs) and (self.applies is None or self.applies(d))

    def render(self, d: Decision, params: Params) -> str:
        extra = self.fields(d, params) if self.fields else {}
        return self.text.format(**params, **extra)

    def tol(self, params: Params) -> float:
        return round(self.tolerance(params), 2) if self.tolerance else 0.0

    def balance_class(self, answer: str, params: Params) -> str:
        """The class rejection sampling balances: the answer itself, or a bin for numeric ones."""
        if self.answer_type != "numeric":
            return answer
        v, tol = float(answer), self.tol(params)
        if self.key.startswith("fq_mdd") or self.key.startswith("fq_max_gain"):
            return "small" if v <= 2 * tol else "large"
        return "pos" if v > 0 else "neg"

    def answer_classes(self) -> tuple[str, ...]:
        """Every class ``answer_class`` can return: the choices, or the numeric bins."""
        if self.answer_type != "numeric":
            return self.choices
        lo, hi = self.numeric_bins
        return tuple(f"bin{b}" for b in range(lo, hi + 1))

    def answer_class(self, answer: str, params: Params) -> str:
        """The class the generator balances within each (template, parameters) cell.

        Categorical: the answer. Numeric: ``floor(v / (2·tol))`` clipped to ``numeric_bins``: bins as
        wide as the set of answers one guess is graded correct on (±tol), so with equal counts per
        bin no fixed guess is within tolerance of much more than one bin's share of a cell (signed
        answers: <-2tol, [-2tol, 0), [0, 2tol), >=2tol; non-negative ones: [0, 2tol) ... >=6tol).
        """
        if self.answer_type != "numeric":
            return answer
        lo, hi = self.numeric_bins
        b = math.floor(float(answer) / (2 * self.tol(params)))
        return f"bin{min(hi, max(lo, b))}"


def _yn(b: bool) -> str:
    return YES if b else NO


def _grid(**axes: tuple[Any, ...]) -> tuple[dict[str, Any], ...]:
    keys = list(axes)
    out: list[dict[str, Any]] = [{}]
    for k in keys:
        out = [{**o, k: v} for o in out for v in axes[k]]
    return tuple(out)


X = (3, 5, 7, 10)


def _sqrt_tol(scale: float) -> Callable[[Params], float]:
    return lambda p: scale * math.sqrt(p["x"])


# --- decision-time fields ---------------------------------------------------------------------


def _macro_fields(d: Decision, p: Params) -> dict[str, Any]:
    m = d.context.macro
    short = "3M" if "3M" in m else ("1M" if "1M" in m else "2Y")
    spread = m["10Y"] - m["2Y"]
    return {
        "y2": m["2Y"], "y10": m["10Y"], "spread": spread, "short": short, "ys": m[short],
        "curve": "inverted" if m[short] > m["10Y"] else "not inverted",
    }


MACRO_PREFERENCE = ("10Y", "default_spread", "wti", "baa", "core_cpi", "vix")


def pick_macro(names: set[str]) -> str:
    """The headline indicator among ``names``: the first of ``MACRO_PREFERENCE`` present, else the first by name."""
    return next((m for m in MACRO_PREFERENCE if m in names), min(names))


def _any_macro_fields(d: Decision, p: Params) -> dict[str, Any]:
    """The headline macro indicator: the 10Y-2Y spread when yields exist, else the first available."""
    m = d.context.macro
    if {"2Y", "10Y"} <= set(m):
        return {"mdesc": f"10-year vs 2-year Treasury yield spread of {m['10Y'] - m['2Y']:+.2f} pp"}
    return {"mdesc": d.macro_text(pick_macro(set(m)))}


def _shift_fields(d: Decision, p: Params) -> dict[str, Any]:
    name = pick_macro(set(d.context.macro) & set(d.context.macro_prev))
    return {"mdesc": d.macro_text(name), "chg": d.context.macro[name] - d.context.macro_prev[name]}


def _news_fields(d: Decision, p: Params) -> dict[str, Any]:
    s = [n.sentiment for n in d.context.news]
    pos, neg = s.count("positive"), s.count("negative")
    top = d.context.news[0]
    return {
        "n": len(s), "pos": pos, "neg": neg, "neu": len(s) - pos - neg,
        "headline": top.headline, "hdate": top.date, "hsent": top.sentiment,
    }


def _mostly(sent: str) -> Callable[[Decision], bool]:
    def ok(d: Decision) -> bool:
        s = [n.sentiment for n in d.context.news]
        other = "positive" if sent == "negative" else "negative"
        return s.count(sent) > s.count(other)

    return ok


def _vol_fields(d: Decision, p: Params) -> dict[str, Any]:
    return {"pvol": 100 * d.past_vol(p["x"])}


def _signals_fields(d: Decision, p: Params) -> dict[str, Any]:
    """A one-line summary of whatever signals the context has (all stamped at or before t)."""
    parts = [f"{d.ticker} closed at {d.last_close:.2f} on {d.date}"]
    if d.context.macro:
        parts.append("the " + _any_macro_fields(d, p)["mdesc"])
    if d.context.news:
        s = [n.sentiment for n in d.context.news]
        parts.append(f"{s.count('positive')} of the {len(s)} latest headlines are positive")
    return {"signals": "; ".join(parts)}


# --- answer functions -------------------------------------------------------------------------


def _ret(path: Path, d: Decision, p: Params) -> float:
    return cum_return_pct(path, d, p["x"])


def _bucket3(v: float, b: float, labels: tuple[str, str, str]) -> str:
    return labels[0] if v < -b else (labels[2] if v > b else labels[1])


def _vol_change(path: Path, d: Decision, p: Params, labels: tuple[str, str]) -> str:
    return labels[0] if future_vol(path, d, p["x"]) > d.past_vol(p["x"]) else labels[1]


def _peak_bin(path: Path, d: Decision, p: Params) -> str:
    j = int(np.argmax(path.close[:10]))  # 0-based day index
    n = min(10, path.horizon)
    return "early" if j < n * 0.3 else ("middle" if j < n * 0.7 else "late")


RET_BUCKETS = ("below", "between", "above")
STRATEGY = ("scale-out", "stay-flat", "scale-in")
DIRECTION = ("down", "flat", "up")

TEMPLATES: tuple[Template, ...] = (
    # ---- Forecast QA -------------------------------------------------------------------------
    Template(
        "fq_pct_change_paper", "forecast", "numeric",
        "What will be the percentage change in the closing price over the next {x} trading days?",
        lambda path, d, p: f"{_ret(path, d, p):.2f}", _grid(x=X), tolerance=_sqrt_tol(0.35),
    ),
    Template(
        "fq_mdd_paper", "forecast", "numeric",
        "What will be the maximum drawdown (in %) of the closing price within the next {x} trading days?",
        lambda path, d, p: f"{max_drawdown_pct(path, d, p['x']):.2f}", _grid(x=X), tolerance=_sqrt_tol(0.3),
        numeric_bins=(0, 3),
    ),
    Template(
        "fq_max_gain", "forecast", "numeric",
        "By how many percent will the highest close of the next {x} trading days exceed today's close "
        "of {last:.2f}? (Answer 0 if no close is above it.)",
        lambda path, d, p: f"{max(0.0, 100 * (float(np.max(path.close[:p['x']])) / d.last_close - 1)):.2f}",
        _grid(x=X), tolerance=_sqrt_tol(0.3), fields=lambda d, p: {"last": d.last_close}, numeric_bins=(0, 3),
    ),
    Template(
        "fq_return_bucket", "forecast", "choice",
        "Over the next {x} trading days, will the cumulative return be below -{b}%, between -{b}% and "
        "{b}%, or above {b}%? Answer with one of: below, between, above.",
        lambda path, d, p: _bucket3(_ret(path, d, p), p["b"], RET_BUCKETS),
        _grid(x=X, b=(1.0, 2.0)), choices=RET_BUCKETS,
    ),
    # ---- Event Detection ---------------------------------------------------------------------
    Template(
        "ev_drop_paper", "event", "yes_no",
        "Will the stock drop more than {k}% from today's close within the next {x} days?",
        lambda path, d, p: _yn(float(np.min(path.close[:p["x"]])) < d.last_close * (1 - p["k"] / 100)),
        _grid(x=X, k=(1, 2, 3, 5)), choices=(YES, NO),
    ),
    Template(
        "ev_rise_paper", "event", "yes_no",
        "Will the stock rise more than {k}% above today's close within the next {x} days?",
        lambda path, d, p: _yn(float(np.max(path.close[:p["x"]])) > d.last_close * (1 + p["k"] / 100)),
        _grid(x=X, k=(1, 2, 3, 5)), choices=(YES, NO),
    ),
    Template(
        "ev_close_above", "event", "yes_no",
        "Will the stock close above today's close of {last:.2f} on trading day {x} from now?",
        lambda path, d, p: _yn(float(path.close[p["x"] - 1]) > d.last_close),
        _grid(x=X), choices=(YES, NO), fields=lambda d, p: {"last": d.last_close},
    ),
    Template(
        "ev_new_high", "event", "yes_no",
        "Will the stock close above its highest close of the past {w} trading days ({hi:.2f}) within the "
        "next {x} days?",
        lambda path, d, p: _yn(float(np.max(path.close[:p["x"]])) > float(np.max(d.close[-p["w"]:]))),
        _grid(x=X, w=(20, 60)), choices=(YES, NO), fields=lambda d, p: {"hi": float(np.max(d.close[-p["w"]:]))},
    ),
    Template(
        "ev_volume_spike", "event", "yes_no",
        "Will daily volume exceed {m}x its 20-day average ({avg:,.0f}) on any of the next {x} days?",
        lambda path, d, p: _yn(float(np.max(path.volume[:p["x"]])) > p["m"] * d.avg_volume(20)),
        _grid(x=X, m=(1.2, 1.5)), choices=(YES, NO), fields=lambda d, p: {"avg": d.avg_volume(20)}, needs=frozenset({"volume"}),
    ),
    # ---- Fundamental QA (macro-conditioned on an index) ----------------------------------------
    Template(
        "fd_spread_vol_paper", "fundamental", "choice",
        "Given the current 10-year vs 2-year Treasury yield spread of {spread:+.2f} pp, is the stock predicted "
        "to have higher volatility or lower volatility in the next {x} days than in the past {x} days? "
        "Answer higher or lower.",
        lambda path, d, p: _vol_change(path, d, p, ("higher", "lower")),
        _grid(x=(5, 7, 10)), choices=("higher", "lower"), needs=frozenset({"yields"}), fields=_macro_fields,
    ),
    Template(
        "fd_inversion_return_paper", "fundamental", "yes_no",
        "The {short} Treasury yield is {ys:.2f}% and the 10-year yield is {y10:.2f}%, so the curve is {curve}. "
        "Will the stock's next-{x}-day cumulative return stay positive?",
        lambda path, d, p: _yn(_ret(path, d, p) > 0),
        _grid(x=X), choices=(YES, NO), needs=frozenset({"yields"}), fields=_macro_fields,
    ),
    Template(
        "fd_macro_vol", "fundamental", "choice",
        "Given the current {mdesc}, is the stock predicted to have higher volatility or lower volatility in the "
        "next {x} days than in the past {x} days? Answer higher or lower.",
        lambda path, d, p: _vol_change(path, d, p, ("higher", "lower")),
        _grid(x=(5, 7, 10)), choices=("higher", "lower"), needs=frozenset({"macro"}), fields=_any_macro_fields,
    ),
    Template(
        "fd_macro_return", "fundamental", "yes_no",
        "With the {mdesc}, will the stock's next-{x}-day cumulative return stay positive?",
        lambda path, d, p: _yn(_ret(path, d, p) > 0),
        _grid(x=X), choices=(YES, NO), needs=frozenset({"macro"}), fields=_any_macro_fields,
    ),
    Template(
        "fd_macro_shift", "fundamental", "yes_no",
        "The {mdesc} ({chg:+.2f} over the past month). Will the stock end the next {x} trading days above "
        "today's close?",
        lambda path, d, p: _yn(_ret(path, d, p) > 0),
        _grid(x=X), choices=(YES, NO), needs=frozenset({"macro_prev"}), fields=_shift_fields,
    ),
    Template(
        "fd_macro_drawdown", "fundamental", "yes_no",
        "With the {mdesc}, will the stock's maximum drawdown over the next {x} days exceed {k}%?",
        lambda path, d, p: _yn(max_drawdown_pct(path, d, p["x"]) > p["k"]),
        _grid(x=X, k=(1, 2, 3)), choices=(YES, NO), needs=frozenset({"macro"}), fields=_any_macro_fields,
    ),
    Template(
        "fd_leverage_return", "fundamental", "yes_no",
        "The latest quarterly filing shows a liabilities-to-equity ratio of {le:.2f}. Will the stock's "
        "next-{x}-day cumulative return stay positive?",
        lambda path, d, p: _yn(_ret(path, d, p) > 0),
        _grid(x=X), choices=(YES, NO), needs=frozenset({"fundamentals"}),
        fields=lambda d, p: {"le": float(d.context.fundamentals.get("liabilities_to_equity", float("nan")))},
        applies=lambda d: "liabilities_to_equity" in d.context.fundamentals,
    ),
    # ---- News Analysis -----------------------------------------------------------------------
    Template(
        "nw_headlines_return_paper", "news", "yes_no",
        "Given the {n} most recent headlines ({pos} positive, {neg} negative, {neu} neutral), will the "
        "stock's {x}-day cumulative return stay positive?",
        lambda path, d, p: _yn(_ret(path, d, p) > 0),
        _grid(x=X), choices=(YES, NO), needs=frozenset({"news"}), fields=_news_fields,
    ),
    Template(
        "nw_negative_recover_paper", "news", "yes_no",
        "Most recent news sentiment is negative ({neg} of {n} headlines). Will the stock still recover "
        "above today's price within {x} days?",
        lambda path, d, p: _yn(float(np.max(path.close[:p["x"]])) > d.last_close),
        _grid(x=X), choices=(YES, NO), needs=frozenset({"news"}), fields=_news_fields,
        applies=_mostly("negative"),
    ),
    Template(
        "nw_positive_fall", "news", "yes_no",
        "Most recent news sentiment is positive ({pos} of {n} headlines). Will the stock still close more "
        "than {k}% below today's price at some point within {x} days?",
        lambda path, d, p: _yn(float(np.min(path.close[:p["x"]])) < d.last_close * (1 - p["k"] / 100)),
        _grid(x=X, k=(1, 2)), choices=(YES, NO), needs=frozenset({"news"}), fields=_news_fields,
        applies=_mostly("positive"),
    ),
    Template(
        "nw_headline_direction", "news", "choice",
        "The latest headline ({hdate}, sentiment {hsent}) reads: \"{headline}\". Over the next {x} days will "
        "the stock move down (below -{b}%), stay flat (within ±{b}%), or move up (above {b}%)? Answer down, "
        "flat or up.",
        lambda path, d, p: _bucket3(_ret(path, d, p), p["b"], DIRECTION),
        _grid(x=X, b=(1.0, 2.0)), choices=DIRECTION, needs=frozenset({"news"}), fields=_news_fields,
    ),
    # ---- Multi-signal Reasoning --------------------------------------------------------------
    Template(
        "ms_vol_direction_paper", "multi_signal", "choice",
        "Given the current market conditions ({signals}; realised daily volatility over the past {x} days "
        "{pvol:.2f}%), will the stock's volatility over the next {x} days rise or fall? Answer rise or fall.",
        lambda path, d, p: _vol_change(path, d, p, ("rise", "fall")),
        _grid(x=(5, 7, 10)), choices=("rise", "fall"),
        fields=lambda d, p: {**_signals_fields(d, p), **_vol_fields(d, p)},
    ),
    Template(
        "ms_strategy_paper", "multi_signal", "choice",
        "Combining macro shifts, news flow, and price forecasts ({signals}), will you recommend a scale-in, "
        "scale-out, or stay-flat strategy for the next {x} days? (scale-in if the return exceeds {b}%, "
        "scale-out if it is below -{b}%, otherwise stay-flat)",
        lambda path, d, p: _bucket3(_ret(path, d, p), p["b"], STRATEGY),
        _grid(x=(5, 10), b=(1.0, 2.0)), choices=STRATEGY, fields=_signals_fields,
    ),
    Template(
        "ms_up_with_bounded_risk", "multi_signal", "yes_no",
        "Considering trend, macro backdrop and news ({signals}), will the stock end the next {x} days higher "
        "while never closing more than {k}% below today's close?",
        lambda path, d, p: _yn(
            _ret(path, d, p) > 0 and float(np.min(path.close[:p["x"]])) >= d.last_close * (1 - p["k"] / 100)
        ),
        _grid(x=X, k=(1, 2)), choices=(YES, NO), fields=_signals_fields,
    ),
    Template(
        "ms_peak_timing", "multi_signal", "choice",
        "Weighing all signals ({signals}), when in the next 10 trading days will the highest close occur: "
        "early (days 1-3), middle (days 4-7) or late (days 8-10)?",
        _peak_bin, ({"x": 10},), choices=("early", "middle", "late"), fields=_signals_fields,
    ),
)

TEMPLATES_BY_KEY: dict[str, Template] = {t.key: t for t in TEMPLATES}


def templates_for(family: str) -> tuple[Template, ...]:
    return tuple(t for t in TEMPLATES if t.family == family)
