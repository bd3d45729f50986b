"""Generate the QA benchmark (Stock-R1 §4.1, App. A.2/A.4) from point-in-time windows.

Per split (the data layer's labels, so a test question's future never overlaps training), each
family gets an equal quota; questions are drawn by rejection sampling so that, within a template,
every answer class (Yes/No, each choice, sign/size bin of a numeric answer) gets an equal cap. Caps
relax slowly when a class is rare, and the shortfall is reported rather than hidden.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from llm.qa.core import FAMILIES, Decision, QAContext, QAItem, decision_at, realised_path
from llm.qa.families import Template, templates_for
from stockr1.types import SPLITS, Windows

ContextFn = Callable[[str, np.datetime64], QAContext]


@dataclass(frozen=True)
class QAConfig:
    """Sizes per split (paper: 40,000 train / 4,000 eval) and sampling settings."""

    n_train: int = 40_000
    n_val: int = 2_000
    n_test: int = 4_000
    families: tuple[str, ...] = FAMILIES
    seed: int = 0
    max_attempts_per_item: int = 60

    def size(self, split: str) -> int:
        return {"train": self.n_train, "val": self.n_val, "test": self.n_test}[split]


@dataclass
class QAReport:
    """What was generated, per split: counts by family/template/answer class, and shortfalls."""

    counts: dict[str, Counter] = field(default_factory=dict)
    classes: dict[str, Counter] = field(default_factory=dict)
    shortfall: dict[str, dict[str, int]] = field(default_factory=dict)
    unavailable: dict[str, list[str]] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            "counts": {k: dict(v) for k, v in self.counts.items()},
            "classes": {k: dict(v) for k, v in self.classes.items()},
            "shortfall": self.shortfall,
            "unavailable_families": self.unavailable,
        }


class QAGenerator:
    """``QAGenerator(windows, context_fn).generate(cfg) -> (items, report)``.

    ``context_fn(ticker, t)`` returns the point-in-time :class:`QAContext` (macro/news/fundamentals);
    without it only price-based templates are usable (Fundamental/News families are then skipped
    and their quota goes to the other families).
    """

    def __init__(self, windows: Windows, context_fn: ContextFn | None = None) -> None:
        self.windows = windows
        self.context_fn = context_fn
        self._decisions: dict[int, Decision] = {}

    def decision(self, i: int) -> Decision:
        if i not in self._decisions:
            ctx = self.context_fn(str(self.windows.ticker[i]), self.windows.date[i]) if self.context_fn else None
            self._decisions[i] = decision_at(self.windows, i, ctx)
        return self._decisions[i]

    def make_item(self, i: int, t: Template, params: dict, split: str, item_id: str) -> QAItem:
        d = self.decision(i)
        return QAItem(
            id=item_id, family=t.family, template=t.key, question=t.render(d, params),
            answer=t.answer(realised_path(self.windows, i), d, params), answer_type=t.answer_type,
            window=int(i), ticker=d.ticker, date=d.date, split=split, choices=t.choices,
            tolerance=t.tol(params), params=dict(params),
        )

    def generate(self, cfg: QAConfig) -> tuple[list[QAItem], QAReport]:
        report = QAReport()
        items: list[QAItem] = []
        horizon = self.windows.future.shape[1]
        for split in SPLITS:
            n = cfg.size(split)
            idx = np.flatnonzero(self.windows.split == split)
            if n == 0 or len(idx) == 0:
                continue
            rng = np.random.default_rng([cfg.seed, SPLITS.index(split)])
            probe = idx[rng.choice(len(idx), size=min(len(idx), 64), replace=False)]
            available = [f for f in cfg.families if any(
                t.usable(self.decision(int(i))) for t in templates_for(f) for i in probe)]
            report.unavailable[split] = [f for f in cfg.families if f not in available]
            quotas = {f: n // len(available) + (k < n % len(available)) for k, f in enumerate(available)}
            split_items: list[QAItem] = []
            for fam, q in quotas.items():
                got, short = self._sample_family(fam, q, idx, split, horizon, rng, cfg, len(split_items))
                split_items += got
                if short:
                    report.shortfall.setdefault(split, {})[fam] = short
            order = rng.permutation(len(split_items))
            split_items = [split_items[k] for k in order]
            report.counts[split] = Counter(it.family for it in split_items)
            report.classes[split] = Counter(f"{it.template}={it.answer if it.answer_type != 'numeric' else '#'}"
                                            for it in split_items)
            items += split_items
        return items, report

    def _sample_family(
        self, fam: str, quota: int, idx: np.ndarray, split: str, horizon: int,
        rng: np.random.Generator, cfg: QAConfig, offset: int,
    ) -> tuple[list[QAItem], int]:
        temps = templates_for(fam)
        grids = {t.key: [p for p in t.grid if p.get("x", 1) <= horizon] for t in temps}
        temps = tuple(t for t in temps if grids[t.key])
        base_cap = {t.key: max(1, math.ceil(quota / len(temps) / max(2, len(t.choices) or 2))) for t in temps}
        taken: Counter = Counter()
        seen: set[tuple] = set()
        out: list[QAItem] = []
        attempts, budget = 0, quota * cfg.max_attempts_per_item
        while len(out) < quota and attempts < budget:
            attempts += 1
            relax = 1 + attempts // max(1, quota * 8)  # caps grow slowly if a class is rare
            t = temps[rng.integers(len(temps))]
            i = int(idx[rng.integers(len(idx))])
            d = self.decision(i)
            if not t.usable(d):
                continue
            grid = grids[t.key]
            params = grid[rng.integers(len(grid))]
            key = (i, t.key, tuple(sorted(params.items())))
            if key in seen:
                continue
            answer = t.answer(realised_path(self.windows, i), d, params)
            cls = (t.key, t.balance_class(answer, params))
            if taken[cls] >= base_cap[t.key] * relax:
                continue
            seen.add(key)
            taken[cls] += 1
            out.append(self.make_item(i, t, params, split, f"{split}-{offset + len(out):06d}"))
        return out, quota - len(out)


def generate_qa(
    windows: Windows, cfg: QAConfig | None = None, context_fn: ContextFn | None = None
) -> tuple[list[QAItem], QAReport]:
    return QAGenerator(windows, context_fn).generate(cfg or QAConfig())
