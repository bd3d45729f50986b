"""``Windows.context`` rendered on first read (``stockr1.data.lazy_context``) is the eager array, row by row,
through every way the code base reads it, and renders only what is read."""

from __future__ import annotations

import numpy as np
import pandas as pd

from stockr1.data.context import synthetic_store
from stockr1.data.lazy_context import LazyContext
from stockr1.data.sources import load_source
from stockr1.data.windows import build_windows
from stockr1.types import train_only


def _build(progress: bool):
    frames = load_source("synthetic", n_tickers=2, n_days=260, seed=3)
    return build_windows(frames, lookback=30, horizon=5, context=synthetic_store(frames, seed=3), progress=progress)


def test_lazy_context_is_the_eager_context_through_every_access() -> None:
    lazy, eager = _build(progress=False), _build(progress=True)
    assert isinstance(lazy.context, LazyContext) and isinstance(eager.context, np.ndarray)
    assert lazy.context.n_rendered == 0  # building renders nothing
    n = len(eager)
    assert len(lazy.context) == n and eager.context[n // 2] != ""
    assert lazy.context[7] == eager.context[7] and lazy.context.n_rendered == 1
    idx = np.array([n - 1, 3, 3, 40])
    sub = lazy.select(idx)  # Windows.select: an index array
    assert [sub.context[i] for i in range(4)] == list(eager.context[idx])
    assert lazy.context.n_rendered == 4  # rows n-1, 3 and 40, and 7 read before (a subset shares the cache)
    mask = eager.split == "test"
    assert list(lazy.context[mask]) == list(eager.context[mask])  # a mask, then iteration
    assert list(lazy.context[5:9]) == list(eager.context[5:9]) and lazy.context[-1] == eager.context[-1]
    assert np.array_equal(np.asarray(train_only(lazy).context), train_only(eager).context)  # numpy, via select
    assert lazy.context[mask].astype(str).tolist() == eager.context[mask].astype(str).tolist()  # data build's use
    assert np.concatenate([lazy.context[:2], lazy.context[-2:]]).tolist() == \
        eager.context[[0, 1, n - 2, n - 1]].tolist()  # llm.tools.concat_windows


def test_each_row_is_rendered_once_from_its_own_ticker_and_day() -> None:
    calls: list[tuple[str, pd.Timestamp]] = []

    def render(ticker: str, t: pd.Timestamp) -> str:
        calls.append((ticker, t))
        return f"{ticker}@{t.date()}"

    dates = pd.date_range("2020-01-01", periods=4).to_numpy()
    ctx = LazyContext(render, np.array(["A", "A", "B", "B"]), dates)
    assert ctx[2] == "B@2020-01-03" and ctx[np.int64(2)] == "B@2020-01-03"
    assert ctx[[3, 2]][1] == "B@2020-01-03" and list(ctx[[False, True, False, True]]) == ["A@2020-01-02", "B@2020-01-04"]
    assert [c[0] for c in calls] == ["B", "A", "B"]  # row 2 once, then rows 1 and 3


def test_anonymised_lazy_windows_rewrite_only_the_rows_read_and_equal_the_eager_rewrite() -> None:
    """The memorisation probe over a lazily rendered source: ``Anonymiser.windows`` keeps the context lazy
    (a universe's 164k rows are not rendered to anonymise the few hundred a run reads) and each row it
    renders is exactly the eager array's row rewritten."""
    from stockr1.anonymise import Anonymiser

    lazy, eager = _build(progress=False), _build(progress=True)
    an = Anonymiser(ids={tk: f"T{k}" for k, tk in enumerate(sorted(set(eager.ticker.tolist())))}, names={}, weeks=7,
                    scale=0.5)
    a_lazy, a_eager = an.windows(lazy), an.windows(eager)
    assert isinstance(a_lazy.context, LazyContext) and a_lazy.context.n_rendered == 0
    rows = [0, 17, len(eager) - 1]
    assert [a_lazy.context[i] for i in rows] == [a_eager.context[i] for i in rows]
    assert a_lazy.context.n_rendered == 3 and a_lazy.context[17] != lazy.context[17]  # rewritten, not the plain text
