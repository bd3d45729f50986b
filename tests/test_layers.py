"""The import layering of pyproject.toml ([tool.importlinter]) holds, catches a planted wrong import,
and places every stockr1 module (the core floor is an explicit list, so a new module must be added)."""

from __future__ import annotations

import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path

import stockr1

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: import-linter depends on tomli there
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("stockr1", "ts_encoder", "forecast_action", "llm", "rl", "benchmarks")
LINT = ("from importlinter.cli import lint_imports; "
        "raise SystemExit(lint_imports(config_filename='pyproject.toml', no_cache=True))")


def lint(cwd: Path) -> subprocess.CompletedProcess:
    """``lint-imports`` on the packages under ``cwd`` (it puts cwd first on sys.path)."""
    return subprocess.run([sys.executable, "-c", LINT], cwd=cwd, capture_output=True, text=True, timeout=120)


def contract(contract_id: str) -> dict:
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    return next(c for c in cfg["contracts"] if c["id"] == contract_id)


def test_contracts_hold():
    r = lint(REPO)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 broken" in r.stdout


def test_a_planted_upward_import_breaks_the_floors(tmp_path: Path):
    for pkg in PACKAGES:  # a copy of the sources, so the plant never touches the repository
        for src in (REPO / pkg).rglob("*.py"):
            dst = tmp_path / src.relative_to(REPO)
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
    shutil.copyfile(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "ts_encoder" / "planted.py").write_text("def f():\n    from benchmarks import cli\n")
    r = lint(tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "ts_encoder.planted -> benchmarks.cli" in r.stdout  # both contracts name it
    assert "2 broken" in r.stdout


def test_every_stockr1_module_sits_on_a_floor():
    listed = {m.strip() for layer in contract("floors")["layers"] for m in layer.replace("|", ":").split(":")}
    children = {f"stockr1.{m.name}" for m in pkgutil.iter_modules(stockr1.__path__)}
    assert children - listed == set(), "add the new stockr1 module to the floors contract in pyproject.toml"
