"""DDP: two CPU processes (strategy=ddp, gloo) train the encoder for two steps through the CLI."""

import os
import subprocess
import sys
from pathlib import Path

import torch
import yaml

REPO = Path(__file__).resolve().parents[1]


def test_ddp_two_cpu_processes(tmp_path: Path) -> None:
    config = {
        "seed_everything": 0,
        "model": {"encoder": {"lookback": 20, "horizon": 5, "d_model": 16, "n_layers": 1, "n_heads": 2,
                              "ffn_dim": 32, "d_llm": 8},
                  "lr": 1e-3, "warmup_steps": 1, "fan_chart_windows": 0, "val_samples": 4},
        "data": {"source": "synthetic", "n_tickers": 2, "n_days": 250, "lookback": 20, "horizon": 5,
                 "batch_size": 16, "eval_batch_size": 32},
        "trainer": {"default_root_dir": str(tmp_path), "accelerator": "cpu", "devices": 2, "strategy": "ddp", "max_steps": 2,
                    "limit_val_batches": 1, "val_check_interval": 2, "num_sanity_val_steps": 0,
                    "logger": False, "enable_progress_bar": False, "enable_model_summary": False,
                    "callbacks": [{"class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
                                   "init_args": {"dirpath": str(tmp_path / "ckpt"), "save_last": True}}]},
    }
    cfg_path = tmp_path / "ddp.yaml"
    cfg_path.write_text(yaml.safe_dump(config))
    env = {**os.environ, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1", "PL_DISABLE_FORK": "1"}
    proc = subprocess.run([sys.executable, "-m", "ts_encoder.cli", "fit", "--config", str(cfg_path)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    assert "MEMBER: 2/2" in log  # both ranks joined the process group
    ckpt = torch.load(tmp_path / "ckpt" / "last.ckpt", map_location="cpu", weights_only=False)
    assert ckpt["global_step"] == 2
    assert ckpt["state_dict"]["normalizer.fitted"].item()
