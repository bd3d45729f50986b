"""Point-in-time market data layer (see docs/data.md).

Contract: ``load_source``, ``build_windows``, ``sample_windows``, ``synthetic_windows``,
``load_windows``, ``stock_windows`` (the offline stocks, alone or with the sample's indices),
``source_windows`` (any source into windows), ``load_run_data`` (what the LLM stages read from a ``data:`` section); the text/tabular context lives in ``stockr1.data.context.PointInTimeStore``.
"""

from stockr1.data.build import BuildConfig, build_dataset, content_hash, load_frames, load_store, load_windows
from stockr1.data.dataset_io import DatasetError
from stockr1.data.membership import Membership, read_tickers_file
from stockr1.data.presets import STOCK_SOURCES, sample_windows, stock_frames, stock_windows, synthetic_windows
from stockr1.data.returns import invert_close_returns, log_returns
from stockr1.data.run_data import RunData, load_run_data, source_windows
from stockr1.data.sources import SOURCES, load_source
from stockr1.data.sources.frames import trading_calendar
from stockr1.data.splits import PAPER_SPLIT, SAMPLE_SPLIT, STOCK_SPLIT, SplitSpec, assign_splits, source_split
from stockr1.data.windows import build_windows, split_counts

__all__ = [
    "BuildConfig",
    "build_dataset",
    "content_hash",
    "DatasetError",
    "load_frames",
    "load_run_data",
    "load_store",
    "load_windows",
    "Membership",
    "read_tickers_file",
    "RunData",
    "PAPER_SPLIT",
    "SAMPLE_SPLIT",
    "SOURCES",
    "STOCK_SOURCES",
    "STOCK_SPLIT",
    "SplitSpec",
    "assign_splits",
    "build_windows",
    "invert_close_returns",
    "load_source",
    "log_returns",
    "sample_windows",
    "source_split",
    "source_windows",
    "split_counts",
    "stock_frames",
    "stock_windows",
    "synthetic_windows",
    "trading_calendar",
]
