"""The prompt every stage shares (SFT, rollouts, GRPO, benchmarks): system protocol + user turn.

The user turn carries the point-in-time context text (``Windows.context`` / ``render_context``),
``K`` time-series placeholders that the policy replaces with projected encoder tokens, and the
question. Nothing here may depend on the future: it is built from a ``QAItem`` (question text is
decision-time only) and the context string of the same window.
"""

from __future__ import annotations

from llm.qa.core import QAItem

SYSTEM_PROMPT = (
    "You are a financial analyst. Read the market context, reason briefly, then call the forecasting "
    "tool once with a structured action <forecast_action>{...}</forecast_action>. The tool returns the "
    "forecast trajectory in <forecast_ts>...</forecast_ts>. Compute the answer from that trajectory and "
    "finish with <answer>...</answer>."
)


def answer_options(item: QAItem) -> str:
    """The answer space in words ("Yes or No", "one of: a, b", "a number in percent"): the core of
    ``answer_instruction``, which the SFT traces repeat next to the answer."""
    if item.answer_type == "yes_no":
        return "Yes or No"
    if item.answer_type == "choice":
        return "one of: " + ", ".join(item.choices)
    return "a number in percent"


def answer_instruction(item: QAItem) -> str:
    """The prompt's last sentence, e.g. "Answer with one of: rise, fall." (numeric: with its tolerance)."""
    if item.answer_type == "yes_no":
        return f"Answer {answer_options(item)}."
    if item.answer_type == "choice":
        return f"Answer with {answer_options(item)}."
    return f"Answer with {answer_options(item)} (tolerance ±{item.tolerance:.2f})."


QUESTION = "Question: "


def question_line(item: QAItem) -> str:
    """The prompt's last line: question + answer instruction. SFT traces restate it, verbatim, after the
    tool's observation (``llm.traces.explain``)."""
    return f"{QUESTION}{item.question} {answer_instruction(item)}"


def trim_context(text: str, max_chars: int | None) -> str:
    """Keep whole lines up to ``max_chars`` (the context block starts with company, macro, then news,
    so a short budget keeps the macro snapshot and the latest headlines). None = no limit."""
    text = text.strip()
    if max_chars is None or len(text) <= max_chars:
        return text
    cut = text.rfind("\n", 0, max_chars)
    return text[: cut if cut > 0 else max_chars]


def header_fields(item: QAItem) -> dict[str, str]:
    """The prompt's first line as ``{label: value}``, in order. One place to add a field (e.g. the price
    frame and the last close): ``header_line`` renders it and ``user_message`` drops the context lines
    that repeat one of them."""
    return {"Ticker": item.ticker, "Date": item.date}


def header_line(fields: dict[str, str]) -> str:
    """``{"Ticker": "SP500", "Date": "2009-09-29"}`` -> ``Ticker: SP500  Date: 2009-09-29``."""
    return "  ".join(f"{k}: {v}" for k, v in fields.items())


def drop_repeated(context_text: str, fields: dict[str, str]) -> str:
    """The context without lines that only repeat a header field (the data layer's block opens with
    ``Ticker: X`` and ``Date: Y`` lines: ~20 tokens said twice in every prompt)."""
    repeated = {f"{k}: {v}" for k, v in fields.items()}
    return "\n".join(ln for ln in context_text.strip().splitlines() if ln.strip() not in repeated)


def user_message(item: QAItem, context_text: str = "", ts_placeholder: str = "",
                 max_context_chars: int | None = None) -> str:
    """header + context [+ time-series tokens] + question. ``ts_placeholder`` is e.g. ``ts_placeholders(K)``;
    ``max_context_chars`` trims the context after the header's repeats are dropped (the CPU configs use it
    to keep sequences short)."""
    fields = header_fields(item)
    parts = [header_line(fields)]
    if context_text:
        parts.append(trim_context(drop_repeated(context_text, fields), max_context_chars))
    if ts_placeholder:
        parts.append(f"Price history (encoded): {ts_placeholder}")
    parts.append(question_line(item))
    return "\n".join(parts)
