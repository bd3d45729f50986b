"""GRPO recipe knobs (rl.trainer): warmup schedule, the KL reference (frozen copy for a full fine-tune,
adapter-disabled model for LoRA), the loss pass in the sampling's dropout mode, config validation."""

from pathlib import Path

import numpy as np
import pytest
import torch

from llm.policy import Policy, PolicyConfig
from llm.rollout import RolloutEngine
from llm.special_tokens import ts_placeholders
from llm.tokenizer import chat_prompt, train_tokenizer
from rl.grpo import GRPOLossConfig
from rl.trainer import FuncScorer, GRPOSample, GRPOTrainConfig, GRPOTrainer

K, D_TS = 2, 8


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("tok")
    train_tokenizer([f"Reasoning {i}: up. <answer>Yes</answer> eee" for i in range(30)] + ["Question?"] * 5, 300, d)
    return d


def _policy(tok_dir: Path, lora_r: int = 0, dropout: float = 0.0) -> Policy:
    torch.manual_seed(0)
    return Policy(PolicyConfig(name_or_path="tiny", tokenizer_path=str(tok_dir), tiny_hidden=32, tiny_layers=1,
                               tiny_heads=2, tiny_kv_heads=1, tiny_intermediate=64, lora_r=lora_r,
                               lora_alpha=lora_r or 32, lora_dropout=dropout, lora_targets=("q_proj", "v_proj"),
                               d_ts=D_TS, train_protocol_tokens=False))


def _samples(tok) -> list[GRPOSample]:
    g = torch.Generator().manual_seed(0)
    return [GRPOSample(chat_prompt(tok, f"{ts_placeholders(K)} Question {i}?"), i,
                       ts_tokens=torch.randn(K, D_TS, generator=g)) for i in range(4)]


def count_e(prompts, completions, **kw):
    return [float(c.count("e")) for c in completions]


def _trainer(pol: Policy, out: Path, **kw) -> GRPOTrainer:
    eng = RolloutEngine(pol, pol.tokenizer, [], max_new_tokens=6, temperature=1.0)
    cfg = GRPOTrainConfig(**{"group_size": 4, "queries_per_step": 2, "max_steps": 2, "lr": 1e-2,
                             "accelerator": "cpu", "ckpt_every": 10, **kw})
    return GRPOTrainer(pol, eng, _samples(pol.tokenizer), FuncScorer({"e": count_e}), cfg, out)


def test_warmup_ramps_the_learning_rate_then_holds() -> None:
    cfg = GRPOTrainConfig(lr=1e-4, warmup_steps=4)
    assert [cfg.lr_factor(s) for s in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    assert GRPOTrainConfig(lr=1e-4).lr_factor(0) == 1.0


def test_trainer_logs_the_scheduled_lr(tok_dir, tmp_path) -> None:
    tr = _trainer(_policy(tok_dir), tmp_path, warmup_steps=4, max_steps=2)
    tr.fit()
    assert [h["lr"] for h in tr.history] == pytest.approx([2.5e-3, 5e-3])


@pytest.mark.parametrize("bad", [{"group_size": 1}, {"lr": -1e-5}, {"queries_per_step": 0}, {"warmup_steps": -1}])
def test_bad_recipe_values_are_refused(bad) -> None:
    with pytest.raises(ValueError, match="train\\."):
        GRPOTrainConfig(**bad)


def test_full_finetune_reference_is_a_frozen_copy_and_kl_starts_at_zero(tok_dir, tmp_path) -> None:
    tr = _trainer(_policy(tok_dir), tmp_path, loss=GRPOLossConfig(beta=0.1), max_steps=2)
    tr.fit()
    assert tr.ref is not None and not any(p.requires_grad for p in tr.ref.parameters())
    assert tr.history[0]["policy/kl"] == pytest.approx(0.0, abs=1e-7)  # on-policy, same weights
    assert tr.history[1]["policy/kl"] > 0  # after one lr=1e-2 step the policy has moved


def test_lora_reference_is_the_adapter_disabled_sft_policy(tok_dir, tmp_path) -> None:
    """With LoRA the SFT adapter is merged and a fresh one trained: adapters off = the SFT policy (no
    second copy), so the KL is 0 at step 0 even with LoRA dropout on, when the loss pass runs in the
    sampling's (eval) mode; with dropout in the loss pass it is not."""
    sft = _policy(tok_dir, lora_r=4, dropout=0.5)
    with torch.no_grad():  # an "SFT-trained" adapter: non-zero B so merging matters
        for n, p in sft.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.5)
    ids = sft.tokenizer("Question 1?", return_tensors="pt").input_ids
    sft.eval()
    before = sft(ids).logits.detach()
    tr = _trainer(sft, tmp_path / "eval", loss=GRPOLossConfig(beta=0.1), max_steps=1)
    assert tr.ref is None and tr.ref_projector is not None  # no deep copy of the model
    sft.eval()
    with sft.as_reference(tr.ref_projector), torch.no_grad():
        torch.testing.assert_close(sft(ids).logits, before, rtol=1e-5, atol=1e-5)  # reference = SFT policy
    tr.fit()
    assert tr.history[0]["policy/kl"] == pytest.approx(0.0, abs=1e-6)



@pytest.mark.parametrize("dropout_in_loss", [False, True])
def test_loss_pass_runs_in_the_sampling_mode_unless_asked(tok_dir, tmp_path, dropout_in_loss) -> None:
    pol = _policy(tok_dir, lora_r=4, dropout=0.5)
    modes: list[bool] = []
    pol.model.register_forward_pre_hook(lambda m, a: modes.append(m.training) if torch.is_grad_enabled() else None)
    tr = _trainer(pol, tmp_path, max_steps=1, dropout_in_loss=dropout_in_loss)
    tr.fit()
    assert modes and set(modes) == {dropout_in_loss}  # every forward that builds the loss graph


def test_grpo_trains_its_own_adapter_of_the_recipe_rank_on_the_merged_sft_policy(tok_dir, tmp_path) -> None:
    """The authors' GRPO trains a rank-8 adapter on top of their rank-32 SFT: train.lora_r / lora_alpha give
    the RL adapter's shape; the SFT adapter is merged first, so the adapter-disabled model stays the SFT
    policy (the KL reference) and the step starts at KL 0."""
    pol = _policy(tok_dir, lora_r=4)
    with torch.no_grad():
        for n, p in pol.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.5)  # a trained SFT adapter
    ids = pol.tokenizer("Question 2?", return_tensors="pt").input_ids
    sft = pol.eval()(ids).logits.detach()
    tr = _trainer(pol, tmp_path, max_steps=1, lora_r=2, lora_alpha=8, loss=GRPOLossConfig(beta=0.04))
    shapes = {tuple(p.shape) for n, p in pol.named_parameters() if "lora_A" in n}
    assert shapes == {(2, 32)} and pol.cfg.lora_r == 2 and pol.cfg.lora_alpha == 8
    torch.testing.assert_close(pol.eval()(ids).logits.detach(), sft, rtol=1e-5, atol=1e-5)  # fresh B = 0
    tr.fit()
    assert tr.history[0]["policy/kl"] == pytest.approx(0.0, abs=1e-6)
    with pytest.raises(ValueError, match="train.lora_r must be >= 1"):
        GRPOTrainConfig(lora_r=0)


def test_merged_lora_policy_saves_and_reloads_what_it_computes(tok_dir, tmp_path) -> None:
    pol = _policy(tok_dir, lora_r=4)
    with torch.no_grad():
        for n, p in pol.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.5)
    pol.restart_adapter()
    with torch.no_grad():
        for n, p in pol.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.5)  # what GRPO would have trained on top
    ids = pol.tokenizer("Question 2?", return_tensors="pt").input_ids
    pol.eval()
    want = pol(ids).logits.detach()
    pol.save(tmp_path / "p")
    got = Policy.load(tmp_path / "p").eval()(ids).logits.detach()
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    assert np.isfinite(want.numpy()).all()


def test_grpo_raises_a_reward_the_policy_can_control(tok_dir, tmp_path) -> None:
    """The optimiser optimises: with a reward that depends only on what the policy writes (the share
    of 'e' characters), 25 steps on the same 4 queries raise the re-sampled reward on those queries."""
    from rl.trainer import GRPOTrainer

    def share_e(prompts, completions, **kw):
        return [c.count("e") / max(1, len(c)) for c in completions]

    def probe(pol, seed):
        eng = RolloutEngine(pol, pol.tokenizer, [], max_new_tokens=8, temperature=1.0, seed=seed)
        samples = _samples(pol.tokenizer)
        rolls = eng.generate([s.prompt for s in samples], torch.stack([s.ts_tokens for s in samples]),
                             [s.sample_ref for s in samples], num_return_sequences=8)
        return float(np.mean(share_e(None, [r.completion for r in rolls])))

    pol = _policy(tok_dir)
    before = np.mean([probe(pol, s) for s in range(3)])
    eng = RolloutEngine(pol, pol.tokenizer, [], max_new_tokens=8, temperature=1.0)
    cfg = GRPOTrainConfig(group_size=8, queries_per_step=2, max_steps=25, lr=3e-3, warmup_steps=2, accelerator="cpu",
                          ckpt_every=100, num_iterations=2, loss=GRPOLossConfig(beta=0.0))
    GRPOTrainer(pol, eng, _samples(pol.tokenizer), FuncScorer({"e": share_e}), cfg, tmp_path).fit()
    after = np.mean([probe(pol, s) for s in range(3)])
    print(f"share of e: {before:.3f} -> {after:.3f}")
    assert after > before + 0.05, (before, after)


def test_variance_shares_by_hand() -> None:
    """Two groups of 2: R = r_ans + 0.5 r_prec; r_ans differs within each group, r_prec does not."""
    from rl.rewards import RewardWeights, variance_shares

    comps = {"r_ans": np.array([1.0, 0.0, 0.0, 1.0]), "r_prec": np.array([0.2, 0.2, 0.6, 0.6])}
    total = comps["r_ans"] + 0.5 * comps["r_prec"]
    s = variance_shares(comps, total, 2, RewardWeights(ans=1.0, beta=0.5))
    assert s["r_ans"] == pytest.approx(1.0) and s["r_prec"] == pytest.approx(0.0)
    comps["r_prec"] = np.array([0.0, 1.0, 1.0, 0.0])  # now against r_ans: var(R) = 0.125, cov(0.5 r_prec, R) = -0.125
    total = comps["r_ans"] + 0.5 * comps["r_prec"]
    s = variance_shares(comps, total, 2, RewardWeights(ans=1.0, beta=0.5))
    assert s["r_ans"] == pytest.approx(2.0) and s["r_prec"] == pytest.approx(-1.0)
