"""``data: {source: dataset, path: DIR}``: the config refuses half-given sources, the loader reads any
`stockr1 data build` output with its manifest checked (a missing or changed file is a one-line error
naming it), the rebuilt point-in-time store renders the very context the build wrote, and index
membership limits a ticker's decision days in every reader."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from llm.build import load_data
from stockr1.data import DatasetError, Membership, load_run_data, load_windows, read_tickers_file
from stockr1.data.cli import main as data_main
from stockr1.data.config import DataConfig
from tests.dataset_csv import TICKERS, build_csv_dataset, write_random_walk_csv


def test_data_config_needs_path_and_source_together() -> None:
    assert DataConfig(source="dataset", path="data/sp500").describe() == "dataset data/sp500"
    with pytest.raises(ValueError, match="source: dataset needs data.path"):
        DataConfig(source="dataset")
    with pytest.raises(ValueError, match="data.path only applies to source: dataset"):
        DataConfig(source="sample", path="data/sp500")
    with pytest.raises(ValueError, match="must be one of"):
        DataConfig(source="yfinance")


def test_csv_dataset_windows_come_from_the_csv(tmp_path: Path) -> None:
    ds, df = build_csv_dataset(tmp_path)
    d = load_run_data({"source": "dataset", "path": str(ds)})
    w = d.windows
    assert set(w.ticker) == set(TICKERS) == set(d.frames) and set(w.split) == {"train", "val", "test"}
    for tk in TICKERS:
        src = df[df["Ticker"] == tk].set_index(pd.to_datetime(df.loc[df["Ticker"] == tk, "Date"]))
        rows = np.flatnonzero(w.ticker == tk)
        dates = pd.DatetimeIndex(w.date[rows])
        assert dates.isin(src.index).all() and dates.min() == src.index[90]  # t = row L: 90 days of history
        np.testing.assert_allclose(w.hist[rows[0], :, 3], src["Close"].to_numpy()[1:91])  # no actions: as traded
        np.testing.assert_allclose(d.frames[tk]["close"].to_numpy(), src["Close"].to_numpy())
    windows, context_fn = load_data({"source": "dataset", "path": str(ds)})
    assert len(windows) == len(w) and context_fn(str(w.ticker[0]), w.date[0]).news == ()  # csv: prices only
    with pytest.raises(DatasetError, match="built with lookback 90, horizon 10; the config asks for 60, 10"):
        load_data({"source": "dataset", "path": str(ds), "lookback": 60})


def test_a_missing_or_corrupt_file_is_one_line_naming_it(tmp_path: Path) -> None:
    ds, _ = build_csv_dataset(tmp_path)
    cfg = {"source": "dataset", "path": str(ds)}
    shard = ds / "windows-val.parquet"
    good = shard.read_bytes()
    shard.write_bytes(good[:-7] + b"garbage")
    with pytest.raises(DatasetError, match=r"windows-val\.parquet is corrupt") as e:
        load_data(cfg)
    assert "\n" not in str(e.value)
    shard.unlink()
    with pytest.raises(DatasetError, match=r"windows-val\.parquet is missing"):
        load_windows(ds)
    shard.write_bytes(good)
    (ds / "frames.parquet").unlink()
    with pytest.raises(DatasetError, match=r"frames\.parquet is missing"):
        load_data(cfg)
    (ds / "manifest.json").write_text('{"shapes": ')
    with pytest.raises(DatasetError, match=r"corrupt dataset manifest .*manifest\.json"):
        load_data(cfg)
    with pytest.raises(DatasetError, match="not a built dataset"):
        load_data({"source": "dataset", "path": str(tmp_path / "nowhere")})
    with pytest.raises(DatasetError, match="corrupt dataset manifest"):
        data_main(["info", str(ds)])  # `stockr1 data info` turns it into one line on stderr, exit 2


def test_rebuilt_store_renders_the_built_context(tmp_path: Path) -> None:
    """A synthetic build has macro, statements, news and profiles: the store read back from the dataset
    renders every sampled window's context byte for byte, and the QA context reads it point-in-time."""
    assert data_main(["build", "--source", "synthetic", "--n-days", "300", "--out", str(tmp_path)]) == 0
    d = load_run_data({"source": "dataset", "path": str(tmp_path)})
    w = d.windows
    for i in np.linspace(0, len(w) - 1, 12).astype(int):
        assert d.store.render_context(str(w.ticker[i]), pd.Timestamp(w.date[i])) == w.context[i]
    _, context_fn = load_data({"source": "dataset", "path": str(tmp_path)})
    i = len(w) - 1
    ctx = context_fn(str(w.ticker[i]), w.date[i])
    assert ctx.news and ctx.fundamentals and {"2Y", "10Y"} <= set(ctx.macro)
    cutoff = d.store.news_cutoff(str(w.ticker[i]), pd.Timestamp(w.date[i]))
    assert all(pd.Timestamp(n.date) <= cutoff for n in ctx.news)  # news before the close of t-1


def test_membership_limits_decision_days_in_every_reader(tmp_path: Path) -> None:
    """ZETA is a member from 2012-01-02 to 2012-06-01 (exclusive) only; ACME from the start, still one.
    Its history before joining is still used as input, but no window has a decision day outside."""
    (tmp_path / "members.csv").write_text("ticker,start,end\nACME,2000-01-01,\nZETA,2012-01-02,2012-06-01\n")
    (tmp_path / "tickers.txt").write_text("# universe\nACME\nZETA  # joined later\n\n")
    ds, _ = build_csv_dataset(tmp_path, "--tickers-file", str(tmp_path / "tickers.txt"),
                              "--membership", str(tmp_path / "members.csv"))
    man = json.loads((ds / "manifest.json").read_text())
    assert "membership.csv" in man["files"] and man["summary"]["membership"]["tickers"] == 2
    for w in (load_windows(ds), load_data({"source": "dataset", "path": str(ds)})[0]):
        z = pd.DatetimeIndex(w.date[w.ticker == "ZETA"])
        assert len(z) and z.min() >= pd.Timestamp("2012-01-02") and z.max() < pd.Timestamp("2012-06-01")
        a = pd.DatetimeIndex(w.date[w.ticker == "ACME"])
        assert a.min() < pd.Timestamp("2011-12-01") and len(a) > 3 * len(z)
    mem = Membership.read(tmp_path / "members.csv")
    assert mem.is_member("ZETA", pd.DatetimeIndex(["2012-01-01", "2012-01-02", "2012-05-31", "2012-06-01"])).tolist() == \
        [False, True, True, False]
    assert not mem.is_member("OTHER", pd.DatetimeIndex(["2012-01-02"])).any()
    assert read_tickers_file(tmp_path / "tickers.txt") == ("ACME", "ZETA")


def test_membership_and_tickers_file_errors(tmp_path: Path) -> None:
    (tmp_path / "m.csv").write_text("ticker,start,end\nZETA,2012-06-01,2012-01-02\n")
    with pytest.raises(ValueError, match="ZETA ends .* on or before it starts"):
        Membership.read(tmp_path / "m.csv")
    (tmp_path / "m.csv").write_text("symbol,from\nZETA,2012-06-01\n")
    with pytest.raises(ValueError, match="columns must be ticker,start,end"):
        Membership.read(tmp_path / "m.csv")
    (tmp_path / "t.txt").write_text("AAPL MSFT\n")
    with pytest.raises(ValueError, match="one ticker per line"):
        read_tickers_file(tmp_path / "t.txt")


def test_membership_universe_leaves_out_and_lists_what_the_source_lacks(tmp_path: Path, capsys) -> None:
    """Without --tickers the membership file is the universe; a former member the source lacks (Yahoo keeps
    few delisted tickers) stops the build, or with --skip-missing is left out and listed."""
    from stockr1.data.sources.yfinance import load_yfinance
    from tests.test_data_yfinance import fixture_downloader

    (tmp_path / "m.csv").write_text("ticker,start,end\nACME,2011-01-03,\nGONE,2005-01-03,2011-09-01\nZETA,2011-01-03,\n")
    write_random_walk_csv(tmp_path / "prices.csv")
    args = ["build", "--source", "csv", "--path", str(tmp_path / "prices.csv"), "--membership", str(tmp_path / "m.csv")]
    with pytest.raises(ValueError, match=r"\['GONE'\] not found"):  # one line on stderr from `stockr1 data build`
        data_main([*args, "--out", str(tmp_path / "a")])
    ds, _ = build_csv_dataset(tmp_path / "b", "--membership", str(tmp_path / "m.csv"), "--skip-missing")
    assert "missing    1 tickers not in the source: GONE" in capsys.readouterr().out
    assert set(load_windows(ds).ticker) == set(TICKERS)

    def downloader(tk: str, start: str, end: str) -> pd.DataFrame:
        return pd.DataFrame() if tk == "GONE" else fixture_downloader(tk, start, end)

    with pytest.warns(UserWarning, match="left out 1 ticker"):
        frames = load_yfinance(["AAPL", "GONE"], "2020-01-01", "2021-01-01", tmp_path / "cache", downloader,
                               progress=False, retries=0, skip_missing=True)
    assert list(frames) == ["AAPL"]
