"""The forecast tool renders the same text in every stage (issue: SFT traces had no `Uncertainty:`
line, GRPO fitted the normaliser in place and added one). End to end on a tiny synthetic run:
`stockr1 sft` then `stockr1 grpo` with the decoder frozen."""

import hashlib
from pathlib import Path

import numpy as np
import pytest
import yaml

from forecast_action.build import load_decoder
from llm.build import load_data
from llm.sft import run_sft
from llm.tools import ForecastTool
from llm.traces import load_traces
from rl.setup import run_grpo
from tests.tiny_runs import DATA, tiny_sft_config

DECODER = {"seed": 0, "warmup_steps": 3, "tool_samples": 6,
           "ts": {"lookback": 90, "horizon": 10, "patch_len": 15, "d_model": 16, "n_layers": 1, "n_heads": 2,
                  "ffn_dim": 32, "dropout": 0.0, "d_llm": 8},
           "action": {"cond_dim": 8, "emb_dim": 2, "hidden": 16}}


_CFG: dict = {}


def _sha(d: Path) -> str:
    """One hash of every file (name and bytes) of a saved directory."""
    h = hashlib.sha256()
    for p in sorted(f for f in d.rglob("*") if f.is_file()):
        h.update(p.name.encode() + p.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("stages")
    windows, _ = load_data(DATA)
    sft_cfg = tiny_sft_config(root, {"n_train": 12, "n_val": 2, "n_test": 2}, DECODER,
                              {"decoder_lr": 1e-2, "lambda_ts": 0.1})
    (root / "sft.yaml").write_text(yaml.safe_dump(sft_cfg))
    run_sft(root / "sft.yaml", out_root=root / "sft")
    sft_dir = root / "sft" / "s"
    hash_before = _sha(sft_dir / "decoder")
    grpo_cfg = {"run": "g", "seed": 0, "data": DATA, "max_context_chars": 200, "sft": {"run_dir": str(sft_dir)},
                "qa": {"max_train_queries": 2}, "rollout": {"max_new_tokens": 8, "temperature": 1.0},
                "train": {"group_size": 2, "queries_per_step": 1, "max_steps": 1, "lr": 1e-4, "micro_batch": 4,
                          "accelerator": "cpu", "ckpt_every": 10}}
    run_grpo(grpo_cfg, out_root=root / "grpo", use_wandb=False)
    _CFG.update(grpo_cfg)
    return windows, sft_dir, root / "grpo" / "g", hash_before


def test_grpo_leaves_the_sft_decoder_file_unchanged_and_saves_it_byte_for_byte(runs) -> None:
    _, sft_dir, grpo_dir, hash_before = runs
    assert _sha(sft_dir / "decoder") == hash_before
    assert _sha(grpo_dir / "decoder") == hash_before


def test_the_sft_decoder_carries_the_thresholds_of_its_run(runs) -> None:
    """g travels inside the saved decoder (bench action, ask and the tool need no thresholds.json beside it)."""
    from forecast_action.derive import ActionThresholds

    _, sft_dir, _, _ = runs
    fitted = ActionThresholds.load(sft_dir / "thresholds.json")
    assert load_decoder(sft_dir / "decoder").thresholds == fitted == load_decoder(sft_dir / "decoder_init").thresholds


def test_sft_and_grpo_decoders_render_identical_tool_text(runs) -> None:
    windows, sft_dir, grpo_dir, _ = runs
    a, b = load_decoder(sft_dir / "decoder"), load_decoder(grpo_dir / "decoder")
    assert bool(a.normalizer.fitted) and a.tool_samples == b.tool_samples == 6
    rows = np.flatnonzero(windows.split == "test")[:3].tolist()
    calls = ['{"direction": "up", "volatility_level": "high"}', "not an action", '{"direction": "down"}']
    ta = [r.observation for r in ForecastTool(a, windows).call_batch(rows, calls)]
    tb = [r.observation for r in ForecastTool(b, windows).call_batch(rows, calls)]
    assert ta == tb
    assert all("Uncertainty:" in t for t in ta)


def test_sft_traces_carry_the_same_lines_as_later_rollouts(runs) -> None:
    """The traces were written by the prepared decoder: its observation has the Uncertainty line too,
    so SFT never trains on a tool text that GRPO or evaluation would not show."""
    _, sft_dir, _, _ = runs
    traces = load_traces(sft_dir / "traces.jsonl")
    obs = [text for t in traces for text, by_model in t.segments if not by_model]
    assert obs and all("Uncertainty:" in o for o in obs)
    init = load_decoder(sft_dir / "decoder_init")
    assert bool(init.normalizer.fitted) and init.tool_samples == 6


def test_reward_probe_is_seeded_and_scores_every_training_query(runs) -> None:
    from rl.setup import probe_run

    _, sft_dir, grpo_dir, _ = runs
    a = probe_run(_CFG, grpo_dir, sft_dir, group_size=2, seed=3)
    b = probe_run(_CFG, grpo_dir, sft_dir, group_size=2, seed=3)
    va, vb = a.pop("variance_share"), b.pop("variance_share")  # NaN when a group has no spread: compare as arrays
    np.testing.assert_array_equal(np.array(list(va.values())), np.array(list(vb.values())))
    assert a == b and a["n_queries"] == len(a["per_query_total"]) == 2
    assert {"reward/r_ans", "reward/r_act", "reward/r_prec", "reward/r_cons"} <= set(a)
    # per query: its gold answer, its G answers and component means that average to the probe's
    assert [len(q["answers"]) for q in a["per_query"]] == [2, 2] and all(q["gold"] is not None for q in a["per_query"])
    for name in ("r_ans", "r_act"):
        assert np.mean([q[name] for q in a["per_query"]]) == pytest.approx(a[f"reward/{name}"])
    sft = probe_run(_CFG, None, sft_dir, group_size=2, seed=3)
    assert sft["n_queries"] == 2 and np.isfinite(sft["reward_total"])
