"""User data: a CSV/parquet file or a directory of them.

Any file with Date, Open, High, Low, Close, Volume columns (case-insensitive; extra columns such as
Adj Close are ignored, Dividends / Stock Splits are kept as actions). One ticker per file, named by
the file stem, unless the file has a ``ticker`` or ``symbol`` column, in which case it is split by it.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from stockr1.data.sources.frames import normalize_frame

SUFFIXES = (".csv", ".parquet", ".pq")


def _read(path: Path) -> pd.DataFrame:
    try:
        return pd.read_parquet(path) if path.suffix in (".parquet", ".pq") else pd.read_csv(path)
    except Exception as e:  # noqa: BLE001 - name the corrupt file, keep the cause
        raise ValueError(f"cannot read {path}: {type(e).__name__}: {e}") from e


def load_csv(path: str | Path, tickers: list[str] | None = None) -> dict[str, pd.DataFrame]:
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"csv source: {p} does not exist")
    files = sorted(f for f in p.iterdir() if f.suffix.lower() in SUFFIXES) if p.is_dir() else [p]
    if not files:
        raise ValueError(f"csv source: no {SUFFIXES} files in {p}")
    out: dict[str, pd.DataFrame] = {}
    for f in files:
        df = _read(f)
        key = next((c for c in df.columns if str(c).lower() in ("ticker", "symbol")), None)
        groups = df.groupby(key, sort=True) if key is not None else [(f.stem, df)]
        for name, g in groups:
            name = str(name)
            if name in out:
                raise ValueError(f"csv source: ticker {name!r} appears in more than one file ({f})")
            out[name] = normalize_frame(g.drop(columns=[key]) if key else g, f"{f}:{name}")
    if tickers:
        missing = sorted(set(tickers) - set(out))
        if missing:
            raise ValueError(f"csv source: tickers {missing} not found in {p} (have {sorted(out)})")
        out = {t: out[t] for t in tickers}
    return out
