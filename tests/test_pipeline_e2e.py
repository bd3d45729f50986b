"""The real first two demo stages (data build -> Lightning TS fit) on a small synthetic dataset, through
`stockr1 demo --from-scratch --config`: run dirs, markers, the Lightning checkpoint, skip on rerun, resume argv."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from stockr1.pipeline.demo import main
from stockr1.pipeline.stages import TS_MODEL


@pytest.mark.slow
def test_data_and_ts_stages_on_synthetic(tmp_path: Path) -> None:
    cfg = {
        "seed": 1, "threads": 1, "wandb": False,
        "data": {"args": {"source": "synthetic", "n-days": 400, "no-context": True}},
        "ts": {"config": "configs/ts_encoder/tiny.yaml", "overrides": {
            "trainer": {"max_epochs": 1, "limit_train_batches": 2, "limit_val_batches": 1},
            "data": {"batch_size": 32, "eval_batch_size": 64},
            "model": {"normalizer_fit_windows": 64, "val_samples": 8, "fan_chart_windows": 0}}},
    }
    cfg_path = tmp_path / "demo.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg))
    run = tmp_path / "run"
    assert main(["--config", str(cfg_path), "--out", str(run), "--from-scratch", "--only", "data"]) == 0
    assert main(["--config", str(cfg_path), "--out", str(run), "--from-scratch", "--only", "ts"]) == 0
    assert (run / "ts" / "checkpoints" / "best.ckpt").exists() and (run / "ts" / "checkpoints" / "last.ckpt").exists()
    assert (run / TS_MODEL / "config.json").exists()  # the saved encoder the benches and the action stage read
    done = json.loads((run / "ts" / ".done").read_text())
    assert done["argv"][:3] == ["stockr1", "ts", "fit"] and "--resume" not in done["argv"]
    over = yaml.safe_load((run / "ts" / "demo_overrides.yaml").read_text())
    assert over["seed_everything"] == 1 and over["data"] == {"batch_size": 32, "eval_batch_size": 64,
                                                           "source": "dataset", "path": str(run / "data")}
    man = json.loads((run / "manifest.json").read_text())
    data_man = json.loads((run / "data" / "manifest.json").read_text())
    assert man["data_hash"] == data_man["content_hash"] and set(man["stages"]) == {"data", "ts"}
    # an interrupted fit (no .done, last.ckpt present) resumes: `ts fit --resume` (README, Resume)
    (run / "ts" / ".done").unlink()
    assert main(["--config", str(cfg_path), "--out", str(run), "--from-scratch", "--only", "ts"]) == 0
    done = json.loads((run / "ts" / ".done").read_text())
    assert done["resumed"] and done["argv"][-1] == "--resume"
