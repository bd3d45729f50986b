"""DDP over gloo on CPU: 2 processes, 1 GRPO step. The global batch of 4 queries is split 2 / 2; each rank
rolls out its own queries, the u-GRPO weights are normalised over all 4 (an all-reduce); after the step the
ranks hold identical weights (gradients were averaged) that differ from the start."""

from pathlib import Path

import pytest
import torch


def count_e(prompts, completions, **kw):
    return [float(c.count("e")) for c in completions]


def _worker(fabric, tok_dir: str, out: str) -> None:
    from llm.policy import Policy, PolicyConfig
    from llm.rollout import RolloutEngine
    from llm.tokenizer import chat_prompt
    from rl.trainer import FuncScorer, GRPOSample, GRPOTrainConfig, GRPOTrainer

    torch.manual_seed(0)  # same init on both ranks (DDP also broadcasts rank 0's weights)
    pol = Policy(PolicyConfig(name_or_path="tiny", tokenizer_path=tok_dir, tiny_hidden=32, tiny_layers=1,
                              tiny_heads=2, tiny_kv_heads=1, tiny_intermediate=64, lora_r=0, soft_tokens=False))
    eng = RolloutEngine(pol, pol.tokenizer, [], max_new_tokens=6, temperature=1.0)
    samples = [GRPOSample(chat_prompt(pol.tokenizer, f"Question {i}: will it rise?"), i, uncertainty=u)
               for i, u in enumerate([0.1, 0.9, 0.3, 0.6])]
    cfg = GRPOTrainConfig(group_size=4, queries_per_step=4, max_steps=1, lr=1e-2, ckpt_every=1)
    before = {n: p.detach().clone() for n, p in pol.named_parameters()}
    seen = []
    tr = GRPOTrainer(pol, eng, samples, FuncScorer({"e": count_e}), cfg, out, fabric=fabric,
                     on_step=lambda s, m: seen.append(s))
    tr.fit()
    after = {n: p.detach().clone() for n, p in pol.named_parameters()}
    torch.save({"before": before, "after": after, "world": fabric.world_size, "steps": seen,
                "w_mean": tr.history[-1]["uncertainty/weight_norm_mean"]},
               Path(out) / f"rank{fabric.global_rank}.pt")


@pytest.mark.slow
def test_ddp_gloo_two_processes_one_step(tmp_path, tiny_tokenizer_dir) -> None:
    from lightning.fabric import Fabric

    fabric = Fabric(accelerator="cpu", devices=2, strategy="ddp_spawn")
    fabric.launch(_worker, str(tiny_tokenizer_dir), str(tmp_path))
    r0, r1 = (torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in (0, 1))
    assert r0["world"] == r1["world"] == 2 and r0["steps"] == r1["steps"] == [1]
    changed = [n for n in r0["after"] if not torch.equal(r0["before"][n], r0["after"][n])]
    assert changed
    for n in r0["after"]:
        assert torch.allclose(r0["after"][n], r1["after"][n], atol=1e-6), n
    # weights normalised over the global batch: mean 1 over all 4 queries, not on each rank
    assert r0["w_mean"] + r1["w_mean"] == pytest.approx(2.0) and r0["w_mean"] != pytest.approx(1.0)
    assert (tmp_path / "last.ckpt").exists()
