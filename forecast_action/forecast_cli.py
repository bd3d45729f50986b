"""``stockr1 forecast``: forecast the next trading days of your own OHLCV CSV with a trained encoder.

    stockr1 forecast --checkpoint DIR_OR_CKPT [--decoder FILE] --data FILE.csv --horizon 10 \\
        [--quantiles 0.05 0.5 0.95] [--action JSON] [--exchange auto|MIC|weekdays] --out forecast.csv \\
        [--plot] [--overwrite]

``--checkpoint``: a ``Forecaster.save_pretrained`` directory or a Lightning ``.ckpt`` of ``stockr1 ts
fit``. ``--data``: a CSV/parquet file or a directory of them (``stockr1.data.sources.csv``: one ticker
per file, or a ``ticker`` / ``symbol`` column). A user error (missing file, bad column, bad date, bad
action) is one line on stderr and exit code 2, never a traceback, and leaves no ``--out``. The CSV
(and with ``--plot`` the fan chart ``<out>.png``) is written to a temp file and renamed. ``--exchange``:
the calendar the future days are dated on (``stockr1.data.calendar``; ``auto`` infers it from the file's
own dates, else weekdays); the CSV's ``calendar`` column and the closing line name it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from forecast_action.forecaster import DEFAULT_QUANTILES, Forecaster, quantile_columns
from stockr1.data.calendar import AUTO, WEEKDAYS, check_mic
from stockr1.outdir import atomic_write, refuse_existing

PROG = "stockr1 forecast"


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one line (not usage + message) and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        _fail(message)


class _UserError(Exception):
    """A problem with the command line or the inputs: reported in one line, exit 2."""


MAX_ERROR_CHARS = 600


def _fail(message: str) -> None:
    line = " ".join(str(message).split())
    if len(line) > MAX_ERROR_CHARS:
        line = line[: MAX_ERROR_CHARS - 3] + "..."
    print(f"{PROG}: error: {line}", file=sys.stderr)
    raise SystemExit(2)


def _data_error(path: str, e: ValueError) -> _UserError:
    """The file in front (unless the message names it already); quality errors: the first three."""
    from stockr1.data.quality import DataQualityError

    msg = e.one_line() if isinstance(e, DataQualityError) else str(e)
    return _UserError(msg if str(Path(path)) in msg else f"{path}: {msg}")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="Forecast the trading days after the last row of an OHLCV CSV.")
    p.add_argument("--checkpoint", required=True, help="save_pretrained directory or Lightning .ckpt")
    p.add_argument("--decoder", default=None, help="action-conditioned decoder .pt (needed for --action)")
    p.add_argument("--data", required=True, help="OHLCV CSV/parquet file or a directory of them")
    p.add_argument("--horizon", type=int, default=10, help="trading days to forecast (<= the model's horizon)")
    p.add_argument("--quantiles", type=float, nargs="+", default=list(DEFAULT_QUANTILES), help="close quantile levels")
    p.add_argument("--action", default=None, help='forecast action JSON, e.g. \'{"direction": "up"}\'')
    p.add_argument("--samples", type=int, default=1000, help="sampled close paths the quantiles are taken over")
    p.add_argument("--seed", type=int, default=0, help="seed of the sampled paths")
    p.add_argument("--exchange", default=AUTO,
                   help="ISO MIC whose calendar dates the future days (e.g. XNYS, XNAS, XLON); auto (default): "
                        "inferred from the file's own missing weekdays; weekdays: Monday-Friday")
    p.add_argument("--jump-policy", choices=("error", "report"), default="error",
                   help="an unrecorded >1.8x close jump: error (default) or keep it")
    p.add_argument("--out", required=True, help="output CSV (refused if it exists, unless --overwrite)")
    p.add_argument("--plot", action="store_true", help="also write a fan chart PNG beside the CSV")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out (and its .png)")
    return p


def _check_paths(args: argparse.Namespace) -> tuple[Path, Path | None]:
    """Fail before any work when an input is missing or an output would be clobbered."""
    for flag, value in (("--checkpoint", args.checkpoint), ("--decoder", args.decoder), ("--data", args.data)):
        if value is not None and not Path(value).exists():
            raise _UserError(f"{flag} {value} does not exist")
    out = Path(args.out)
    png = out.with_suffix(".png") if args.plot else None
    for path in (out, png):
        if path is not None:
            refuse_existing(path, args.overwrite)
    if not out.parent.is_dir():
        raise _UserError(f"output directory {out.parent} does not exist")
    quantile_columns(args.quantiles)
    if args.exchange.strip().lower() not in (AUTO, WEEKDAYS):
        check_mic(args.exchange)
    return out, png


def fan_chart(forecast: pd.DataFrame, frames: dict[str, pd.DataFrame], path: Path, history: int = 60) -> None:
    """One panel per ticker: the last ``history`` closes, the mean path, the outer and inner close
    quantile bands of ``forecast`` and the high / low quantiles, dated."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    qcols = [c for c in forecast.columns if c.startswith("q")]
    tickers = list(dict.fromkeys(forecast["ticker"]))
    fig, axes = plt.subplots(len(tickers), 1, figsize=(8, 3 * len(tickers)), squeeze=False)
    for ax, name in zip(axes[:, 0], tickers, strict=True):
        f, hist = forecast[forecast["ticker"] == name], frames[name]["close"].iloc[-history:]
        ax.plot(hist.index, hist.to_numpy(), color="black", lw=1, label="close")
        for k, alpha in ((0, 0.2), (1, 0.3)):
            if len(qcols) >= 2 * (k + 1):
                lo, hi = qcols[k], qcols[-1 - k]
                ax.fill_between(f["date"], f[lo], f[hi], color="tab:blue", alpha=alpha, label=f"{lo}-{hi}")
        ax.plot(f["date"], f["mean"], color="tab:blue", lw=1.5, label="mean path")
        ax.plot(f["date"], f["high_q0.95"], color="tab:green", lw=0.8, ls=":", label="high q0.95")
        ax.plot(f["date"], f["low_q0.05"], color="tab:red", lw=0.8, ls=":", label="low q0.05")
        ax.set_title(f"{name}  U={f['uncertainty'].iloc[0]:.2f}", fontsize=9)
        ax.legend(fontsize=7, loc="upper left")
    fig.autofmt_xdate()
    fig.tight_layout()
    atomic_write(path, lambda p: fig.savefig(p, dpi=90, format="png"))
    plt.close(fig)


def run(args: argparse.Namespace) -> str:
    """Do the forecast; returns the closing line. Raises _UserError / ValueError / OSError on bad input."""
    from forecast_action.forecaster import as_frames
    from stockr1.data.sources.csv import load_csv

    out, png = _check_paths(args)
    try:
        frames, _ = as_frames(load_csv(args.data), jump_policy=args.jump_policy)
    except ValueError as e:  # name the file the bad column / date is in
        raise _data_error(args.data, e) from e
    absent = {t: [c for c in ("open", "high", "low", "volume") if f[c].isna().all()] for t, f in frames.items()}
    for t, cols in absent.items():
        if cols:  # masked, never filled in; the encoder must have been trained with such series to be trusted
            print(f"note: {t} has no {'/'.join(cols)}: masked (NaN in the output); a forecast of such a series is "
                  "as good as the encoder's training on close-only series (e.g. data source universe)", file=sys.stderr)
    forecaster = Forecaster.load(args.checkpoint, decoder=args.decoder)
    result = forecaster.predict(frames, horizon=args.horizon, quantile_levels=args.quantiles, action=args.action,
                                n_samples=args.samples, seed=args.seed, jump_policy=args.jump_policy,
                                exchange=args.exchange)
    atomic_write(out, lambda p: result.to_csv(p, index=False, date_format="%Y-%m-%d"))
    wrote = f"{out}"
    if png is not None:
        fan_chart(result, frames, png)
        wrote += f" and {png}"
    n = result["ticker"].nunique()
    first, last = result["date"].min().date(), result["date"].max().date()
    return (f"wrote {len(result)} rows ({n} ticker(s) x {args.horizon} trading days, {first}..{last}, "
            f"{calendar_line(result)}) to {wrote}")


def calendar_line(result: pd.DataFrame) -> str:
    """"calendar XNYS" when every ticker shares one, else "calendars A: XNYS; B: weekdays (...)"."""
    per = result.groupby("ticker", sort=False)["calendar"].first()
    if per.nunique() == 1:
        return f"calendar {per.iloc[0]}"
    return "calendars " + "; ".join(f"{t}: {c}" for t, c in per.items())


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        line = run(args)
    except (_UserError, ValueError, OSError) as e:  # user errors; a bug elsewhere still shows its traceback
        _fail(str(e))
    print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
