"""A tiny synthetic `stockr1 sft` config shared by the end-to-end tests that train SFT then GRPO."""

from pathlib import Path
from typing import Any

from llm.build import load_data
from llm.tokenizer import train_tokenizer

DATA = {"source": "synthetic", "n_tickers": 1, "n_days": 320, "seed": 0, "lookback": 90, "horizon": 10}
DECODER_TS = {"lookback": 90, "horizon": 10, "patch_len": 15, "d_model": 16, "n_layers": 1, "n_heads": 2,
              "ffn_dim": 32, "dropout": 0.0, "d_llm": 8}


def tiny_sft_config(root: Path, qa: dict[str, Any], decoder: dict[str, Any], train: dict[str, Any],
                    data: dict[str, Any] | None = None) -> dict[str, Any]:
    """Trains a throwaway tokenizer under ``root`` and returns the SFT config dict around it
    (``data``: any ``data:`` section, default the tiny synthetic ``DATA``)."""
    data = DATA if data is None else data
    windows, _ = load_data(data)
    tok = root / "tok"
    train_tokenizer([str(c) for c in windows.context[:40]] + ["Question: will it rise? <answer>Yes</answer>"] * 5,
                    500, tok)
    policy = {"name_or_path": "tiny", "tokenizer_path": str(tok), "tiny_hidden": 32, "tiny_layers": 1,
              "tiny_heads": 2, "tiny_kv_heads": 1, "tiny_intermediate": 64, "lora_r": 0, "d_ts": 8}
    base_train = {"lr": 1e-3, "warmup_steps": 1, "max_steps": 2, "batch_size": 2, "max_len": 4096, "ckpt_every": 10,
                  "log_every": 10, "accelerator": "cpu"}
    return {"run": "s", "data": data, "max_context_chars": 200, "qa": {**qa, "seed": 0},
            "traces": {"drop_trivial": False}, "decoder": decoder, "policy": policy, "train": {**base_train, **train},
            "wandb": {"mode": "disabled"}}
