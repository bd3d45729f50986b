"""The decision environment of a side-by-side run (``stockr1 bench compare``): what every method's
``adapter`` module (``build_query``, ``format_teacher``, ...) reads. Windows with rendered context,
daily frames, the point-in-time store, the decision and training rows, the test prices of each
ticker and the backtest rules they are traded by.

Decision days (``decision_rows``): by default every test day whose holding period does not overlap
the previous decision's, i.e. every ``holding``-th test day per ticker from the first (~74 per ticker
on the offline sample); ``decisions_per_ticker`` (optional) caps them by widening the stride to
``max(holding, ceil(n_test_days / cap))``, still spread over the whole period (the why is in
``benchmarks.compare.command``). Training queries are ``n_train`` random *train-split* days.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd

from llm.qa.prompt import trim_context
from rl.methods.trading_r1.labels import labels_for_windows
from stockr1.anonymise import AnonymisedStore, Anonymiser, profile_names
from stockr1.backtest import BacktestConfig, prices_from_windows
from stockr1.data import load_run_data, load_source, sample_windows
from stockr1.data.config import DataConfig
from stockr1.data.context import sample_store
from stockr1.data.quality import check_frames


class EnvConfig(Protocol):
    """What the environment reads of its run's config (``benchmarks.compare.CompareConfig``)."""

    seed: int
    data: DataConfig  # source (sample | synthetic | dataset), path, lookback, horizon
    decisions_per_ticker: int | None  # optional cap (None: every non-overlapping test day)
    n_train: int
    max_context_chars: int | None
    benchmark: str | None  # ticker whose prices define beta
    backtest: BacktestConfig


def decision_rows(windows, per_ticker: int | None, holding: int, split: str = "test") -> np.ndarray:
    """``split`` rows of the decision days (module docstring), sorted by ticker then date: the
    stride is ``holding`` days (a position entered at one decision closes at the next), or
    wider when ``per_ticker`` caps the count."""
    out = []
    for tk in sorted(set(windows.ticker[windows.split == split].tolist())):
        rows = np.flatnonzero((windows.split == split) & (windows.ticker == tk))
        rows = rows[np.argsort(windows.date[rows], kind="stable")]
        stride = holding if per_ticker is None else max(holding, math.ceil(len(rows) / per_ticker))
        out.append(rows[::stride][:per_ticker])
    return np.concatenate(out)


def train_days(windows, n: int, seed: int) -> np.ndarray:
    """``n`` seeded random train-split rows (all of them when fewer), sorted."""
    tr = np.flatnonzero(windows.split == "train")
    return np.sort(np.random.default_rng(seed).choice(tr, size=min(n, len(tr)), replace=False))


@dataclass
class DecisionEnv:
    """What every method sees: windows with rendered context, daily frames, the point-in-time store,
    decision and training rows, and the test prices of each ticker."""

    cfg: EnvConfig
    windows: Any  # stockr1.types.Windows, context rendered
    frames: dict[str, pd.DataFrame]  # daily OHLCV per ticker
    store: Any  # stockr1.data.context.PointInTimeStore
    rows: np.ndarray  # decision days (test split)
    train_rows: np.ndarray  # training queries (train split)
    prices: dict[str, pd.Series]
    bt: BacktestConfig
    aliases: dict[str, list[str]]  # ticker -> names the judge accepts
    _labels: np.ndarray | None = None

    @classmethod
    def build(cls, cfg: EnvConfig, windows=None, frames=None, store=None) -> DecisionEnv:
        """From ``cfg``; without ``windows`` (and its ``frames``, ``store``) the config's ``data`` section:
        the offline sample by default, or ``source: dataset, path: DIR`` (``stockr1.data.load_run_data``)."""
        bt = cfg.backtest
        if windows is None:
            data = cfg.data
            if data.source == "sample":  # the store over the checked frames, as every earlier comparison
                windows = sample_windows(data.lookback, data.horizon, context=True)
                frames, _ = check_frames(load_source("sample"))
                store = sample_store(frames)
            else:
                d = load_run_data(data)
                windows, frames, store = d.windows, d.frames, d.store
        test = windows.select(np.flatnonzero(windows.split == "test"))
        prices = {tk: prices_from_windows(test, tk, bt.holding) for tk in sorted(set(test.ticker.tolist()))}
        pick = train_days(windows, cfg.n_train, cfg.seed)
        profiles = getattr(store, "profiles", None) or {}
        aliases = {tk: list(getattr(p, "keywords", ()) or ()) + [getattr(p, "name", tk)] for tk, p in profiles.items()}
        return cls(cfg, windows, frames, store, decision_rows(windows, cfg.decisions_per_ticker, bt.holding), pick,
                   prices, bt, aliases)

    def anonymiser(self, **kw) -> Anonymiser:
        """The memorisation probe's ``Anonymiser`` for this run's tickers, names and price ranges."""
        return Anonymiser.for_frames(self.frames, profile_names(getattr(self.store, "profiles", None) or {}),
                                     windows=self.windows, **kw)

    def anonymised(self, an: Anonymiser) -> DecisionEnv:
        """The same decision and training rows seen through ``an`` (``stockr1.anonymise``): neutral tickers,
        shifted dates, rescaled prices in windows, frames, the store and every text built from them;
        labels and rewards are recomputed on them (and equal the plain ones by construction)."""
        cfg = dataclasses.replace(self.cfg, benchmark=an.ticker(self.cfg.benchmark) if self.cfg.benchmark else None)
        return DecisionEnv(cfg, an.windows(self.windows), an.frames(self.frames), AnonymisedStore(self.store, an),
                           self.rows, self.train_rows, {an.ticker(tk): an.prices(p) for tk, p in self.prices.items()},
                           self.bt, {an.ticker(tk): [f"Company {an.ticker(tk)}", an.ticker(tk)] for tk in self.aliases})

    def ref(self, i: int) -> tuple[str, pd.Timestamp]:
        """(ticker, decision day) of row i."""
        return str(self.windows.ticker[i]), pd.Timestamp(self.windows.date[i])

    def context(self, i: int) -> str:
        """Row i's rendered context, trimmed to ``cfg.max_context_chars``."""
        ctx = self.windows.context
        return trim_context(str(ctx[i]), self.cfg.max_context_chars) if len(ctx) else ""

    @property
    def labels(self) -> np.ndarray:
        """Trading-R1 class per row, -1 = none."""
        if self._labels is None:
            self._labels = labels_for_windows(self.windows, self.frames)
        return self._labels

    def bench_prices(self) -> pd.Series | None:
        return self.prices.get(self.cfg.benchmark) if self.cfg.benchmark else None
