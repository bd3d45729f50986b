"""Trivial per-family baselines for the QA benchmark.

- ``MajorityBaseline``: fit on train; answers each template (and horizon x) with its most frequent
  train answer (categorical) or the train median (numeric).
- ``random_walk_answer``: answers the question as if the future close path were flat at today's close
  (the random-walk mean path), through the same answer function that grades the realised future.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping

import numpy as np

from llm.qa.answers import is_correct
from llm.qa.core import FAMILIES, QAContext, QAItem, decision_at, flat_path
from llm.qa.families import TEMPLATES_BY_KEY
from stockr1.types import Windows


def _key(item: QAItem) -> tuple[str, int]:
    return item.template, int(item.params.get("x", 0))


class MajorityBaseline:
    def __init__(self) -> None:
        self.table: dict[tuple[str, int], str] = {}
        self.by_template: dict[str, str] = {}

    def fit(self, train: Iterable[QAItem]) -> MajorityBaseline:
        groups: dict[tuple[str, int], list[QAItem]] = defaultdict(list)
        for it in train:
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


def baseline_table(
    train: Iterable[QAItem], evaluate: list[QAItem], windows: Windows
) -> Mapping[str, dict[str, float]]:
    maj = MajorityBaseline().fit(train)
    return {
        "majority": accuracy_by_family(evaluate, maj.answer),
        "random_walk": accuracy_by_family(evaluate, lambda it: random_walk_answer(it, windows)),
    }
