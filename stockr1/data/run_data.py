"""``load_run_data(data_cfg)``: what every LLM stage reads, from any source of a ``data:`` section.

Why one function: SFT, GRPO, QA generation, ``bench qa`` and ``bench compare`` used to build the
offline sample or synthetic set each in their own way, so none could read a dataset built from
yfinance or a user's CSV. Here each source gives the same three things: windows with rendered
context, the daily frames, and the point-in-time store the context and the QA questions are read
from (the built-in sources build theirs; a dataset loads the ones it was built with, after its
manifest is checked, with its membership applied).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from stockr1.data.build import load_frames, load_store, load_windows
from stockr1.data.config import DataConfig
from stockr1.data.context import sample_store, stocks_store, synthetic_store
from stockr1.data.dataset_io import DatasetError, read_manifest
from stockr1.data.presets import STOCK_SOURCES, sample_windows, stock_frames, stock_windows, synthetic_windows
from stockr1.data.quality import check_frames
from stockr1.data.sources import load_source
from stockr1.data.windows import build_windows
from stockr1.types import Windows


@dataclass(frozen=True)
class RunData:
    windows: Windows  # context rendered
    frames: dict[str, pd.DataFrame]  # daily OHLCV per ticker (checked)
    store: Any  # stockr1.data.context.PointInTimeStore
    cfg: DataConfig


WINDOW_SOURCES = ("sample", "synthetic", "stocks", "universe", "csv", "dataset")


def source_windows(source: str, path: str | None = None, lookback: int = 90, horizon: int = 10, *,
                   context: bool = False, **synthetic: int) -> Windows:
    """All windows (every split) of one source, the one place a source becomes windows:
    sample | synthetic (``synthetic``: n_tickers, n_days, seed) | stocks | universe (the 20 offline
    close-only stocks, alone or beside the sample's indices: ``stock_windows``) | csv (an OHLCV csv/parquet file or a
    directory of them, checked and repaired as ``stockr1 data build`` does: a NaN or negative price is
    an error) | dataset (a ``stockr1 data build`` directory; manifest checked once, and its window
    shape must be the one asked for). ``context`` renders the text context (sample, synthetic)."""
    if source == "sample":
        return sample_windows(lookback, horizon, context=context)
    if source == "synthetic":
        return synthetic_windows(lookback=lookback, horizon=horizon, context=context, **synthetic)
    if source in STOCK_SOURCES:
        return stock_windows(source, lookback, horizon, context=context)
    if source not in WINDOW_SOURCES:
        raise ValueError(f"unknown data source {source!r}; expected one of {WINDOW_SOURCES}")
    if not path:
        raise ValueError(f"data source {source!r} needs a path")
    if source == "csv":
        frames, _ = check_frames(load_source("csv", path=path))
        return build_windows(frames, lookback=lookback, horizon=horizon)
    _check_shapes(path, lookback, horizon)
    return load_windows(path, verify=False)


def _check_shapes(path: str, lookback: int, horizon: int) -> None:
    """The dataset's manifest, verified (every file with its sha256), must have the asked window shape."""
    man = read_manifest(path)
    shapes = (man["shapes"]["lookback"], man["shapes"]["horizon"])
    if shapes != (lookback, horizon):
        raise DatasetError(f"dataset {path} was built with lookback {shapes[0]}, horizon {shapes[1]}; the config "
                           f"asks for {lookback}, {horizon} (set data.lookback/horizon or rebuild)")


def load_run_data(data: Mapping[str, Any] | DataConfig | None) -> RunData:
    """Windows, frames and store for the configured source (the config is validated first)."""
    cfg = DataConfig.from_dict(data)
    windows = source_windows(cfg.source, cfg.path, cfg.lookback, cfg.horizon, context=True,
                             **cfg.synthetic_kwargs())
    if cfg.source == "sample":  # the store over the unchecked frames, as every earlier sample run
        frames, _ = check_frames(load_source("sample"))
        return RunData(windows, frames, sample_store(), cfg)
    if cfg.source == "synthetic":
        kw = cfg.synthetic_kwargs()
        frames = load_source("synthetic", **kw)
        return RunData(windows, frames, synthetic_store(frames, seed=kw.get("seed", 0)), cfg)
    if cfg.source in STOCK_SOURCES:
        frames = stock_frames(cfg.source)
        return RunData(windows, frames, stocks_store(frames), cfg)
    frames = load_frames(cfg.path, verify=False)
    return RunData(windows, frames, load_store(cfg.path, frames, verify=False), cfg)
