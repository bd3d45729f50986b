"""rl.cli wiring: GRPO samples are causal (prompt, soft tokens and U_q ignore the future; only the reward
labels see it), labels are g(realised future), config merging for ablations."""

import dataclasses

import numpy as np
import pytest
import torch

from forecast_action.build import build_decoder
from forecast_action.derive import ActionThresholds, actions_from_windows
from llm.build import load_data
from llm.qa.generator import QAConfig, QAGenerator
from llm.special_tokens import TS_PLACEHOLDER
from llm.tokenizer import train_tokenizer
from rl.setup import build_samples, load_config, prepare_fresh_decoder
from rl.soft_tokens import soft_tokens
from stockr1.config import deep_update
from stockr1.types import CLOSE, train_only

DECODER = {"seed": 0, "ts": {"lookback": 90, "horizon": 10, "patch_len": 15, "d_model": 16, "n_layers": 1,
                             "n_heads": 2, "ffn_dim": 32, "dropout": 0.0, "d_llm": 8},
           "action": {"cond_dim": 8, "emb_dim": 2, "hidden": 16}}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    windows, ctx = load_data({"source": "synthetic", "n_tickers": 1, "n_days": 260, "seed": 0})
    items, _ = QAGenerator(windows, ctx).generate(QAConfig(n_train=6, n_val=1, n_test=1, seed=0))
    items = [it for it in items if it.split == "train"]
    tok_dir = tmp_path_factory.mktemp("tok")
    tok = train_tokenizer([str(c) for c in windows.context[:20]] + ["Question: will it rise?"] * 5, 400, tok_dir)
    decoder = build_decoder(DECODER)
    prepare_fresh_decoder(decoder, windows)
    return windows, items, ActionThresholds.fit(train_only(windows)), decoder, tok, tok_dir


def test_samples_are_causal_and_labels_are_the_realised_future(setup) -> None:
    windows, items, th, decoder, tok, _ = setup
    samples = build_samples(items, windows, th, decoder, tok)
    assert len(samples) == len(items) > 0
    ts = soft_tokens(samples)
    k = ts.shape[1]
    assert ts.shape == (len(samples), k, 8) and all(s.ts_tokens is None for s in samples)  # computed per batch
    for s, it in zip(samples, items, strict=True):
        assert s.prompt.count(TS_PLACEHOLDER) == k and it.question in s.prompt
        assert 0.0 <= s.uncertainty <= 1.0
        assert s.columns["answer"] == it.answer and s.sample_ref == it.window
        np.testing.assert_array_equal(s.columns["true_close"], windows.future[it.window, :, CLOSE])
    idx = np.array([it.window for it in items])
    assert [s.columns["target_action"] for s in samples] == actions_from_windows(windows.select(idx), th)

    # perturb every future: what the policy sees does not move, the labels do
    future = windows.future.copy()
    future[:, :, :4] *= 1.37
    moved = dataclasses.replace(windows, future=future, y=windows.y + 0.5)
    again = build_samples(items, moved, th, decoder, tok)
    assert torch.equal(ts, soft_tokens(again))
    for a, b in zip(samples, again, strict=True):
        assert a.prompt == b.prompt and a.uncertainty == b.uncertainty
        assert not np.array_equal(a.columns["true_close"], b.columns["true_close"])


def test_config_overrides_merge_recursively() -> None:
    cfg = load_config("configs/grpo/tiny.yaml", {"train": {"uncertainty": {"enabled": False}, "seed": 3}})
    assert cfg["train"]["uncertainty"] == {"u0": 0.25, "u_hi": 0.5, "w_hi": 0.5, "u_cap": 1.0, "enabled": False}
    assert cfg["train"]["seed"] == 3 and cfg["train"]["group_size"] == 4
    base = {"a": {"b": 1, "c": 2}}
    assert deep_update(base, {"a": {"c": 5}, "d": 1}) == {"a": {"b": 1, "c": 5}, "d": 1} and base["a"]["c"] == 2


def test_lambda_ts_keeps_training_the_decoder_and_zero_freezes_it(setup, tmp_path, tiny_policy) -> None:
    from llm.rollout import RolloutEngine
    from llm.tools import ForecastTool
    from rl.trainer import GRPOTrainConfig, GRPOTrainer, StockR1Scorer

    windows, items, th, decoder, _, tok_dir = setup
    for lam in (0.0, 0.5):
        torch.manual_seed(0)
        dec = build_decoder(DECODER)
        prepare_fresh_decoder(dec, windows)
        dec.thresholds = th
        pol = tiny_policy(tokenizer_path=str(tok_dir))
        samples = build_samples(items[:2], windows, th, dec, pol.tokenizer, max_context_chars=200)
        eng = RolloutEngine(pol, pol.tokenizer, [ForecastTool(dec, windows, n_samples=4)], max_new_tokens=4)
        cfg = GRPOTrainConfig(group_size=2, queries_per_step=2, max_steps=1, lambda_ts=lam, decoder_lr=1e-2,
                              accelerator="cpu", ckpt_every=10)
        before = {n: p.detach().clone() for n, p in dec.named_parameters()}
        tr = GRPOTrainer(pol, eng, samples, StockR1Scorer(th), cfg, tmp_path / str(lam),
                         decoder=dec if lam else None, windows=windows if lam else None)
        tr.fit()
        moved = [n for n, p in dec.named_parameters() if not torch.equal(before[n], p.detach())]
        assert bool(moved) == (lam > 0), (lam, moved)
        assert ("decoder/loss" in tr.history[0]) == (lam > 0)


def test_rl_decoder_loss_is_the_sft_loss_on_the_realised_action(setup, tmp_path, tiny_policy) -> None:
    """With lambda_ts > 0 the decoder trains with DecoderLoss on a* = g(realised future) of the step's
    distinct windows: the emitted actions (and how many rollouts share a window) do not change it, and a
    decoder without the g its control loss bins with is refused."""
    from types import SimpleNamespace

    from forecast_action.decoder_loss import DecoderLoss, DecoderRecipe
    from forecast_action.encoder import featurize
    from forecast_action.schema import ForecastAction
    from rl.trainer import GRPOTrainConfig, GRPOTrainer, StockR1Scorer

    windows, items, th, _, _, tok_dir = setup
    dec = build_decoder(DECODER)
    prepare_fresh_decoder(dec, windows)
    pol = tiny_policy(tokenizer_path=str(tok_dir))
    samples = build_samples(items[:2], windows, th, dec, pol.tokenizer, max_context_chars=200)
    recipe = DecoderRecipe(control_samples=4)
    cfg = GRPOTrainConfig(group_size=2, queries_per_step=2, max_steps=1, lambda_ts=0.5, decoder_recipe=recipe,
                          accelerator="cpu")
    with pytest.raises(ValueError, match="thresholds"):
        GRPOTrainer(pol, None, samples, StockR1Scorer(th), cfg, tmp_path / "a", decoder=dec, windows=windows)
    dec.thresholds = th
    tr = GRPOTrainer(pol, None, samples, StockR1Scorer(th), cfg, tmp_path / "b", decoder=dec, windows=windows)
    refs = [samples[0].sample_ref, samples[1].sample_ref]
    up = ForecastAction(direction="up", end_value=float(windows.last_close[refs[0]]) * 1.2)
    emitted = [SimpleNamespace(sample_ref=r, action=a) for r in refs for a in (up, None)]
    once = [SimpleNamespace(sample_ref=r, action=None) for r in reversed(refs)]
    losses = []
    for rollouts in (emitted, once):
        torch.manual_seed(3)
        losses.append(float(tr._decoder_loss(rollouts).detach()))
    w = windows.select(np.unique(refs))
    torch.manual_seed(3)
    want = DecoderLoss(recipe, th)(dec, torch.as_tensor(w.x, dtype=torch.float32), torch.as_tensor(w.y, dtype=torch.float32),
                                   featurize(actions_from_windows(w, th), w.last_close)).total.detach()
    assert losses[0] == pytest.approx(losses[1], rel=1e-6) and losses[0] == pytest.approx(float(want), rel=1e-6)


def test_load_models_prefers_the_sft_run(setup, tmp_path) -> None:
    from forecast_action.build import save_decoder
    from llm.policy import Policy, PolicyConfig
    from rl.setup import load_models

    _, _, _, decoder, _, tok_dir = setup
    pcfg = {"name_or_path": "tiny", "tokenizer_path": str(tok_dir), "tiny_hidden": 32, "tiny_layers": 1,
            "tiny_heads": 2, "tiny_kv_heads": 1, "tiny_intermediate": 64, "lora_r": 0, "d_ts": 8}
    torch.manual_seed(5)
    trained = Policy(PolicyConfig.from_dict(pcfg))
    with torch.no_grad():
        trained.projector.net[0].weight.add_(1.0)  # something the fresh build cannot reproduce
    trained.save(tmp_path / "policy")
    save_decoder(decoder, tmp_path / "decoder")
    cfg = {"policy": pcfg, "decoder": DECODER}
    pol, dec = load_models(cfg, tmp_path)
    assert torch.equal(pol.projector.net[0].weight, trained.projector.net[0].weight)
    assert all(torch.equal(a, b) for a, b in zip(dec.state_dict().values(), decoder.state_dict().values(), strict=True))
    fresh, _ = load_models(cfg, tmp_path / "missing")  # no SFT run: the configured tiny policy
    assert not torch.equal(fresh.projector.net[0].weight, trained.projector.net[0].weight)


def test_soft_tokens_computed_per_batch_train_exactly_as_precomputed_ones(setup, tmp_path, tiny_policy) -> None:
    """GRPO queries hold a window row, not h_ts (40k queries x K x d_llm would not fit in host memory at
    4B width); one step on lazily computed soft tokens moves every weight exactly as one on the same
    tokens precomputed, and the batch's tokens are the encoder's output for those rows."""
    from llm.rollout import RolloutEngine
    from llm.tools import ForecastTool
    from rl.trainer import FuncScorer, GRPOSample, GRPOTrainConfig, GRPOTrainer

    windows, items, th, decoder, tok, tok_dir = setup
    lazy = build_samples(items[:2], windows, th, decoder, tok, max_context_chars=200)
    with torch.no_grad():
        expect = decoder.encoder(torch.as_tensor(windows.select(np.array([s.sample_ref for s in lazy])).x)).h_ts
    assert torch.equal(soft_tokens(lazy), expect)
    eager = [GRPOSample(s.prompt, s.sample_ref, s.columns, expect[i], s.uncertainty) for i, s in enumerate(lazy)]
    before, after = [], []
    for k, samples in enumerate((lazy, eager)):
        torch.manual_seed(0)
        pol = tiny_policy(tokenizer_path=str(tok_dir))
        before.append(pol.projector.net[0].weight.detach().clone())
        eng = RolloutEngine(pol, pol.tokenizer, [ForecastTool(decoder, windows, n_samples=4)], max_new_tokens=6)
        cfg = GRPOTrainConfig(group_size=4, queries_per_step=2, max_steps=1, lr=1e-2, accelerator="cpu", ckpt_every=10)
        GRPOTrainer(pol, eng, samples, FuncScorer({"len": _length}), cfg, tmp_path / str(k)).fit()
        after.append({n: p.detach().clone() for n, p in pol.named_parameters()})
    assert torch.equal(before[0], before[1]) and not torch.equal(before[0], after[0]["projector.net.0.weight"])
    for n in after[0]:
        assert torch.equal(after[0][n], after[1][n]), n


def _length(prompts, completions, **kw) -> list[float]:
    return [float(len(c)) for c in completions]  # differs within a group, so advantages are not all zero
