"""Every stage trains on a dataset built from a CSV the project never saw (issue 20, part 1):
`stockr1 data build --source csv`, then on ``data: {source: dataset, path: DIR}`` a tiny `stockr1 ts fit`
and `stockr1 decoder` (one epoch each), a tiny `stockr1 sft` for a few steps, one u-GRPO step,
`stockr1 bench qa` on the SFT run, and the comparison's decision environment. What each stage trained,
was scaled by or decided on comes from the CSV's tickers and dates."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from benchmarks.qa.command import main as bench_qa
from forecast_action.decoder import ActionConditionedDecoder
from forecast_action.derive import ActionThresholds
from forecast_action.train import main as decoder_main
from llm.qa.dataset import load_items
from llm.sft import run_sft
from rl.setup import build_setup, run_grpo
from stockr1.data import load_windows
from stockr1.data.run_data import source_windows
from stockr1.types import train_only
from tests.dataset_csv import TICKERS, build_csv_dataset
from tests.tiny_runs import tiny_sft_config
from ts_encoder.cli import main as ts_main
from ts_encoder.datamodule import input_stats

ROOT = Path(__file__).resolve().parents[1]
DECODER = {"seed": 0, "warmup_steps": 1, "tool_samples": 4,
           "ts": {"lookback": 90, "horizon": 10, "patch_len": 15, "d_model": 16, "n_layers": 1, "n_heads": 2,
                  "ffn_dim": 32, "dropout": 0.0, "d_llm": 8},
           "action": {"cond_dim": 8, "emb_dim": 2, "hidden": 16}}


def _csv_days(df: pd.DataFrame) -> dict[str, set[pd.Timestamp]]:
    return {tk: set(pd.to_datetime(g["Date"])) for tk, g in df.groupby("Ticker")}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> tuple[Path, pd.DataFrame]:
    return build_csv_dataset(tmp_path_factory.mktemp("dataset_csv"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory, dataset):
    root = tmp_path_factory.mktemp("dataset_stages")
    ds, df = dataset
    data = {"source": "dataset", "path": str(ds), "lookback": 90, "horizon": 10}
    sft_cfg = tiny_sft_config(root, {"n_train": 8, "n_val": 2, "n_test": 2}, DECODER, {"max_steps": 3}, data=data)
    (root / "sft.yaml").write_text(yaml.safe_dump(sft_cfg))
    sft = run_sft(root / "sft.yaml", out_root=root / "sft")
    grpo_cfg = {"run": "g", "seed": 0, "data": data, "max_context_chars": 200,
                "sft": {"run_dir": sft["run_dir"]}, "qa": {"max_train_queries": 2},
                "rollout": {"max_new_tokens": 8, "temperature": 1.0},
                "train": {"group_size": 2, "queries_per_step": 1, "max_steps": 1, "lr": 1e-4, "micro_batch": 4,
                          "accelerator": "cpu", "ckpt_every": 10}}
    grpo = run_grpo(grpo_cfg, out_root=root / "grpo", use_wandb=False)
    return data, df, sft, grpo_cfg, grpo


def test_sft_trains_on_the_csv_tickers_and_dates(runs) -> None:
    _, df, sft, _, _ = runs
    assert sft["steps"] == 3 and sft["n_traces"] > 0 and np.isfinite(sft["final"]["loss"])
    items = load_items(Path(sft["run_dir"]) / "qa.jsonl")
    days = _csv_days(df)
    assert items and {it.ticker for it in items} <= set(TICKERS)
    assert all(pd.Timestamp(it.date) in days[it.ticker] for it in items)
    assert (Path(sft["run_dir"]) / "policy").is_dir() and (Path(sft["run_dir"]) / "decoder").is_dir()


def test_grpo_steps_on_queries_from_the_csv(runs) -> None:
    _, df, sft, grpo_cfg, grpo = runs
    assert grpo["steps"] == 1 and grpo["n_train_queries"] == 2 and (Path(grpo["out_dir"]) / "policy").is_dir()
    st = build_setup(grpo_cfg, Path(sft["run_dir"]), 1)
    days = _csv_days(df)
    rows = [s.sample_ref for s in st.samples]
    assert rows and all(st.windows.split[r] == "train" for r in rows)
    for r in rows:
        tk, t = str(st.windows.ticker[r]), pd.Timestamp(st.windows.date[r])
        assert tk in TICKERS and t in days[tk]


def test_compare_environment_reads_the_dataset(runs) -> None:
    from rl.methods.env import DecisionEnv

    data, df, _, _, _ = runs
    from stockr1.backtest import BacktestConfig
    from stockr1.data.config import DataConfig

    cfg = SimpleNamespace(seed=0, data=DataConfig.from_dict(data), decisions_per_ticker=4, n_train=4,
                          max_context_chars=200, benchmark=None, backtest=BacktestConfig())
    env = DecisionEnv.build(cfg)
    assert set(env.prices) == set(env.frames) == set(TICKERS) and len(env.rows) == 8
    days = _csv_days(df)
    for i in env.rows:
        tk, t = env.ref(int(i))
        assert env.windows.split[i] == "test" and t in days[tk]
    assert env.labels.shape == (len(env.windows),)


def test_ts_fit_trains_on_the_dataset(dataset, tmp_path: Path) -> None:
    """`stockr1 ts fit` with configs/ts_encoder/tiny.yaml's trainer and callbacks (dirpaths moved, CSV logger
    only) on the dataset: the encoder's input scaling is the dataset's train split's."""
    ds, _ = dataset
    cfg = yaml.safe_load((ROOT / "configs" / "ts_encoder" / "tiny.yaml").read_text())
    for cb in cfg["trainer"]["callbacks"]:
        if "dirpath" in cb.get("init_args", {}):
            cb["init_args"]["dirpath"] = str(tmp_path / "ckpt")
    cfg["model"]["encoder"].update(d_model=16, n_layers=1, ffn_dim=32, d_llm=8)
    cfg["model"].update(warmup_steps=1, fan_chart_windows=0, val_samples=4, normalizer_fit_windows=64)
    cfg["data"] = {"source": "dataset", "path": str(ds), "lookback": 90, "horizon": 10, "batch_size": 16,
                   "eval_batch_size": 64}
    cfg["trainer"].update(max_epochs=1, limit_train_batches=2, limit_val_batches=1, num_sanity_val_steps=0,
                          enable_model_summary=False, default_root_dir=str(tmp_path),
                          logger=[{"class_path": "lightning.pytorch.loggers.CSVLogger",
                                   "init_args": {"save_dir": str(tmp_path), "name": "logs"}}])
    (tmp_path / "ts.yaml").write_text(yaml.safe_dump(cfg))
    assert ts_main(["fit", "--config", str(tmp_path / "ts.yaml")]) == 0
    state = torch.load(tmp_path / "ckpt" / "best.ckpt", map_location="cpu", weights_only=False)["state_dict"]
    loc, scale = input_stats(train_only(load_windows(ds)))
    torch.testing.assert_close(state["model.x_loc"], loc)
    torch.testing.assert_close(state["model.x_scale"], scale)


def test_a_dataset_of_another_window_shape_is_refused(dataset) -> None:
    with pytest.raises(ValueError, match="built with lookback 90, horizon 10; the config asks for 60, 10"):
        source_windows("dataset", str(dataset[0]), 60, 10)


def test_decoder_trains_on_the_dataset(dataset, tmp_path: Path) -> None:
    """`stockr1 decoder` for one epoch on the dataset: its action thresholds are fitted on the dataset's train split."""
    ds, _ = dataset
    cfg = {"data": {"source": "dataset", "path": str(ds), "lookback": 90, "horizon": 10, "max_train": 64,
                    "max_val": 32},
           "model": {**DECODER["ts"], "patch_len": 5}, "action": DECODER["action"],
           "train": {"lr": 1e-3, "warmup_steps": 1, "normalizer_fit_windows": 64, "batch_size": 32, "max_epochs": 1}}
    (tmp_path / "dec.yaml").write_text(yaml.safe_dump(cfg))
    assert decoder_main(["--config", str(tmp_path / "dec.yaml"), "--out", str(tmp_path / "dec"), "--threads", "1"]) == 0
    saved = ActionConditionedDecoder.from_pretrained(tmp_path / "dec" / "decoder")  # the thresholds travel inside
    assert saved.thresholds == ActionThresholds.fit(train_only(load_windows(ds)))


def test_bench_qa_evaluates_the_sft_run_on_the_dataset(runs, tmp_path: Path) -> None:
    """`stockr1 bench qa` on the SFT run reads the run's data section (the dataset) and grades its test questions."""
    _, df, sft, _, _ = runs
    run = Path(sft["run_dir"])
    assert bench_qa(["--checkpoint", str(run), "--out", str(tmp_path), "--n", "2", "--max-new-tokens", "8",
                     "--n-boot", "20", "--threads", "1"]) == 0
    test = [it for it in load_items(run / "qa.jsonl") if it.split == "test"][:2]
    days = _csv_days(df)
    assert test and all(it.ticker in TICKERS and pd.Timestamp(it.date) in days[it.ticker] for it in test)
    samples = [s["question"] for s in json.loads((tmp_path / "samples.json").read_text())["stock-r1-sft"]]
    assert samples == [it.question for it in test]
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert {"stock-r1-sft", "majority", "random_walk"} <= set(metrics)
