"""Joint SFT on several processes (DDP over gloo on CPU, 2 ranks).

- trainer level: each rank trains on its shard of the same global batch; after one step the averaged
  gradient equals the mean of the two shards' gradients computed in one process, and both ranks hold the
  same moved weights; rank 0 alone writes metrics and the checkpoint;
- command level: ``stockr1 sft --train.devices 2 --train.strategy ddp`` (Fabric's subprocess launcher)
  trains, saves policy/ + decoder/ once, and records the world size.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from llm.sft import SFTTrainer, TrainConfig, sft_data
from stockr1.distributed import check_distributed, shard
from tests.tiny_runs import tiny_sft_config

ROOT = Path(__file__).resolve().parents[1]
CFG = TrainConfig(lr=1e-2, decoder_lr=1e-2, warmup_steps=1, max_steps=1, batch_size=4, grad_clip=1.0,
                  grad_clip_scope="per_model", accelerator="cpu", ckpt_every=1, log_every=1)


def test_shard_splits_a_global_batch_evenly_and_disjointly() -> None:
    idx = [7, 3, 9, 1, 4, 8]
    parts = [shard(idx, r, 3) for r in range(3)]
    assert parts == [[7, 1], [3, 4], [9, 8]]
    assert sorted(sum(parts, [])) == sorted(idx)
    with pytest.raises(ValueError, match="does not split evenly over 4 ranks"):
        shard(idx, 0, 4)
    with pytest.raises(ValueError, match="rank 2 of world size 2"):
        shard(idx, 2, 2)


@pytest.mark.parametrize("bad", [{"devices": 0}, {"devices": "two"}, {"num_nodes": 0}, {"strategy": "dpp"}])
def test_distributed_fields_are_checked_at_load(bad) -> None:
    kw = {"devices": 1, "num_nodes": 1, "strategy": "auto", **bad}
    with pytest.raises(ValueError, match=f"train.{next(iter(bad))}"):
        check_distributed(kw["devices"], kw["num_nodes"], kw["strategy"])
    with pytest.raises(ValueError):
        TrainConfig(**bad)


def _setup(tok_dir: Path):
    """Traces, windows and a fresh model with a fixed init (the same in every process)."""
    from tests.test_sft_joint import make_model, tiny_traces

    w, traces, tok = tiny_traces(tok_dir)
    torch.manual_seed(0)
    return w, traces, tok, make_model(tok, lora_r=0)


def _worker(fabric, out: str) -> None:
    w, traces, tok, model = _setup(Path(out) / f"tok{fabric.global_rank}")
    data = sft_data(traces, [], w, tok, CFG)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    tr = SFTTrainer(model, CFG, out, fabric=fabric)
    tr.fit(data)
    torch.save({"before": before, "after": {n: p.detach().clone() for n, p in model.named_parameters()},
                "grads": {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None},
                "world": fabric.world_size, "loss": tr.history[-1]["loss"]}, Path(out) / f"rank{fabric.global_rank}.pt")


def _reference_grads(out: Path) -> tuple[dict[str, torch.Tensor], float]:
    """One process: the mean of the two shards' gradients (what DDP's all-reduce must give), unclipped."""
    w, traces, tok, model = _setup(out / "tok_ref")
    data = sft_data(traces, [], w, tok, CFG)
    idx = data.sample(np.random.default_rng([CFG.seed, 0]), CFG.batch_size)  # fit's first global batch
    losses = []
    for r in range(2):
        loss = model(data.batch(shard(idx, r, 2)))
        (loss.total / 2).backward()
        losses.append(float(loss.total.detach()))
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}, float(np.mean(losses))


@pytest.mark.slow
def test_two_ranks_train_on_disjoint_shards_and_average_gradients(tmp_path) -> None:
    from lightning.fabric import Fabric

    Fabric(accelerator="cpu", devices=2, strategy="ddp_spawn").launch(_worker, str(tmp_path))
    r0, r1 = (torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in (0, 1))
    assert r0["world"] == r1["world"] == 2
    ref, ref_loss = _reference_grads(tmp_path)
    # clip_grad_norm_ scales grads in place, so compare directions and the clipped norm of each model
    for prefix in ("policy.", "decoder."):
        names = [n for n in ref if n.startswith(prefix)]
        assert names
        g_ref = torch.cat([ref[n].flatten() for n in names])
        g_ddp = torch.cat([r0["grads"][n].flatten() for n in names])
        scale = min(1.0, CFG.grad_clip / float(g_ref.norm()))
        assert torch.allclose(g_ddp, g_ref * scale, rtol=1e-4, atol=1e-7), prefix
    assert r0["loss"] == pytest.approx(ref_loss, rel=1e-5) and r1["loss"] == pytest.approx(ref_loss, rel=1e-5)
    live = [n for n, g in r0["grads"].items() if g.abs().sum() > 0]
    unmoved = [n for n in live if torch.equal(r0["before"][n], r0["after"][n])]
    assert {n.split(".")[0] for n in live} == {"policy", "decoder"} and not unmoved  # all with a gradient moved
    for n in r0["after"]:
        assert torch.equal(r0["after"][n], r1["after"][n]), n
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["step"] for x in lines] == [1]  # written once, by rank 0
    assert (tmp_path / "last.ckpt").exists() and not (tmp_path / "last.ckpt.tmp").exists()


@pytest.mark.slow
def test_stockr1_sft_with_two_devices_through_the_cli(tmp_path) -> None:
    cfg = tiny_sft_config(tmp_path, qa={"n_train": 12, "n_val": 0, "n_test": 0},
                          decoder={"ts": {"lookback": 90, "horizon": 10, "patch_len": 15, "d_model": 16,
                                          "n_layers": 1, "n_heads": 2, "ffn_dim": 32, "dropout": 0.0, "d_llm": 8}},
                          train={"batch_size": 2})
    path = tmp_path / "sft.yaml"
    path.write_text(yaml.safe_dump(cfg))
    env = {**os.environ, "WANDB_MODE": "disabled", "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "stockr1.cli", "sft", "--config", str(path), "--out",
                           str(tmp_path / "runs"), "--train.devices", "2", "--train.strategy", "ddp"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = tmp_path / "runs" / "s"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["steps"] == 2
    assert proc.stdout.count('"world_size": 2') == 1  # the summary is printed by rank 0 only
    assert (run / "policy").is_dir() and (run / "decoder" / "model.safetensors").exists()
    assert [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    written = yaml.safe_load((run / "config.yaml").read_text())
    assert written["train"]["devices"] == 2 and written["train"]["strategy"] == "ddp"  # the overrides are kept
