"""What the LLM stages build from a run config: the data (windows + point-in-time context) and the
policy (with the offline tokenizer a tiny policy trains on the run's own corpus)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from llm.policy import Policy, PolicyConfig
from llm.qa.context import store_context
from llm.qa.prompt import SYSTEM_PROMPT
from llm.traces import Trace
from stockr1.data import load_run_data
from stockr1.data.config import DataConfig


def load_data(data: Mapping[str, Any] | DataConfig | None):
    """(windows with rendered context, context_fn) for the configured source: sample, synthetic, or
    ``source: dataset, path: DIR`` (any ``stockr1 data build`` output; ``stockr1.data.load_run_data``
    checks its manifest and applies its membership). An unknown key or an impossible shape is
    refused here, before any work."""
    d = load_run_data(DataConfig.from_dict(data))
    return d.windows, store_context(d.store)


def build_policy(cfg: dict[str, Any], traces: Sequence[Trace], run_dir: Path):
    """The config's policy. A tiny policy whose tokenizer is not built yet (`stockr1 tokenizer
    build`) gets one trained on this run's corpus, saved in ``run_dir/tokenizer``."""
    pcfg = PolicyConfig.from_dict(cfg.get("policy", {}))
    if pcfg.name_or_path == "tiny" and not Path(pcfg.tokenizer_path or "checkpoints/tokenizer").exists():
        path = local_tokenizer(traces, int(cfg.get("tokenizer_vocab", 4000)), run_dir / "tokenizer")
        pcfg = dataclasses.replace(pcfg, tokenizer_path=str(path))
    return Policy(pcfg)


def local_tokenizer(traces: Sequence[Trace], vocab_size: int, out: Path) -> Path:
    """The offline tokenizer trained on this run's corpus (system prompt + traces), saved in ``out``
    (reused when the corpus is unchanged): what a run without a hub tokenizer uses."""
    from llm.tokenizer import build_or_load_tokenizer  # lazy: transformers only when a tokenizer is built

    build_or_load_tokenizer([SYSTEM_PROMPT] + [t.user + t.completion for t in traces], vocab_size, out)
    return out
