"""configs/ts_encoder/*.yaml: last.ckpt is the latest validation whatever val/loss did, so
``stockr1 ts fit --ckpt_path last`` resumes where the run stopped.

With ``save_last: true`` on the val/loss-monitored ModelCheckpoint, Lightning 2.6 writes last.ckpt only
when val/loss improves. The fit below uses lr 0 (the weights never change, so val/loss never improves
after the first epoch): that is the case where the old setting left last.ckpt at epoch 0.
"""

from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from ts_encoder.cli import main

CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "ts_encoder"
ENC = {"lookback": 20, "horizon": 5, "d_model": 16, "n_layers": 1, "n_heads": 2, "ffn_dim": 32, "d_llm": 8}
STEPS_PER_EPOCH = 3


def _checkpoint_callbacks(name: str) -> list[dict]:
    cbs = yaml.safe_load((CONFIGS / f"{name}.yaml").read_text())["trainer"]["callbacks"]
    return [cb["init_args"] for cb in cbs if cb["class_path"].endswith("ModelCheckpoint")]


@pytest.mark.parametrize("name", ["tiny", "small", "base", "large"])
def test_every_config_writes_last_from_an_unmonitored_callback(name: str) -> None:
    cbs = _checkpoint_callbacks(name)
    assert not [cb for cb in cbs if cb.get("save_last")]  # save_last on the monitored one lags behind
    best = [cb for cb in cbs if cb.get("monitor") == "val/loss"]
    last = [cb for cb in cbs if cb.get("filename") == "last"]
    assert len(best) == 1 and best[0]["filename"] == "best"
    assert len(last) == 1 and "monitor" not in last[0] and last[0]["save_top_k"] == 1
    assert last[0]["dirpath"] == best[0]["dirpath"] == f"checkpoints/ts_encoder/{name}"


def _config(tmp: Path, max_epochs: int) -> Path:
    """configs/ts_encoder/tiny.yaml with its callbacks as shipped (dirpath moved to tmp), a small
    encoder on synthetic data, lr 0, and a CSV logger only."""
    cfg = yaml.safe_load((CONFIGS / "tiny.yaml").read_text())
    for cb in cfg["trainer"]["callbacks"]:
        if "dirpath" in cb.get("init_args", {}):
            cb["init_args"]["dirpath"] = str(tmp / "ckpt")
    cfg["model"]["encoder"].update(ENC)
    cfg["model"].update(lr=0.0, warmup_steps=1, fan_chart_windows=0, val_samples=4, normalizer_fit_windows=64)
    cfg["data"] = {"source": "synthetic", "n_tickers": 2, "n_days": 250, "lookback": 20, "horizon": 5,
                   "batch_size": 16, "eval_batch_size": 64}
    cfg["trainer"].update(
        max_epochs=max_epochs, limit_train_batches=STEPS_PER_EPOCH, limit_val_batches=1, num_sanity_val_steps=0,
        enable_model_summary=False, default_root_dir=str(tmp),
        logger=[{"class_path": "lightning.pytorch.loggers.CSVLogger", "init_args": {"save_dir": str(tmp), "name": "logs"}}])
    path = tmp / f"fit_{max_epochs}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _ckpt(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=False)


def _val_epochs(tmp: Path, version: int) -> pd.Series:
    m = pd.read_csv(tmp / "logs" / f"version_{version}" / "metrics.csv")
    return m.dropna(subset=["val/loss"]).set_index("epoch")["val/loss"]


def test_last_ckpt_is_the_final_epoch_and_resume_continues_from_it(tmp_path: Path) -> None:
    assert main(["fit", "--config", str(_config(tmp_path, 4))]) == 0
    val = _val_epochs(tmp_path, 0)
    assert list(val.index) == [0, 1, 2, 3] and val.nunique() == 1  # val/loss never improved after epoch 0
    best, last = _ckpt(tmp_path / "ckpt" / "best.ckpt"), _ckpt(tmp_path / "ckpt" / "last.ckpt")
    assert best["global_step"] == STEPS_PER_EPOCH  # the monitored callback saved after epoch 0 only
    assert (last["epoch"], last["global_step"]) == (3, 4 * STEPS_PER_EPOCH)

    # one more epoch, resumed: only epoch 4 is trained (an epoch-0 last.ckpt would redo epochs 1-4)
    assert main(["fit", "--config", str(_config(tmp_path, 5)), "--ckpt_path", "last"]) == 0
    assert list(_val_epochs(tmp_path, 1).index) == [4]
    last = _ckpt(tmp_path / "ckpt" / "last.ckpt")
    assert (last["epoch"], last["global_step"]) == (4, 5 * STEPS_PER_EPOCH)
    # no best-v1.ckpt beside a stale best.ckpt; the best one's safetensors form rewritten in place
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["best.ckpt", "last.ckpt", "pretrained"]


def test_demo_ts_stage_keeps_the_configs_checkpoint_callbacks(tmp_path: Path) -> None:
    """The demo's ts stage replaces the callback list (to write into the run dir); it must keep the
    config's last.ckpt callback rather than rebuild one with save_last on the monitored callback."""
    from stockr1.pipeline.stages import run_local_callbacks

    cfg = yaml.safe_load((CONFIGS / "tiny.yaml").read_text())
    shipped = cfg["trainer"]["callbacks"]
    moved = run_local_callbacks(cfg, tmp_path / "checkpoints")
    assert [cb["class_path"] for cb in moved] == [cb["class_path"] for cb in shipped]
    for old, new in zip(shipped, moved, strict=True):
        if old["class_path"].endswith("ModelCheckpoint"):
            assert new["init_args"] == {**old["init_args"], "dirpath": str(tmp_path / "checkpoints")}
        else:
            assert new == old
    assert shipped[0]["init_args"]["dirpath"] == "checkpoints/ts_encoder/tiny"  # the input is not modified


def test_a_second_fit_into_a_used_dirpath_is_refused_unless_overwrite(tmp_path: Path) -> None:
    """Lightning alone would write best-v1.ckpt beside the stale best.ckpt every doc points to."""
    cfg = str(_config(tmp_path, 1))
    assert main(["fit", "--config", cfg]) == 0
    first = (tmp_path / "ckpt" / "best.ckpt").read_bytes()
    with pytest.raises(ValueError, match=r"best\.ckpt.*already exist.*--resume.*--overwrite"):
        main(["fit", "--config", cfg])
    assert sorted(p.name for p in (tmp_path / "ckpt").glob("*.ckpt")) == ["best.ckpt", "last.ckpt"]
    assert (tmp_path / "ckpt" / "best.ckpt").read_bytes() == first  # the refused run touched nothing

    assert main(["fit", "--config", cfg, "--overwrite", "true"]) == 0
    assert sorted(p.name for p in (tmp_path / "ckpt").glob("*.ckpt")) == ["best.ckpt", "last.ckpt"]  # no -v1


def test_evaluating_a_checkpoint_with_another_architecture_names_the_mismatch(tmp_path: Path) -> None:
    cfg = _config(tmp_path, 1)
    assert main(["fit", "--config", str(cfg)]) == 0
    ckpt = str(tmp_path / "ckpt" / "best.ckpt")
    wider = yaml.safe_load(cfg.read_text())
    wider["model"]["encoder"]["d_model"] = 32
    other = tmp_path / "wider.yaml"
    other.write_text(yaml.safe_dump(wider))
    with pytest.raises(ValueError, match=r"does not match the config's model \(encoder\.d_model: checkpoint 16 != config 32"):
        main(["test", "--config", str(other), "--ckpt_path", ckpt])
    with pytest.raises(ValueError, match="no such checkpoint file"):
        main(["test", "--config", str(cfg), "--ckpt_path", str(tmp_path / "missing.ckpt")])
    assert main(["test", "--config", str(cfg), "--ckpt_path", ckpt]) == 0  # its own config loads it
    # a checkpoint written before scale_ref / ewma_lambda existed: the missing fields count at their defaults
    old = torch.load(ckpt, map_location="cpu", weights_only=False)
    for k in ("scale_ref", "ewma_lambda"):
        old["hyper_parameters"]["encoder"].pop(k)
    torch.save(old, tmp_path / "old.ckpt")
    assert main(["test", "--config", str(cfg), "--ckpt_path", str(tmp_path / "old.ckpt")]) == 0
    ewma = yaml.safe_load(cfg.read_text())
    ewma["model"]["encoder"]["scale_ref"] = "ewma"
    (tmp_path / "ewma.yaml").write_text(yaml.safe_dump(ewma))
    with pytest.raises(ValueError, match=r"encoder\.scale_ref: checkpoint 'window' != config 'ewma'"):
        main(["test", "--config", str(tmp_path / "ewma.yaml"), "--ckpt_path", str(tmp_path / "old.ckpt")])
