"""Command feedback (#18): `stockr1 ts` bad input is one line on stderr with exit 2 (Lightning's --help
untouched), and Lightning loops print progress lines with a rate and an ETA (ts_encoder.progress)."""

import re
from pathlib import Path

import lightning as L
import pytest
from lightning.pytorch.demos.boring_classes import BoringModel

from stockr1.cli import main
from ts_encoder.progress import StepProgress

TINY = "configs/ts_encoder/tiny.yaml"


def _one_line_error(argv: list[str], capsys) -> str:
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1, err
    return err


def test_ts_bad_input_is_one_line_on_stderr(tmp_path: Path, capsys) -> None:
    err = _one_line_error(["ts", "fit", "--config", str(tmp_path / "missing.yaml")], capsys)
    assert err.startswith("stockr1 ts fit: error: ") and "missing.yaml" in err and "does not exist" in err
    extra = tmp_path / "extra.yaml"
    extra.write_text("model:\n  bogus_key: 1\n")
    assert "bogus_key" in _one_line_error(["ts", "fit", "--config", TINY, "--config", str(extra)], capsys)
    assert "trainer.max_epochs" in _one_line_error(["ts", "fit", "--config", TINY, "--trainer.max_epochs", "abc"],
                                                    capsys)
    # the checkpoint check runs before the Trainer exists: nothing of Lightning's precedes the error
    assert "no such checkpoint file" in _one_line_error(
        ["ts", "test", "--config", TINY, "--ckpt_path", str(tmp_path / "none.ckpt")], capsys)


def test_ts_help_is_lightnings(capsys) -> None:
    with pytest.raises(SystemExit) as e:
        main(["ts", "fit", "--help"])
    assert e.value.code == 0 and "--trainer.max_epochs" in capsys.readouterr().out


def test_step_progress_prints_rate_and_eta(tmp_path: Path, capsys) -> None:
    trainer = L.Trainer(max_steps=6, callbacks=[StepProgress(every_n_steps=4)], logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0,
                        default_root_dir=tmp_path, accelerator="cpu")
    trainer.fit(BoringModel())
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("step ")]
    pattern = re.compile(r"^step (\d+)/6 \([\d.]+%\) [\d.]+ s/step, ETA \d+s$")
    assert [int(pattern.match(ln).group(1)) for ln in lines] == [4, 6], lines  # every 4 steps and the last
    with pytest.raises(ValueError, match="every_n_steps"):
        StepProgress(every_n_steps=0)
