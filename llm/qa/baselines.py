"""Trivial per-family baselines for the QA benchmark.

- ``MajorityBaseline``: fit on train; answers each template (and horizon x) with its most frequent
  train answer (categorical) or the train median (numeric).
- ``random_walk_answer``: answers the question as if the future close path were flat at today's close
  (the random-walk mean path), through the same answer function that grades the realised future.
- ``llm.qa.question_only``: the question's template and parameters alone (per-cell lookup and a
  small classifier); ``baseline_report`` scores all four with 95% intervals and per-family counts.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping

import numpy as np

from llm.qa.answers import is_correct
from llm.qa.core import FAMILIES, QAContext, QAItem, decision_at, flat_path
from llm.qa.families import TEMPLATES_BY_KEY
from llm.qa.question_only import (
    QuestionOnlyClassifier,
    QuestionOnlyLookup,
    single_answer_templates,
    train_only,
)
from stockr1.metrics.stats import block_resamples, wilson_interval
from stockr1.metrics.verdict import verdict
from stockr1.types import Windows

AnswerFn = Callable[[QAItem], str | None]
QUESTION_ONLY = ("question_only_lookup", "question_only_classifier")


def _key(item: QAItem) -> tuple[str, int]:
    return item.template, int(item.params.get("x", 0))


class MajorityBaseline:
    def __init__(self) -> None:
        self.table: dict[tuple[str, int], str] = {}
        self.by_template: dict[str, str] = {}

    def fit(self, train: Iterable[QAItem]) -> MajorityBaseline:
        """Per-(template, x) mode / median of train items; ValueError on an item of another split."""
        groups: dict[tuple[str, int], list[QAItem]] = defaultdict(list)
        for it in train_only(train):
            groups[_key(it)].append(it)
        tmpl: dict[str, list[QAItem]] = defaultdict(list)
        for k, its in groups.items():
            self.table[k] = self._mode(its)
            tmpl[k[0]] += its
        self.by_template = {k: self._mode(v) for k, v in tmpl.items()}
        return self

    @staticmethod
    def _mode(items: list[QAItem]) -> str:
        if items[0].answer_type == "numeric":
            return f"{float(np.median([float(i.answer) for i in items])):.2f}"
        return Counter(i.answer for i in items).most_common(1)[0][0]

    def answer(self, item: QAItem) -> str | None:
        return self.table.get(_key(item), self.by_template.get(item.template))


def random_walk_answer(item: QAItem, windows: Windows, context: QAContext | None = None) -> str:
    """The answer implied by a flat future close path (uses only the history of ``item.window``)."""
    d = decision_at(windows, item.window, context)
    t = TEMPLATES_BY_KEY[item.template]
    return t.answer(flat_path(d, windows.future.shape[1]), d, item.params)


def accuracy_by_family(
    items: Iterable[QAItem], answer_fn: Callable[[QAItem], str | None]
) -> dict[str, float]:
    """Accuracy (%) per family and ``overall`` (mean over families present, Table 1's Avg.)."""
    hits: dict[str, list[bool]] = defaultdict(list)
    for it in items:
        hits[it.family].append(is_correct(it, answer_fn(it)))
    out = {f: 100.0 * float(np.mean(hits[f])) for f in FAMILIES if hits[f]}
    out["overall"] = float(np.mean(list(out.values()))) if out else float("nan")
    return out


def baseline_answer_fns(train: Iterable[QAItem], windows: Windows) -> dict[str, AnswerFn]:
    """Majority, random walk and the two question-only baselines, fitted on ``train`` (train items)."""
    train = list(train)
    maj = MajorityBaseline().fit(train)
    return {
        "majority": maj.answer,
        "random_walk": lambda it: random_walk_answer(it, windows),
        "question_only_lookup": QuestionOnlyLookup().fit(train).answer,
        "question_only_classifier": QuestionOnlyClassifier().fit(train).answer,
    }


def baseline_table(
    train: Iterable[QAItem], evaluate: list[QAItem], windows: Windows
) -> Mapping[str, dict[str, float]]:
    return {k: accuracy_by_family(evaluate, fn) for k, fn in baseline_answer_fns(train, windows).items()}


def _family_means(fams: np.ndarray, hits: np.ndarray, idx: np.ndarray) -> dict[str, float]:
    fam, hit = fams[idx], hits[idx]
    out = {f: float(np.mean(hit[fam == f])) for f in FAMILIES if np.any(fam == f)}
    out["overall"] = float(np.mean(list(out.values()))) if out else float("nan")
    return out


def accuracy_intervals(
    items: list[QAItem], hits: np.ndarray, resamples: list[np.ndarray], level: float = 0.95
) -> dict[str, dict[str, float]]:
    """Accuracy (%) per family and overall (mean over families) with a 95% interval.

    ``ci_lo``/``ci_hi``: percentile interval over date-block resamples of the items (questions on one
    date, or on overlapping futures, are not independent, so an i.i.d. interval is too narrow);
    ``wilson_lo``/``wilson_hi`` (families only): the Wilson interval, as if the questions were independent."""
    fams = np.array([it.family for it in items])
    full = _family_means(fams, hits, np.arange(len(items)))
    boots = [_family_means(fams, hits, r) for r in resamples]
    a = (1 - level) / 2
    out: dict[str, dict[str, float]] = {}
    for f, acc in full.items():
        vals = [b[f] for b in boots if f in b] or [float("nan")]
        row = {"acc": 100 * acc, "ci_lo": 100 * float(np.quantile(vals, a)), "ci_hi": 100 * float(np.quantile(vals, 1 - a))}
        if f != "overall":
            fam = [h for it, h in zip(items, hits, strict=True) if it.family == f]
            lo, hi = wilson_interval(int(np.sum(fam)), len(fam), level)
            row.update(n=len(fam), wilson_lo=100 * lo, wilson_hi=100 * hi)
        out[f] = row
    return out


def qa_resamples(items: list[QAItem], windows: Windows, n_boot: int = 1000,
                 seed: int = 0) -> tuple[list[np.ndarray], int]:
    """Date-block resamples of ``items`` (block >= the horizon: questions on one date, or on
    overlapping futures, are not independent); the same arguments give the same resamples, so
    baselines and policies scored in one run share them. Returns ``(resamples, block)``."""
    dates = np.array([np.datetime64(it.date, "D") for it in items])
    return block_resamples(dates, horizon=windows.future.shape[1], n_boot=n_boot, seed=seed)


def overall_difference(items: list[QAItem], hits_a: np.ndarray, hits_b: np.ndarray,
                       resamples: list[np.ndarray], level: float = 0.95) -> dict[str, float]:
    """Paired difference (points) of the overall accuracy (mean over families) of two answerers on the
    same ``items``, with its percentile interval over the shared date-block ``resamples``."""
    return family_differences(items, hits_a, hits_b, resamples, level)["overall"]


def family_differences(items: list[QAItem], hits_a: np.ndarray, hits_b: np.ndarray,
                       resamples: list[np.ndarray], level: float = 0.95) -> dict[str, dict[str, float]]:
    """Paired difference (points) of two answerers on the same ``items``, per family and overall (the mean
    over families), each with its percentile interval over the shared date-block ``resamples``. A family
    absent from a resample does not enter that family's interval; one absent from every resample has no
    interval (NaN) and the verdict "undecided"."""
    fams = np.array([it.family for it in items])
    a, b = np.asarray(hits_a, float), np.asarray(hits_b, float)

    def diffs(idx: np.ndarray) -> dict[str, float]:
        ma, mb = _family_means(fams, a, idx), _family_means(fams, b, idx)
        return {f: ma[f] - mb[f] for f in ma}

    full = diffs(np.arange(len(items)))
    boots = [diffs(r) for r in resamples]
    q = [(1 - level) / 2, (1 + level) / 2]
    out: dict[str, dict[str, float]] = {}
    for f, d in full.items():
        vals = [x[f] for x in boots if f in x] or [float("nan")]
        lo, hi = (100 * float(v) for v in np.quantile(vals, q))
        decided = np.isfinite(lo) and np.isfinite(hi)
        out[f] = {"diff": 100 * d, "ci_lo": lo, "ci_hi": hi, "verdict": verdict(100 * d, lo, hi) if decided else "undecided"}
    return out


def baseline_report(
    train: Iterable[QAItem], evaluate: list[QAItem], windows: Windows, n_boot: int = 1000, seed: int = 0,
    answer_fns: Mapping[str, AnswerFn] | None = None,
) -> dict:
    """Every baseline on ``evaluate`` with intervals, the per-family counts, the question-only gap to
    majority per family (target: at most 3 points) and the templates with a single answer class.

    One set of date-block resamples (block >= the horizon, ``qa_resamples``) is shared by all rows."""
    fns = dict(answer_fns or baseline_answer_fns(train, windows))
    resamples, block = qa_resamples(evaluate, windows, n_boot, seed)
    rows = {k: accuracy_intervals(evaluate, np.array([is_correct(it, fn(it)) for it in evaluate]), resamples)
            for k, fn in fns.items()}
    counts = {f: n for f in FAMILIES if (n := sum(it.family == f for it in evaluate))}
    gap = {q: {f: rows[q][f]["acc"] - rows["majority"][f]["acc"] for f in rows["majority"]}
           for q in QUESTION_ONLY if q in rows and "majority" in rows}
    return {
        "n": len(evaluate), "counts": counts, "block": block, "n_boot": n_boot, "rows": rows,
        "question_only_minus_majority": gap,
        "question_only_within_3_points": {f: all(g[f] <= 3.0 for g in gap.values()) for f in counts} if gap else {},
        "single_answer_templates": single_answer_templates(evaluate),
    }
