"""Subcommand tables: ``{name: ("module:function", help)}`` run by ``dispatch``, shared by the
``stockr1`` entry point (``stockr1.cli``) and ``stockr1 bench`` (``benchmarks.cli``). The target
module is imported only when its command runs."""

from __future__ import annotations

import importlib
import sys


def dispatch(table: dict[str, tuple[str, str]], argv: list[str], usage: str) -> int:
    """Run ``table[argv[0]]`` with the remaining arguments."""
    if not argv or argv[0] in {"-h", "--help", "help"}:
        print(usage)
        return 0
    name, rest = argv[0], argv[1:]
    if name not in table:
        print(f"unknown command {name!r}\n\n{usage}", file=sys.stderr)
        return 2
    module_name, func_name = table[name][0].split(":")
    func = getattr(importlib.import_module(module_name), func_name)
    result = func(rest)
    return int(result or 0)
