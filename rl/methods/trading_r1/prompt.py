"""Trading-R1 prompt: the structured data snapshot (§4.2, App. 7) and the thesis output format.

The snapshot is built from the data layer's ``PointInTimeStore`` only (``ohlcv_until``,
``fundamentals_asof``, ``news_before``, ``macro_asof``), so every number is stamped at or before t.
Technicals are the paper's Table 6 indicators computed with stockstats on ``ohlcv_until(t)``; each
is rendered in its own tag with its last ``n_days`` values (the paper uses 15; 5 keeps tiny models'
prompts short). Sentiment is the mean and count of the news items' sentiment scores.

``template_thesis`` writes a thesis in the required format from the snapshot and a label: the
offline stand-in for the paper's reverse-reasoning distillation, used as SFT warm-start targets.
Its quotes are copied from the prompt and its sources are the prompt's tag names, so it is
grounded by construction (it is a format teacher, not an analyst).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from rl.methods.trading_r1.labels import ACTIONS

# Table 6 of the paper: tag -> (stockstats column or None for a hand-computed Ichimoku line, purpose)
INDICATORS: dict[str, tuple[str | None, str]] = {
    "sma_50": ("close_50_sma", "medium-term trend"),
    "sma_200": ("close_200_sma", "long-term trend"),
    "ema_50": ("close_50_ema", "mid-term momentum"),
    "ema_10": ("close_10_ema", "short-term momentum"),
    "macd": ("macd", "EMA differential momentum"),
    "macd_signal": ("macds", "MACD signal line"),
    "macd_hist": ("macdh", "MACD histogram"),
    "ichimoku_cloud": ("ichimoku", "Ichimoku cloud"),
    "ichimoku_conversion": (None, "Ichimoku conversion line (9)"),
    "ichimoku_base": (None, "Ichimoku base line (26)"),
    "ichimoku_span_b": (None, "Ichimoku leading span B (52)"),
    "rsi": ("rsi", "overbought/oversold"),
    "kdj_k": ("kdjk", "stochastic K"),
    "kdj_d": ("kdjd", "stochastic D"),
    "kdj_j": ("kdjj", "stochastic J"),
    "cci": ("cci", "commodity channel index"),
    "roc": ("close_12_roc", "rate of change (12)"),
    "atr": ("atr", "average true range"),
    "atr_5": ("atr_5", "short average true range"),
    "zscore_75": ("close_75_z", "75-day z-score of the close"),
    "pvo": ("pvo", "percentage volume oscillator"),
    "mfi": ("mfi", "money flow index"),
    "adx": ("adx", "trend strength"),
    "adxr": ("adxr", "smoothed trend strength"),
    "vwma": ("vwma", "volume-weighted moving average"),
    "boll": ("boll", "Bollinger middle band"),
    "boll_ub": ("boll_ub", "Bollinger upper band"),
    "boll_lb": ("boll_lb", "Bollinger lower band"),
}

SECTIONS: tuple[str, ...] = ("market_data", "technicals", "fundamentals", "news", "sentiment", "macro")

FORMAT_INSTRUCTIONS = """Write an investment thesis on {ticker} for the next 1-2 weeks.
Use 5 to 7 analysis sections, each in its own XML tag (for example <technical_analysis>,
<fundamental_analysis>, <news_analysis>, <sentiment_analysis>, <macro_analysis>, <risk_factors>),
then a <conclusion> section. Inside each section use markdown: a header, bullets and **bold** key points.
Each bullet is an opinion followed by an italic *quote* from the data and the data tag as `source`.
End with one final line: DECISION: [[[X]]] where X is one of STRONG BUY, BUY, HOLD, SELL, STRONG SELL."""


@dataclass(frozen=True)
class PromptConfig:
    n_days: int = 5  # values shown per indicator / OHLCV rows
    n_news: int = 10
    sections: tuple[str, ...] = SECTIONS
    shuffle_seed: int | None = None  # §7.2: shuffled section order for robustness (None = fixed)


def ichimoku_lines(ohlcv: pd.DataFrame) -> dict[str, pd.Series]:
    def mid(n: int) -> pd.Series:
        return (ohlcv["high"].rolling(n).max() + ohlcv["low"].rolling(n).min()) / 2

    return {"ichimoku_conversion": mid(9), "ichimoku_base": mid(26), "ichimoku_span_b": mid(52)}


def technicals(ohlcv: pd.DataFrame) -> pd.DataFrame:
    """[T, len(INDICATORS)] indicator values from OHLCV rows (all trailing computations)."""
    import stockstats

    frame = stockstats.wrap(ohlcv[["open", "high", "low", "close", "volume"]].astype(float).copy())
    manual = ichimoku_lines(ohlcv)
    cols = {tag: (manual[tag] if col is None else frame[col]) for tag, (col, _) in INDICATORS.items()}
    return pd.DataFrame(cols, index=ohlcv.index)


def _fmt(v: float) -> str:
    return "nan" if v is None or not np.isfinite(v) else f"{v:.4g}"


_LABELS = {"positive": 1.0, "bullish": 1.0, "neutral": 0.0, "negative": -1.0, "bearish": -1.0}


def _sentiment(v) -> float | None:
    """A news item's sentiment as a number: numeric scores as given, labels mapped to +1/0/-1."""
    if v is None:
        return None
    if isinstance(v, str):
        return _LABELS.get(v.strip().lower())
    f = float(v)
    return f if np.isfinite(f) else None


def snapshot_blocks(store, ticker: str, t, cfg: PromptConfig = PromptConfig()) -> dict[str, str]:
    """Tag -> text of each snapshot block for (ticker, t)."""
    t = pd.Timestamp(t)
    ohlcv = store.ohlcv_until(ticker, t)
    if not len(ohlcv):
        raise ValueError(f"no OHLCV for {ticker!r} at or before {t.date()}")
    last = ohlcv.tail(cfg.n_days)
    blocks: dict[str, str] = {}
    blocks["market_data"] = "\n".join(
        f"{d.date()} O={_fmt(r.open)} H={_fmt(r.high)} L={_fmt(r.low)} C={_fmt(r.close)} V={_fmt(r.volume)}"
        for d, r in last.iterrows()
    )
    tech = technicals(ohlcv).tail(cfg.n_days)
    blocks["technicals"] = "\n".join(
        f"<{tag}>{', '.join(_fmt(v) for v in tech[tag])}</{tag}> ({purpose})"
        for tag, (_, purpose) in INDICATORS.items()
    )
    st = store.fundamentals_asof(ticker, t)
    blocks["fundamentals"] = (
        "none available" if st is None
        else f"{st.quarter} (published {st.published.date()}): " + ", ".join(f"{k}={_fmt(v)}" for k, v in st.items.items())
    )
    news = store.news_before(ticker, t, cfg.n_news)
    blocks["news"] = "\n".join(f"- {pd.Timestamp(n['time']).date()} {n['title']}" for n in news) or "none available"
    scores = [v for v in (_sentiment(n.get("sentiment")) for n in news) if v is not None]
    blocks["sentiment"] = (
        f"mean news sentiment {np.mean(scores):+.3f} over {len(scores)} items" if scores else "none available"
    )
    macro = store.macro_asof(t)
    blocks["macro"] = "\n".join(
        f"{m.label}: {_fmt(m.value)}{m.unit} ({m.period.date()}, released {m.released.date()})" for m in macro.values()
    ) or "none available"
    return blocks


def build_prompt(store, ticker: str, t, cfg: PromptConfig = PromptConfig()) -> str:
    blocks = snapshot_blocks(store, ticker, t, cfg)
    order = [s for s in cfg.sections if s in blocks]
    if cfg.shuffle_seed is not None:
        random.Random(cfg.shuffle_seed).shuffle(order)
    body = "\n\n".join(f"<{s}>\n{blocks[s]}\n</{s}>" for s in order)
    return f"Ticker: {ticker}\nDate: {pd.Timestamp(t).date()}\n\n{body}\n\n" + FORMAT_INSTRUCTIONS.format(ticker=ticker)


def template_thesis(blocks: dict[str, str], label: int, stage: int = 3, short: bool = False) -> str:
    """A format-teacher thesis (SFT target). stage 1: structure only; 2: + quote/source bullets;
    3: + the terminal decision for ``label`` (class index in ACTIONS). ``short``: the short structured
    variant (one quoted bullet per section, no opinion sentences; ~1/5 of the tokens) that a tiny model
    can learn within the compare budget: the same sections, quotes, sources and decision line."""
    parts = []
    stance = ACTIONS[label].lower()
    for tag, body in blocks.items():
        lines = [ln.strip("- ").strip() for ln in body.splitlines() if ln.strip()][:1 if short else 4]
        bullets = []
        for ln in lines:
            quote = re.sub(r"</?[\w-]+>", "", ln)[:80].replace("*", "").replace("`", "")
            opinion = (f"The {tag.replace('_', ' ')} reading below is one input to the {stance} view and is weighed "
                       "against the other sections before any position is taken")
            if short:
                bullets.append(f"- *{quote}* `{tag}`" if stage >= 2 else f"- {tag.replace('_', ' ')}.")
            else:
                bullets.append(f"- {opinion} *{quote}* `{tag}`" if stage >= 2 else f"- {opinion}.")
        parts.append(f"<{tag}_analysis>\n## {tag.replace('_', ' ').title()}\n**Key points:**\n" + "\n".join(bullets)
                     + f"\n</{tag}_analysis>")
    parts.append(f"<conclusion>\n## Conclusion\nOn balance the evidence supports a **{stance}** stance.\n</conclusion>")
    text = "\n".join(parts)
    return text + (f"\nDECISION: [[[{ACTIONS[label]}]]]" if stage >= 3 else "")
