"""The report's Lightning curves join every ``logs/version_*/metrics.csv`` of a resumed run: ordered by
step, versions in numeric order, the later version winning on a step logged twice (hand-made CSVs)."""

from pathlib import Path

import pytest

from stockr1.pipeline.report import lightning_series, training_curves


def _csv(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.strip() + "\n")


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    """A ts run resumed several times; three segments kept: version_0 reached epoch 2, version_9 was
    resumed from the epoch-1 checkpoint (redoes epoch 2, then reaches epoch 3), version_10 from the
    epoch-2 checkpoint. A string sort would put version_10 before version_9."""
    d = tmp_path / "ts" / "logs"
    _csv(d / "version_0" / "metrics.csv", """
epoch,step,train/loss,val/loss
0,2,,3.0
1,4,2.5,
1,5,,2.0
2,8,,1.5
""")
    _csv(d / "version_9" / "metrics.csv", """
epoch,lr-AdamW,step,val/loss
2,0.001,8,1.4
3,0.001,11,1.2
""")
    _csv(d / "version_10" / "metrics.csv", """
epoch,step,val/loss
4,14,1.0
3,11,1.1
""")
    return d


def test_versions_joined_by_step_later_version_wins(logs: Path) -> None:
    got = lightning_series(logs, ["val/loss", "train/loss", "val/absent"])
    # step 8: version_9 (1.4) over version_0 (1.5); step 11: version_10 (1.1) over version_9 (1.2);
    # version_10's rows are out of step order in the file and come out sorted
    assert got["val/loss"] == [(0.0, 3.0), (1.0, 2.0), (2.0, 1.4), (3.0, 1.1), (4.0, 1.0)]
    assert got["train/loss"] == [(1.0, 2.5)]
    assert got["val/absent"] == []


def test_training_curves_show_every_segment(logs: Path) -> None:
    run = logs.parents[1]
    curves = training_curves(run)
    pts = curves["ts: validation L_TS per epoch"]["val/loss"]
    assert [e for e, _ in pts] == [0.0, 1.0, 2.0, 3.0, 4.0]  # not just the last version's epochs 3-4
    assert "action: validation L_TS per epoch" not in curves  # no action logs: no empty panel


def test_single_version_unchanged(tmp_path: Path) -> None:
    _csv(tmp_path / "version_0" / "metrics.csv", "epoch,step,val/loss\n0,2,3.0\n1,5,2.0\n")
    assert lightning_series(tmp_path, ["val/loss"]) == {"val/loss": [(0.0, 3.0), (1.0, 2.0)]}
    assert lightning_series(tmp_path / "missing", ["val/loss"]) == {"val/loss": []}


def test_bad_csv_is_named(tmp_path: Path) -> None:
    _csv(tmp_path / "version_0" / "metrics.csv", "epoch,val/loss\n0,3.0\n")
    with pytest.raises(ValueError, match=r"version_0/metrics.csv.*no \['step'\] column"):
        lightning_series(tmp_path, ["val/loss"])
    _csv(tmp_path / "version_0" / "metrics.csv", "epoch,step,val/loss\n0,2,3.0\n1,5,2.0e\n")
    with pytest.raises(ValueError, match=r"version_0/metrics.csv, line 3"):
        lightning_series(tmp_path, ["val/loss"])
