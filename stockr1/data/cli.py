"""`stockr1 data build | info`."""

from __future__ import annotations

import argparse
import json

from stockr1.data.build import BuildConfig, build_dataset
from stockr1.data.dataset_io import read_manifest
from stockr1.data.throttle import DataFetchError


def _count(frames: dict[str, str]) -> dict[str, str]:
    """{frame: "n tickers"} of a manifest's per-ticker price frames."""
    kinds = sorted(set(frames.values()))
    return {k: f"{sum(v == k for v in frames.values())} tickers" for k in kinds}


def _summary_text(man: dict) -> str:
    s = man["summary"]
    lines = [
        f"source     {s['source']}  ({s['n_tickers']} tickers: {', '.join(s['tickers'][:8])}{' ...' if s['n_tickers'] > 8 else ''})",
        f"days       {s['days']}  ({s['first_day']} -> {s['last_day']})",
        f"windows    {s['n_windows']}  " + "  ".join(f"{k}={v}" for k, v in s["windows"].items()),
        "split days " + "  ".join(f"{k}={a}..{b}" for k, (a, b) in s["split_dates"].items()),
        f"repairs    {json.dumps(s['repairs']) if s['repairs'] else 'none'}  (details: issues.csv)",
        *([f"prices     {', '.join(f'{k}: {v}' for k, v in sorted(_count(s['price_frames']).items()))} "
           "(stockr1.data.price_frame)"] if s.get("price_frames") else []),
        f"context    {'yes' if s['with_context'] else 'no'}",
        *([f"absent     {len(a)} tickers lack channels (masked): "
           + "; ".join(f"{t}: {'/'.join(c)}" for t, c in list(a.items())[:4]) + (" ..." if len(a) > 4 else "")]
          if (a := s.get("absent_channels")) else []),
        *([f"trimmed    {sum(v['rows_dropped'] for v in tr.values())} early rows before the first usable day: "
           + ", ".join(f"{t} {v['rows_dropped']} (from {v['first_usable']})" for t, v in tr.items())]
          if (tr := s.get("trimmed")) else []),
        *([f"missing    {len(s['missing'])} tickers not in the source: {', '.join(s['missing'][:20])}"] if s.get("missing") else []),
        *([f"membership {m['tickers']} tickers in the file; never a member here: {', '.join(m['never_member']) or 'none'}"]
          if (m := s.get("membership")) else []),
        f"hash       {man['content_hash']}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="stockr1 data", description="point-in-time market datasets")
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build windows + context shards and a manifest")
    b.add_argument("--source", choices=["sample", "yfinance", "csv", "synthetic", "stocks", "universe"], default="sample",
                   help="stocks: 20 S&P 500 stocks, close only, 1990-2022 (skfolio, offline); universe: stocks + sample")
    b.add_argument("--path", help="csv/parquet file or directory (--source csv)")
    b.add_argument("--tickers", nargs="+")
    b.add_argument("--tickers-file", help="one ticker per line, # comments (instead of --tickers)")
    b.add_argument("--membership", help="CSV ticker,start,end: decision days only while a member (end empty = still one)")
    b.add_argument("--start")
    b.add_argument("--end")
    b.add_argument("--lookback", type=int, default=90)
    b.add_argument("--horizon", type=int, default=10)
    b.add_argument("--stride", type=int, default=1)
    b.add_argument("--no-context", action="store_true", help="skip the text context")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--n-days", type=int, default=600)
    b.add_argument("--cache-dir", default="data/yfinance")
    b.add_argument("--skip-missing", action="store_true",
                   help="leave out (and list) tickers the source lacks, e.g. delisted members Yahoo no longer has")
    b.add_argument("--min-interval", type=float, default=0.5, help="yfinance: seconds between request starts")
    b.add_argument("--retries", type=int, default=4, help="yfinance: retries per request (backoff 2, 4, 8, ... s)")
    b.add_argument("--jump-policy", choices=["error", "report"], default="error")
    b.add_argument("--price-basis", choices=["as_traded", "back_adjusted"], default="as_traded",
                   help="csv: back_adjusted for adjusted closes (windows are then rebased, 100 = the close of t, "
                        "since an adjusted level holds later splits and dividends); as_traded for raw prices")
    b.add_argument("--out", required=True, help="dataset directory (the real-scale configs read data/sp500); "
                                               "refused if it holds files, unless --overwrite")
    b.add_argument("--overwrite", action="store_true", help="replace an existing --out (only once the new build is complete)")
    i = sub.add_parser("info", help="print the summary of a built dataset")
    i.add_argument("dir")
    a = p.parse_args(argv)
    if a.cmd == "info":  # a DatasetError (a ValueError) becomes one line on stderr in stockr1.cli
        print(_summary_text(read_manifest(a.dir)))
        return 0
    cfg = BuildConfig(source=a.source, path=a.path, tickers=tuple(a.tickers) if a.tickers else None,
                      tickers_file=a.tickers_file, membership=a.membership, start=a.start, end=a.end,
                      lookback=a.lookback, horizon=a.horizon, stride=a.stride, context=not a.no_context, seed=a.seed,
                      n_days=a.n_days, cache_dir=a.cache_dir, jump_policy=a.jump_policy, min_interval=a.min_interval,
                      retries=a.retries, skip_missing=a.skip_missing, price_basis=a.price_basis)
    try:  # bad data (DataQualityError) and bad arguments are ValueErrors: one line on stderr in stockr1.cli
        man = build_dataset(cfg, a.out, overwrite=a.overwrite)
    except DataFetchError as e:  # the network or Yahoo, not a bug: reported the same way
        raise ValueError(str(e)) from e
    print(_summary_text(man))
    print(f"wrote      {a.out}")
    return 0
