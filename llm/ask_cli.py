"""``stockr1 ask``: the Stock-R1 path on your own data (``llm.ask``).

    stockr1 ask --policy RUN_DIR --data FILE.csv --question "Will the close rise over the next 5 days?" \\
        [--answer-type yes_no|choice|numeric] [--choices up down flat] [--context-file NOTES.txt] [--json] \\
        [--exchange auto|MIC|weekdays]
    stockr1 ask --policy RUN_DIR --ticker AAPL --question "..."      # yfinance; needs the network

Prints the policy's rationale, its forecast action, the decoded trajectory (dated on the exchange's trading
days after the last row: ``--exchange``, default ``auto`` = the exchange Yahoo reports for ``--ticker``, else
inferred from the data's own dates, else weekdays; the output names the calendar) and the answer; ``--json``
prints the same as one JSON list (one entry per ticker).
Bad input (a missing run or file, a bad column or date, too few rows) is one line on stderr, exit 2.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from llm.ask import ANSWER_TYPES, ask, load_run
from stockr1.data.calendar import AUTO, WEEKDAYS, check_mic
from stockr1.data.sources import source_exchanges


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="stockr1 ask", description=__doc__.splitlines()[0])
    p.add_argument("--policy", required=True, help="a finished stockr1 sft or grpo run directory (policy/ + decoder/)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", help="OHLCV CSV/parquet file or a directory of them (one ticker per file, or a "
                                    "ticker column)")
    src.add_argument("--ticker", help="a Yahoo Finance symbol: the last two years of daily bars (needs the network)")
    p.add_argument("--question", required=True, help="the question, about the days after the last row")
    p.add_argument("--answer-type", choices=ANSWER_TYPES, default="yes_no")
    p.add_argument("--choices", nargs="+", default=(), help="the answer options of a choice question")
    p.add_argument("--tolerance", type=float, default=0.5, help="numeric answers: the tolerance the prompt states")
    p.add_argument("--context-file", default=None, help="text context (news, notes) known at the last row's close")
    p.add_argument("--max-new-tokens", type=int, default=640)
    p.add_argument("--jump-policy", choices=("error", "report"), default="error",
                   help="an unrecorded >1.8x close jump: error (default) or keep it")
    p.add_argument("--exchange", default=AUTO,
                   help="ISO MIC whose calendar dates the trajectory (e.g. XNYS, XNAS); auto (default): the "
                        "source's exchange, else inferred from the data's missing weekdays; weekdays: Mon-Fri")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    return p


def _frames(args: argparse.Namespace) -> tuple[dict[str, pd.DataFrame], dict[str, str | None]]:
    """The checked frames and the exchange each ticker's source declares (None: not declared)."""
    from forecast_action.forecaster import as_frames

    if args.data is not None:
        from stockr1.data.sources.csv import load_csv

        if not Path(args.data).exists():
            raise FileNotFoundError(f"--data {args.data} does not exist")
        try:
            raw = load_csv(args.data)
        except ValueError as e:
            raise ValueError(e if str(Path(args.data)) in str(e) else f"{args.data}: {e}") from e
    else:
        from stockr1.data.sources.yfinance import load_yfinance

        end = pd.Timestamp.today().normalize()
        raw = load_yfinance([args.ticker], start=str((end - pd.DateOffset(years=2)).date()),
                            end=str((end + pd.Timedelta(days=1)).date()), progress=False)
    frames, _ = as_frames(raw, jump_policy=args.jump_policy)
    declared = source_exchanges("yfinance", list(frames)) if args.ticker is not None else {}
    return frames, declared


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not Path(args.policy).is_dir():
        raise FileNotFoundError(f"--policy {args.policy} is not a directory")
    context = Path(args.context_file).read_text() if args.context_file else ""
    if args.exchange.strip().lower() not in (AUTO, WEEKDAYS):
        check_mic(args.exchange)
    policy, decoder = load_run(args.policy)
    frames, declared = _frames(args)
    answers = ask(policy, decoder, frames, args.question, args.answer_type, args.choices, args.tolerance,
                  context, args.max_new_tokens, exchange=args.exchange, declared=declared)
    if args.json:
        print(json.dumps([a.to_dict() for a in answers], indent=1))
    else:
        print("\n\n".join(a.render() for a in answers))
    return 0
