"""Every LLM stage trains on a dataset built from a CSV the project never saw (issue 20, part 1):
`stockr1 data build --source csv`, then a tiny `stockr1 sft` for a few steps and one u-GRPO step
on ``data: {source: dataset, path: DIR}``, and the comparison's decision environment on the same
data. What each stage trained or decided on comes from the CSV's tickers and dates."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import yaml

from llm.qa.dataset import load_items
from llm.sft import run_sft
from rl.cli import build_setup, run_grpo
from tests.dataset_csv import TICKERS, build_csv_dataset
from tests.tiny_runs import tiny_sft_config

DECODER = {"seed": 0, "warmup_steps": 1, "tool_samples": 4,
           "ts": {"lookback": 90, "horizon": 10, "patch_len": 15, "d_model": 16, "n_layers": 1, "n_heads": 2,
                  "ffn_dim": 32, "dropout": 0.0, "d_llm": 8},
           "action": {"cond_dim": 8, "emb_dim": 2, "hidden": 16}}


def _csv_days(df: pd.DataFrame) -> dict[str, set[pd.Timestamp]]:
    return {tk: set(pd.to_datetime(g["Date"])) for tk, g in df.groupby("Ticker")}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("dataset_stages")
    ds, df = build_csv_dataset(root / "data")
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
    cfg = SimpleNamespace(seed=0, data=data, decisions_per_ticker=4, n_train=4, max_context_chars=200,
                          benchmark=None, backtest={})
    env = DecisionEnv.build(cfg)
    assert set(env.prices) == set(env.frames) == set(TICKERS) and len(env.rows) == 8
    days = _csv_days(df)
    for i in env.rows:
        tk, t = env.ref(int(i))
        assert env.windows.split[i] == "test" and t in days[tk]
    assert env.labels.shape == (len(env.windows),)
