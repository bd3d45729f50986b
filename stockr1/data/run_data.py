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

from stockr1.data.config import DataConfig
from stockr1.data.dataset_io import DatasetError, read_manifest
from stockr1.types import Windows


@dataclass(frozen=True)
class RunData:
    windows: Windows  # context rendered
    frames: dict[str, pd.DataFrame]  # daily OHLCV per ticker (checked)
    store: Any  # stockr1.data.context.PointInTimeStore
    cfg: DataConfig


def load_run_data(data: Mapping[str, Any] | DataConfig | None) -> RunData:
    """Windows, frames and store for the configured source (the config is validated first)."""
    from stockr1.data.build import load_frames, load_store, load_windows
    from stockr1.data.context import sample_store, synthetic_store
    from stockr1.data.presets import sample_windows, synthetic_windows
    from stockr1.data.quality import check_frames
    from stockr1.data.sources import load_source

    cfg = DataConfig.from_dict(data)
    if cfg.source == "sample":  # the store over the unchecked frames, as every earlier sample run
        frames, _ = check_frames(load_source("sample"))
        return RunData(sample_windows(cfg.lookback, cfg.horizon, context=True), frames, sample_store(), cfg)
    if cfg.source == "synthetic":
        kw = cfg.synthetic_kwargs()
        frames = load_source("synthetic", **kw)
        return RunData(synthetic_windows(lookback=cfg.lookback, horizon=cfg.horizon, context=True, **kw), frames,
                       synthetic_store(frames, seed=kw.get("seed", 0)), cfg)
    man = read_manifest(cfg.path)  # verified once; the readers below skip the second pass
    shapes = (man["shapes"]["lookback"], man["shapes"]["horizon"])
    if shapes != (cfg.lookback, cfg.horizon):
        raise DatasetError(f"dataset {cfg.path} was built with lookback {shapes[0]}, horizon {shapes[1]}; the config "
                           f"asks for {cfg.lookback}, {cfg.horizon} (set data.lookback/horizon or rebuild)")
    frames = load_frames(cfg.path, verify=False)
    return RunData(load_windows(cfg.path, verify=False), frames, load_store(cfg.path, frames, verify=False), cfg)
