"""``stockr1 grpo --config configs/grpo/qwen3-4b.yaml --smoke``: one GRPO step of a real-scale config
(the shared smoke helpers live in ``llm.smoke``; this part needs the RL trainer, one floor up)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from llm.build import load_data
from llm.corpus import default_corpus
from llm.smoke import (
    SMOKE,
    device_settings,
    model_facts,
    peak_memory_gib,
    policy_section,
    prepared_decoder,
    report,
    smoke_data,
    timed_step,
    work_dir,
)
from llm.tokenizer import build_or_load_tokenizer
from rl.setup import build_setup, load_config
from rl.trainer import GRPOTrainer, StockR1Scorer, make_fabric, query_indices
from stockr1.config import deep_update


def grpo_smoke(config: str | Path, out: str | Path | None = None) -> dict[str, Any]:
    """One ``GRPOTrainer.train_step`` of the config at full width: 1 query x ``SMOKE.group_size`` rollouts
    of ``SMOKE.max_new_tokens`` tokens, loss, KL reference and mu as configured."""
    cfg = load_config(config)
    data, data_note = smoke_data(cfg)  # the offline sample when the config's dataset is not built
    cfg = {**cfg, "data": data}
    dev = device_settings(str(cfg.get("policy", {}).get("dtype", "float32")))
    with work_dir(out) as work:
        windows, _ = load_data(cfg["data"])
        dec_file = prepared_decoder(cfg, windows, work / "decoder")
        build_or_load_tokenizer(
            default_corpus(n_items=SMOKE.n_queries), SMOKE.tokenizer_vocab, work / "tokenizer"
        )
        over = {
            "sft": {"run_dir": None},
            "max_context_chars": SMOKE.max_context_chars,
            "qa": {"n_train": SMOKE.n_queries, "n_val": 0, "n_test": 0, "max_train_queries": None},
            "rollout": {"max_new_tokens": SMOKE.max_new_tokens},
            "train": {
                "group_size": SMOKE.group_size,
                "queries_per_step": 1,
                "max_steps": 1,
                "ckpt_every": 10**9,
                "accelerator": dev.accelerator,
                "devices": 1,
                "strategy": "auto",
                "precision": dev.precision,
            },
        }
        scfg = deep_update(cfg, over)
        scfg["decoder"] = {"checkpoint": str(dec_file)}
        scfg["policy"] = policy_section(cfg, work / "tokenizer", dev)
        st = build_setup(scfg, None, 1)
        fabric = make_fabric(st.train_cfg)
        tcfg = st.train_cfg
        ts = tcfg.lambda_ts > 0
        trainer = GRPOTrainer(
            st.policy,
            st.engine(),
            st.samples,
            StockR1Scorer(st.thresholds, tcfg.rewards, tcfg.reward_components),
            tcfg,
            work,
            fabric=fabric,
            decoder=st.decoder if ts else None,
            windows=st.windows if ts else None,
        )
        metrics, sec = timed_step(trainer.train_step, dev.accelerator)
        gib, kind = peak_memory_gib(dev.accelerator)
        sc = metrics["scalars"]
        query = st.samples[query_indices(len(st.samples), 0, 1, tcfg.seed)[0]]
        prompt_tokens = len(st.policy.tokenizer(query.prompt, add_special_tokens=False).input_ids)
        facts = {
            **model_facts(st.policy),
            **dataclasses.asdict(dev),
            "decoder_d_llm": int(st.decoder.ts_cfg.d_llm),
            "tokens": int(tcfg.group_size * (prompt_tokens + sc["rollout/gen_tokens"])),
            "prompt_tokens": prompt_tokens,
            "rollouts": tcfg.group_size,
            "sec_per_step": sec,
            "peak_memory_gib": gib,
            "peak_memory_kind": kind,
            "loss": float(sc["loss"]),
            "rollout_s": float(sc["time/rollout_s"]),
            "data": data_note,
        }
        return report("grpo", config, facts, work)
