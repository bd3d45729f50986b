"""``Windows.context`` rendered on first use: ``LazyContext``.

Rendering a window's text context (``PointInTimeStore.render_context``: macro, fundamentals, news up to
t) takes ~3 ms, and a source of 20 stocks and 2 indices has 164,022 windows: eight minutes before a GRPO
run or a QA benchmark could start, to render the ~2,000 contexts its questions use. A ``LazyContext``
renders a row when it is read and keeps it, so every consumer sees exactly the text the eager array held
(``tests/test_lazy_context.py`` compares them on every row), and nothing is rendered that is not read.

It behaves as the ``[N]`` object array it replaces where the code base uses one: ``len``, an integer
(one string), a slice, mask or index array (a ``LazyContext`` over those rows, sharing the renderer and
what was rendered), iteration, and ``numpy.asarray`` / ``astype`` (renders every row: ``stockr1 data
build`` writes them all).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pandas as pd


class LazyContext:
    """[N] rendered text contexts of (ticker, decision day) rows, each rendered once when first read."""

    def __init__(self, render: Callable[[str, pd.Timestamp], str], ticker: np.ndarray, date: np.ndarray,
                 rows: np.ndarray | None = None, cache: dict[int, str] | None = None) -> None:
        self._render, self._ticker, self._date = render, ticker, date
        self._rows = np.arange(len(ticker)) if rows is None else rows  # positions in ticker / date
        self._cache = {} if cache is None else cache  # shared by every subset of the same rows

    def __len__(self) -> int:
        return len(self._rows)

    def _text(self, row: int) -> str:
        if row not in self._cache:
            self._cache[row] = self._render(str(self._ticker[row]), pd.Timestamp(self._date[row]))
        return self._cache[row]

    def __getitem__(self, key: Any) -> str | LazyContext:
        if isinstance(key, (int, np.integer)):
            return self._text(int(self._rows[key]))
        return LazyContext(self._render, self._ticker, self._date, self._rows[key], self._cache)

    def __iter__(self) -> Iterator[str]:
        return (self._text(int(r)) for r in self._rows)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        out = np.array(list(self), dtype=object)
        return out if dtype is None else out.astype(dtype)

    def astype(self, dtype: Any) -> np.ndarray:
        return np.asarray(self).astype(dtype)

    def mapped(self, fn: Callable[[str, str], str]) -> LazyContext:
        """The same rows with each text passed through ``fn(text, ticker)`` when it is read (its own cache),
        e.g. the memorisation probe's rewrite (``stockr1.anonymise``), without rendering the rest."""
        render = self._render
        return LazyContext(lambda tk, d: fn(render(tk, d), tk), self._ticker, self._date, self._rows, {})

    @property
    def n_rendered(self) -> int:
        """Rows rendered so far (over every subset sharing this cache)."""
        return len(self._cache)
