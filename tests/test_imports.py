"""`llm` and `rl` are also names of PyPI packages: make sure ours are the ones imported."""

import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", ["stockr1", "ts_encoder", "forecast_action", "llm", "rl", "benchmarks"])
def test_package_resolves_inside_repo(name: str) -> None:
    module = importlib.import_module(name)
    path = Path(module.__file__).resolve()
    assert REPO in path.parents, f"{name} imported from {path}, not from this repository"


def test_cli_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    from stockr1.cli import SUBCOMMANDS, main

    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in SUBCOMMANDS:
        assert name in out
    assert main(["no-such-command"]) == 2


def test_every_subcommand_target_exists_and_answers_help(capsys: pytest.CaptureFixture[str]) -> None:
    from stockr1.cli import SUBCOMMANDS, main

    for target, _ in SUBCOMMANDS.values():
        module, func = target.split(":")
        assert callable(getattr(importlib.import_module(module), func)), target
    for name in ("decoder", "ask", "sft", "grpo"):
        with pytest.raises(SystemExit) as e:
            main([name, "--help"])
        assert e.value.code == 0 and f"stockr1 {name}" in capsys.readouterr().out


def test_cli_bad_input_is_one_line_on_stderr_and_debug_shows_the_traceback(tmp_path, capsys) -> None:
    import pytest

    from stockr1.cli import main

    assert main(["grpo", "--config", "configs/grpo/tiny.yaml", "--sft", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "has no policy/" in err[0] and str(tmp_path / "missing") in err[0]
    with pytest.raises(FileNotFoundError):
        main(["--debug", "grpo", "--config", "configs/grpo/tiny.yaml", "--sft", str(tmp_path / "missing")])
    assert main(["--version"]) == 0 and capsys.readouterr().out.startswith("stockr1 ")
