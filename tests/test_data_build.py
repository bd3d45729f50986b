"""`stockr1 data build` for --source sample / csv / synthetic: shards, manifest, deterministic hash,
exact read-back, clear errors."""

import json

import numpy as np
import pandas as pd

from stockr1.cli import main as stockr1_main
from stockr1.data import content_hash, load_windows, sample_windows
from stockr1.data.cli import main


def fails(argv: list[str], capsys, lines: int = 1) -> str:
    """``stockr1 <argv>`` exits 2 with ``lines`` lines on stderr and nothing on stdout; returns them."""
    assert stockr1_main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == lines, err
    return err


def test_build_sample_reads_back_exactly_and_hash_is_deterministic(tmp_path, capsys):
    assert main(["build", "--source", "sample", "--out", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert "days       5031  (1999-01-04 -> 2018-12-31)" in out and '"zero_volume": 2' in out
    man = json.loads((tmp_path / "a" / "manifest.json").read_text())
    w = load_windows(tmp_path / "a")
    ref = sample_windows(context=True)
    assert content_hash(w) == man["content_hash"] == content_hash(ref)
    for name in ("x", "y", "hist", "future"):
        np.testing.assert_array_equal(getattr(w, name), getattr(ref, name))
    assert (w.context == ref.context).all() and (w.split == ref.split).all()
    assert man["summary"]["windows"] == {s: int((ref.split == s).sum()) for s in ("train", "val", "test")}
    small = ["build", "--source", "sample", "--tickers", "NASDAQ", "--start", "2017-01-01"]
    hashes = []
    for d in ("b", "c"):
        assert main(small + ["--out", str(tmp_path / d)]) == 0
        hashes.append(json.loads((tmp_path / d / "manifest.json").read_text())["content_hash"])
    assert hashes[0] == hashes[1] != man["content_hash"]


def test_build_plain_csv(tmp_path, capsys):
    rng = np.random.default_rng(0)
    n = 200
    close = 50 * np.exp(np.cumsum(rng.normal(0, 0.01, n)))
    df = pd.DataFrame({"Date": pd.bdate_range("2022-01-03", periods=n).strftime("%Y-%m-%d"), "Open": close,
                       "High": close * 1.01, "Low": close * 0.99, "Close": close, "Volume": rng.integers(1, 1e6, n)})
    df.loc[7, "Volume"] = 0
    df.to_csv(tmp_path / "ACME.csv", index=False)
    args = ["build", "--source", "csv", "--path", str(tmp_path / "ACME.csv"), "--lookback", "30", "--horizon", "5"]
    assert main(args + ["--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "1 tickers: ACME" in out and "days       200" in out and '"zero_volume": 1' in out
    w = load_windows(tmp_path / "out")
    assert w.x.shape == (len(w), 5, 30) and len(w) == 200 - 30 - 5 - 5 - 5  # minus two 5-day embargoes
    first = int(np.flatnonzero(w.date == np.datetime64("2022-02-14"))[0])  # row 30
    # a csv has no text, so its context is the price frame and the last close alone
    assert w.context[first].splitlines() == ["Ticker: ACME", "Date: 2022-02-14", "Prices: as traded on 2022-02-14",
                                             w.context[first].splitlines()[3]]
    assert w.context[first].splitlines()[3].startswith(f"Last close: {close[30]:.2f}; 5-session change: ")
    np.testing.assert_allclose(w.hist[first, :, 3], close[1:31])
    issues = pd.read_csv(tmp_path / "out" / "issues.csv")
    assert list(issues[["ticker", "date", "kind"]].iloc[0]) == ["ACME", "2022-01-12", "zero_volume"]


def test_build_errors_are_clear(tmp_path, capsys):
    (tmp_path / "BAD.csv").write_text("Date,Open,High,Low,Volume\n2022-01-03,1,1,1,1\n")  # no Close (the others are optional)
    err = fails(["data", "build", "--source", "csv", "--path", str(tmp_path / "BAD.csv"), "--out", str(tmp_path / "o")],
                capsys)
    assert err.startswith("stockr1 data build: error: ") and "BAD.csv:BAD: no close column" in err
    df = pd.DataFrame({"Date": pd.bdate_range("2022-01-03", periods=200), "Open": 1.0, "High": 1.0, "Low": 1.0,
                       "Close": 1.0, "Volume": 1.0})
    df.loc[50, "Close"] = -1.0
    df.to_csv(tmp_path / "NEG.csv", index=False)
    assert "NEG 2022-03-14 nonpositive_price" in fails(
        ["data", "build", "--source", "csv", "--path", str(tmp_path / "NEG.csv"), "--out", str(tmp_path / "o")], capsys)
    # one line: the count and the first issues (DataQualityError.one_line), not one line per issue
    assert not (tmp_path / "o").exists()
    assert "nowhere is not a built dataset" in fails(["data", "info", str(tmp_path / "nowhere")], capsys)


def test_build_synthetic_with_context(tmp_path, capsys):
    assert main(["build", "--source", "synthetic", "--n-days", "250", "--lookback", "30", "--horizon", "5",
                 "--out", str(tmp_path)]) == 0
    w = load_windows(tmp_path)
    assert set(w.ticker) == {"SYN00", "SYN01", "SYN02", "SYN03"} and "Fundamentals (" in w.context[-1]
    assert main(["info", str(tmp_path)]) == 0 and "context    yes" in capsys.readouterr().out
