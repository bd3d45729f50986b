"""Question-only baselines: what the question's template and parameters alone say about the answer.

A QA benchmark should not be answerable without reading the market data. These baselines see only
``item.template`` and ``item.params`` (never the window, its history or the context), are fitted on
train items only, and are scored on test like any policy. If they beat the majority-class baseline,
the generator leaks the answer through its parameters (e.g. "rise more than 1% within 10 days" being
nearly always Yes).

- ``QuestionOnlyLookup``: the train majority answer of the item's cell (template + exact params),
  falling back to the template's, then the global majority; numeric answers get the cell's median.
- ``QuestionOnlyClassifier``: a multinomial logistic regression (numpy, L2, full-batch gradient
  descent, so deterministic) on one-hot template + each template's standardised parameters, the
  softmax restricted to the item's own choices. Numeric answers get the cell's *tolerance mode*: the
  constant within tolerance of the most train answers of the cell, the best any fixed guess can do
  under tolerance grading (the median need not be).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from llm.qa.core import QAItem
from llm.qa.families import TEMPLATES_BY_KEY

Cell = tuple[str, tuple[tuple[str, object], ...]]


def cell_of(item: QAItem) -> Cell:
    """The item's parameter cell: its template and its parameters (sorted, hashable)."""
    return item.template, tuple(sorted(item.params.items()))


def train_only(items: Iterable[QAItem]) -> list[QAItem]:
    """The items, refusing any that is not from the train split (a fit on test would be a leak)."""
    items = list(items)
    bad = sorted({it.split for it in items} - {"train"})
    if bad:
        raise ValueError(f"question-only baselines fit on train items only, got splits {bad}")
    return items


def mode(answers: Sequence[str]) -> str:
    """The most frequent answer; ties go to the alphabetically first, so the fit is order-free."""
    counts = Counter(answers)
    top = max(counts.values())
    return min(a for a, n in counts.items() if n == top)


def median_answer(values: Sequence[float]) -> str:
    return f"{float(np.median(values)):.2f}"


def tolerance_mode(values: Sequence[float], tol: float) -> str:
    """The constant within ``tol`` of the most ``values`` (ties: the smallest such constant).

    Some optimal constant is ``v + tol`` for a sorted value ``v`` (slide the window's left edge)."""
    v = np.sort(np.asarray(values, dtype=float))
    hits = np.searchsorted(v, v + 2 * tol + 1e-9, side="right") - np.arange(len(v))
    return f"{float(v[int(np.argmax(hits))] + tol):.2f}"


def _numeric(items: Sequence[QAItem]) -> list[float]:
    return [float(it.answer) for it in items]


class QuestionOnlyLookup:
    """Per-cell majority (categorical) or median (numeric) answer, fitted on train."""

    def __init__(self) -> None:
        self.by_cell: dict[Cell, str] = {}
        self.by_template: dict[str, str] = {}
        self.by_type: dict[str, str] = {}

    def _fit_answer(self, items: Sequence[QAItem]) -> str:
        return median_answer(_numeric(items)) if items[0].answer_type == "numeric" else mode(
            [it.answer for it in items])

    def fit(self, train: Iterable[QAItem]) -> QuestionOnlyLookup:
        items = train_only(train)
        for table, key in ((self.by_cell, cell_of), (self.by_template, lambda it: it.template),
                           (self.by_type, lambda it: it.answer_type)):
            groups: dict = defaultdict(list)
            for it in items:
                groups[key(it)].append(it)
            table.update({k: self._fit_answer(v) for k, v in groups.items()})
        return self

    def answer(self, item: QAItem) -> str | None:
        a = self.by_cell.get(cell_of(item)) or self.by_template.get(item.template) or self.by_type.get(
            item.answer_type)
        if a is not None and item.answer_type != "numeric" and a not in item.choices:
            return item.choices[0] if item.choices else None
        return a


def _param_names(items: Iterable[QAItem]) -> list[tuple[str, str]]:
    return sorted({(it.template, k) for it in items for k, v in it.params.items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool)})


class QuestionOnlyClassifier:
    """Masked-softmax logistic regression on (template, parameters); tolerance mode for numeric."""

    def __init__(self, l2: float = 1e-3, lr: float = 0.5, steps: int = 800) -> None:
        self.l2, self.lr, self.steps = l2, lr, steps
        self.templates: list[str] = []
        self.params: list[tuple[str, str]] = []
        self.scale: dict[tuple[str, str], tuple[float, float]] = {}
        self.classes: list[str] = []
        self.w = np.zeros((0, 0))
        self.numeric: dict[object, str] = {}

    def features(self, items: Sequence[QAItem]) -> np.ndarray:
        """[N, 1 + T + P]: bias, one-hot template, each (template, param) standardised (0 elsewhere)."""
        t_ix = {t: j for j, t in enumerate(self.templates)}
        p_ix = {p: j for j, p in enumerate(self.params)}
        x = np.zeros((len(items), 1 + len(t_ix) + len(p_ix)))
        x[:, 0] = 1.0
        for n, it in enumerate(items):
            if it.template in t_ix:
                x[n, 1 + t_ix[it.template]] = 1.0
            for k, v in it.params.items():
                j = p_ix.get((it.template, k))
                if j is not None:
                    mu, sd = self.scale[(it.template, k)]
                    x[n, 1 + len(t_ix) + j] = (float(v) - mu) / sd
        return x

    def _mask(self, items: Sequence[QAItem]) -> np.ndarray:
        c_ix = {c: j for j, c in enumerate(self.classes)}
        m = np.zeros((len(items), len(self.classes)), dtype=bool)
        for n, it in enumerate(items):
            m[n, [c_ix[c] for c in it.choices if c in c_ix]] = True
        return m

    @staticmethod
    def _softmax(x: np.ndarray, w: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Softmax over each row's allowed classes (the item's choices), 0 elsewhere."""
        z = np.where(mask, x @ w, -np.inf)
        p = np.exp(z - z.max(1, keepdims=True))
        return p / p.sum(1, keepdims=True)

    def fit(self, train: Iterable[QAItem]) -> QuestionOnlyClassifier:
        items = train_only(train)
        cat = [it for it in items if it.answer_type != "numeric"]
        self._fit_numeric([it for it in items if it.answer_type == "numeric"])
        if not cat:
            return self
        self.templates = sorted({it.template for it in cat})
        self.params = _param_names(cat)
        for tp in self.params:
            v = np.array([float(it.params[tp[1]]) for it in cat if it.template == tp[0] and tp[1] in it.params])
            self.scale[tp] = (float(v.mean()), float(v.std()) or 1.0)
        self.classes = sorted({c for it in cat for c in it.choices} | {it.answer for it in cat})
        x, mask = self.features(cat), self._mask(cat)
        y = np.zeros((len(cat), len(self.classes)))
        y[np.arange(len(cat)), [self.classes.index(it.answer) for it in cat]] = 1.0
        self.w = np.zeros((x.shape[1], len(self.classes)))
        for _ in range(self.steps):
            self.w -= self.lr * (x.T @ (self._softmax(x, self.w, mask) - y) / len(cat) + self.l2 * self.w)
        return self

    def _fit_numeric(self, items: Sequence[QAItem]) -> None:
        """Tolerance mode per cell, per template and overall (each fallback of the next)."""
        for key in (cell_of, lambda it: it.template, lambda it: "numeric"):
            groups: dict = defaultdict(list)
            for it in items:
                groups[key(it)].append(it)
            for k, v in groups.items():
                self.numeric[k] = tolerance_mode(_numeric(v), float(np.median([it.tolerance for it in v])))

    def proba(self, items: Sequence[QAItem]) -> np.ndarray:
        """[N, C] class probabilities over ``classes`` (0 outside each item's choices)."""
        return self._softmax(self.features(items), self.w, self._mask(items))

    def answer(self, item: QAItem) -> str | None:
        if item.answer_type == "numeric":
            return self.numeric.get(cell_of(item)) or self.numeric.get(item.template) or self.numeric.get("numeric")
        if not self.classes or not any(c in self.classes for c in item.choices):
            return item.choices[0] if item.choices else None
        # rounded first: on a cell the generator balanced, the classes tie to within float rounding, and
        # BLAS summation order must not pick the answer (a tie goes to the first class, in sorted order)
        return self.classes[int(np.argmax(np.round(self.proba([item])[0], 9)))]


def answer_class(item: QAItem) -> str:
    """The item's answer class as the generator balances it (numeric: its tolerance-wide bin)."""
    t = TEMPLATES_BY_KEY.get(item.template)
    if item.answer_type != "numeric" or t is None or item.tolerance <= 0:
        return item.answer
    return t.answer_class(item.answer, item.params)


def single_answer_templates(items: Iterable[QAItem]) -> dict[str, str]:
    """Templates whose items all share one answer class (a question-only giveaway), with that class.

    Numeric items are compared by their tolerance-wide bin (``answer_class``)."""
    classes: dict[str, set[str]] = defaultdict(set)
    for it in items:
        classes[it.template].add(answer_class(it))
    return {t: next(iter(c)) for t, c in sorted(classes.items()) if len(c) == 1}


def cell_balance(items: Iterable[QAItem]) -> dict[Cell, Mapping[str, int]]:
    """Answer-class counts per parameter cell (numeric answers by bin)."""
    out: dict[Cell, Counter] = defaultdict(Counter)
    for it in items:
        out[cell_of(it)][answer_class(it)] += 1
    return dict(out)


def cell_spread(items: Iterable[QAItem]) -> dict[Cell, int]:
    """Per parameter cell: most minus fewest items over the template's answer classes (absent ones
    count 0). The generator keeps this at most 1; larger means the parameters predict the answer."""
    out = {}
    for cell, counts in cell_balance(items).items():
        t = TEMPLATES_BY_KEY.get(cell[0])
        classes = t.answer_classes() if t is not None else tuple(counts)
        out[cell] = max(counts.values()) - min(counts.get(c, 0) for c in classes)
    return out
