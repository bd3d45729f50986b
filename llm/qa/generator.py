"""Generate the QA benchmark (Stock-R1 §4.1, App. A.2/A.4) from point-in-time windows.

Per split (the data layer's labels, so a test question's future never overlaps training), each
family gets an equal quota, split equally over its templates and, within a template, over its
parameter cells (one cell = one point of the template's grid, e.g. ``ev_rise_paper`` with k=1, x=10).

Why per cell (``QAConfig.balance = "cell"``, the default): balancing answers per template only left
the parameters predictive ("rise > 1% within 10 days" is nearly always Yes, "> 5% within 3 days"
nearly never), so a lookup over (template, parameters) answered most event questions without
reading any data. Now each cell is filled in rounds: a round reserves one window of every answer
class of the cell (``Template.answer_class``: the answer, or a tolerance-wide bin of a numeric one),
so within a cell the classes differ by at most one item, the last round's partial order being
random. A cell that runs out of windows of some class stops growing, and its quota moves to the
other cells of the template, then to the other templates of the family; what no cell can supply is
reported as a shortfall, never hidden. Windows are drawn by the realised future only through their
answer class (a label); the question text is rendered from the decision time alone.

``balance = "template"`` is the earlier sampler (per-(template, class) caps that relax when a class
is rare), kept so earlier QA sets and their numbers can be regenerated.
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
    max_attempts_per_item: int = 60  # the "template" sampler's rejection budget
    balance: str = "cell"  # "cell": answers balanced per (template, parameters); "template": earlier sampler

    def __post_init__(self) -> None:
        if self.balance not in ("cell", "template"):
            raise ValueError(f"QAConfig.balance must be 'cell' or 'template', got {self.balance!r}")

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
            sample = self._sample_family if cfg.balance == "template" else self._sample_family_cells
            for fam, q in quotas.items():
                got, short = sample(fam, q, idx, split, horizon, rng, cfg, len(split_items))
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

    def _sample_family_cells(
        self, fam: str, quota: int, idx: np.ndarray, split: str, horizon: int,
        rng: np.random.Generator, cfg: QAConfig, offset: int,
    ) -> tuple[list[QAItem], int]:
        """``quota`` items of family ``fam``, answers balanced within every (template, cell)."""
        fam_k, split_k = FAMILIES.index(fam), SPLITS.index(split)
        samplers = []
        for k, t in enumerate(templates_for(fam)):
            grid = [p for p in t.grid if p.get("x", 1) <= horizon]
            if grid:
                seed = [cfg.seed, split_k, fam_k, k]
                samplers.append(_TemplateSampler(t, grid, idx, self, np.random.default_rng(seed)))
        picks: list[tuple[Template, int, dict]] = []
        need = quota
        while need > 0 and samplers:
            share = _shares(need, len(samplers), rng)
            for s, n in zip(list(samplers), share, strict=True):
                got = s.take(n)
                picks += [(s.template, i, p) for i, p in got]
                need -= len(got)
                if len(got) < n:
                    samplers.remove(s)  # exhausted: its unmet share goes to the other templates
        out = [self.make_item(i, t, p, split, f"{split}-{offset + k:06d}") for k, (t, i, p) in enumerate(picks)]
        return out, quota - len(out)


def _shares(n: int, k: int, rng: np.random.Generator) -> list[int]:
    """``n`` split into ``k`` near-equal parts, the remainder going to randomly chosen parts."""
    out = [n // k] * k
    for j in rng.permutation(k)[: n % k]:
        out[int(j)] += 1
    return out


class _CellScanner:
    """Windows of one (template, params) cell by answer class, scanned lazily in a random order."""

    def __init__(self, t: Template, params: dict, order: np.ndarray, gen: QAGenerator) -> None:
        self.t, self.params, self.order, self.gen = t, params, order, gen
        self.pos = 0
        self.found: dict[str, list[int]] = {c: [] for c in t.answer_classes()}

    def has(self, cls: str) -> bool:
        """Whether a window of class ``cls`` is available (scanning further only as far as needed)."""
        while not self.found[cls] and self.pos < len(self.order):
            i = int(self.order[self.pos])
            self.pos += 1
            d = self.gen.decision(i)
            if self.t.usable(d):
                answer = self.t.answer(realised_path(self.gen.windows, i), d, self.params)
                self.found[self.t.answer_class(answer, self.params)].append(i)
        return bool(self.found[cls])

    def pop(self, cls: str) -> int:
        return self.found[cls].pop(0)


class _TemplateSampler:
    """One template's items, in rounds over its cells: each round gives every live cell one window
    of each answer class (in a random class order), so answers stay balanced within each cell."""

    def __init__(self, t: Template, grid: list[dict], idx: np.ndarray, gen: QAGenerator,
                 rng: np.random.Generator) -> None:
        self.template, self.rng = t, rng
        self.cells = [_CellScanner(t, dict(p), rng.permutation(idx), gen) for p in grid]
        self.live = list(range(len(self.cells)))
        self.pending: list[tuple[int, dict]] = []  # reserved (window, params) of the current group
        self.round: list[int] = []  # cells still to visit in the current round

    def take(self, n: int) -> list[tuple[int, dict]]:
        """Up to ``n`` (window, params) picks; fewer only when every cell has run out of some class."""
        out: list[tuple[int, dict]] = []
        while len(out) < n:
            if not self.pending and not self._next_group():
                break
            out.append(self.pending.pop(0))
        return out

    def _next_group(self) -> bool:
        """Reserve one window per class in the next live cell; drop cells lacking a class."""
        while self.live:
            if not self.round:
                self.round = [self.live[j] for j in self.rng.permutation(len(self.live))]
            c = self.round.pop(0)
            cell = self.cells[c]
            classes = cell.t.answer_classes()
            if all(cell.has(k) for k in classes):
                self.pending = [(cell.pop(classes[j]), cell.params) for j in self.rng.permutation(len(classes))]
                return True
            self.live.remove(c)
        return False


def generate_qa(
    windows: Windows, cfg: QAConfig | None = None, context_fn: ContextFn | None = None
) -> tuple[list[QAItem], QAReport]:
    return QAGenerator(windows, context_fn).generate(cfg or QAConfig())
