"""Trade-R1 §3.5.2 stage 2: triangular similarity of evidence E, reasoning c and decision d.

``s = (S_{E<->c} + S_{c<->d} + S_{E<->d}) / 3`` in [0, 1]: Factuality, Deduction, Consistency.
The judge is pluggable:

- ``OpenAIJudge``: any OpenAI-compatible ``/chat/completions`` endpoint (the paper uses an LLM
  judge); configured by ``STOCKR1_JUDGE_URL``, ``STOCKR1_JUDGE_MODEL``, ``STOCKR1_JUDGE_API_KEY``.
- ``OfflineJudge``: the documented deterministic default that tests rely on. It is MUCH weaker
  than an LLM judge: Factuality is lexical (a claim counts as supported when every number in it
  appears in the evidence and at least ``overlap`` of its content words occur in one evidence
  chunk), and Deduction/Consistency compare keyword polarity (bullish vs bearish word counts)
  with the decision's side. It does not understand negation ("not strong"), paraphrase,
  arithmetic, or causal logic, so it can be gamed by copying evidence text; use it to test the
  plumbing and as a floor, and a real judge for any claim about reasoning quality.

A judge call that fails or returns malformed JSON gives a scored error (all three scores 0 and
``error`` set), never an exception inside the reward.
"""

from __future__ import annotations

import json
import os
import re
import urllib.request
from dataclasses import dataclass
from typing import Protocol

from rl.methods.trade_r1.retrieval import tokenize

BULLISH = frozenset(["beat", "beats", "bullish", "buy", "growth", "grew", "gain", "gains", "rally", "rallied", "rise", "rises", "rose", "up", "upgrade", "upgraded", "strong", "strength", "surge", "surged", "positive", "outperform", "record", "higher", "increase", "increased", "expansion"])
BEARISH = frozenset(["miss", "misses", "missed", "bearish", "sell", "decline", "declined", "fall", "falls", "fell", "drop", "dropped", "down", "downgrade", "downgraded", "weak", "weakness", "plunge", "plunged", "negative", "underperform", "lower", "decrease", "decreased", "loss", "losses", "contraction"])
STOP = frozenset(["the", "a", "an", "and", "or", "of", "to", "in", "on", "for", "with", "at", "by", "from", "is", "are", "was", "were", "be", "been", "it", "its", "this", "that", "as", "their", "has", "have", "had", "will", "would", "can", "could", "may", "might", "than", "then", "so", "which", "our", "we", "they", "he", "she", "not", "no"])
_NUM = re.compile(r"-?\d+(?:\.\d+)?")


@dataclass(frozen=True)
class TriangularScores:
    factuality: float
    deduction: float
    consistency: float
    n_claims: int = 0
    n_unsupported: int = 0
    error: str | None = None

    @property
    def s(self) -> float:
        return (self.factuality + self.deduction + self.consistency) / 3.0


class Judge(Protocol):
    def score(self, evidence: list[str], reasoning: str, decision: str) -> TriangularScores: ...


def claims(reasoning: str) -> list[str]:
    """Sentences / bullet lines with at least three words."""
    parts = re.split(r"(?<=[.!?])\s+|\n+", reasoning)
    return [p.strip(" -*\t") for p in parts if len(p.split()) >= 3]


def polarity(text: str) -> float:
    """(bullish - bearish) / (bullish + bearish) keyword counts, 0 when neither occurs."""
    t = tokenize(text)
    b, s = sum(w in BULLISH for w in t), sum(w in BEARISH for w in t)
    return 0.0 if b + s == 0 else (b - s) / (b + s)


def decision_side(decision: str) -> float:
    """+1 buy/long/selected, -1 sell/short, 0 hold (strong variants map to the same side)."""
    d = decision.upper()
    if re.search(r"\bSELL\b|\bSHORT\b", d):
        return -1.0
    if re.search(r"\bHOLD\b|\bNEUTRAL\b", d):
        return 0.0
    return 1.0


class OfflineJudge:
    def __init__(self, overlap: float = 0.5):
        self.overlap = overlap

    def supported(self, claim: str, evidence: list[str]) -> bool:
        ev_text = " ".join(evidence)
        if any(n not in ev_text for n in _NUM.findall(claim)):
            return False
        words = {w for w in tokenize(claim) if w not in STOP and not _NUM.fullmatch(w)}
        if not words:
            return False
        return max((len(words & set(tokenize(e))) / len(words) for e in evidence), default=0.0) >= self.overlap

    def score(self, evidence: list[str], reasoning: str, decision: str) -> TriangularScores:
        cs = claims(reasoning)
        ok = sum(self.supported(c, evidence) for c in cs)
        fact = ok / len(cs) if cs else 0.0
        side = decision_side(decision)
        ded = 1.0 - abs(side - polarity(reasoning)) / 2.0
        con = 1.0 - abs(side - polarity(" ".join(evidence))) / 2.0
        return TriangularScores(fact, ded, con, len(cs), len(cs) - ok)


JUDGE_PROMPT = """You verify a financial decision. Evidence:
{evidence}

Reasoning:
{reasoning}

Decision: {decision}

Score each in [0, 1]: factuality (is the reasoning supported by the evidence), deduction (does the
decision follow from the reasoning), consistency (does the decision agree with the evidence).
Count the reasoning's factual claims and how many the evidence does not support.
Reply with JSON only: {{"factuality": x, "deduction": x, "consistency": x, "total_claims": n, "unsupported_claims": n}}"""


class OpenAIJudge:
    """LLM judge over an OpenAI-compatible endpoint (temperature 0)."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None, timeout: float = 60.0):
        self.url, self.model, self.key, self.timeout = base_url.rstrip("/") + "/chat/completions", model, api_key, timeout

    def _post(self, prompt: str) -> str:
        body = json.dumps({"model": self.model, "temperature": 0, "messages": [{"role": "user", "content": prompt}]})
        headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {self.key}"} if self.key else {})}
        req = urllib.request.Request(self.url, body.encode(), headers)
        with urllib.request.urlopen(req, timeout=self.timeout) as resp:
            return json.loads(resp.read())["choices"][0]["message"]["content"]

    @staticmethod
    def parse(reply: str) -> TriangularScores:
        m = re.search(r"\{.*\}", reply, re.S)
        try:
            d = json.loads(m.group(0)) if m else None
            vals = [min(1.0, max(0.0, float(d[k]))) for k in ("factuality", "deduction", "consistency")]
            return TriangularScores(*vals, int(d.get("total_claims", 0)), int(d.get("unsupported_claims", 0)))
        except (TypeError, KeyError, ValueError, json.JSONDecodeError) as err:
            return TriangularScores(0.0, 0.0, 0.0, error=f"malformed judge reply ({err!r}): {reply[:200]!r}")

    def score(self, evidence: list[str], reasoning: str, decision: str) -> TriangularScores:
        prompt = JUDGE_PROMPT.format(evidence="\n".join(f"- {e}" for e in evidence), reasoning=reasoning, decision=decision)
        try:
            return self.parse(self._post(prompt))
        except OSError as err:  # network / HTTP failure: a scored error, not a crash in the reward loop
            return TriangularScores(0.0, 0.0, 0.0, error=f"judge call failed: {err!r}")


def judge_from_env() -> Judge:
    url = os.environ.get("STOCKR1_JUDGE_URL")
    if url:
        return OpenAIJudge(url, os.environ.get("STOCKR1_JUDGE_MODEL", "gpt-4o-mini"), os.environ.get("STOCKR1_JUDGE_API_KEY"))
    return OfflineJudge()
