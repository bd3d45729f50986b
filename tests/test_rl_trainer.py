"""rl.trainer on a real tiny policy: parameters move, kill + resume reproduces the uninterrupted run,
tool tokens get no gradient, the Stock-R1 scorer is wired to real rollouts, query sharding."""

import time
from pathlib import Path

import numpy as np
import pytest
import torch

from forecast_action.derive import ActionThresholds, actions_from_forecast
from forecast_action.parser import parse_action
from forecast_action.schema import ForecastAction
from forecast_action.score import score_action
from llm.rollout import RolloutEngine
from llm.scripted import ScriptedPolicy
from llm.special_tokens import FORECAST_TS_CLOSE, FORECAST_TS_OPEN, ts_placeholders
from llm.tokenizer import chat_prompt
from llm.tools import ForecastTool
from rl.grad_scale import grad_scales, param_group
from rl.grpo import grpo_loss
from rl.rewards import PENALTY
from rl.trainer import (
    ROW_PARAMS,
    FuncScorer,
    GRPOSample,
    GRPOTrainConfig,
    GRPOTrainer,
    StockR1Scorer,
    query_indices,
    rollout_batch,
)
from stockr1.types import Forecast
from tests.resume_check import assert_identical

ACT = '<forecast_action>{"direction": "up", "volatility_level": "low"}</forecast_action>'
BAD = "<forecast_action>gibberish</forecast_action>"
K, D_TS = 2, 8


def _samples(tok, n: int = 4) -> list[GRPOSample]:
    g = torch.Generator().manual_seed(0)
    return [GRPOSample(chat_prompt(tok, f"{ts_placeholders(K)} Question {i}: will it rise?"), i,
                       ts_tokens=torch.randn(K, D_TS, generator=g), uncertainty=[0.1, 0.6, np.nan, 0.3][i % 4])
            for i in range(n)]


def count_e(prompts, completions, **kw):
    """A reward that varies between random completions, so every group has signal."""
    return [float(c.count("e")) for c in completions]


class Kill(Exception):
    pass


def _trainer(tiny_policy, out: Path, steps: int, kill_at_call: int | None = None) -> GRPOTrainer:
    torch.manual_seed(0)  # the projector's init draws from the global RNG, as a run's start would seed it
    pol = tiny_policy(d_ts=D_TS)
    eng = RolloutEngine(pol, pol.tokenizer, [], max_new_tokens=6, temperature=1.0)
    cfg = GRPOTrainConfig(group_size=4, queries_per_step=2, max_steps=steps, lr=1e-2, accelerator="cpu",
                          ckpt_every=2, micro_batch=3)
    calls = []

    def reward(prompts, completions, **kw):
        calls.append(1)
        if len(calls) == kill_at_call:
            raise Kill  # the process dies in the middle of a step
        return count_e(prompts, completions)

    return GRPOTrainer(pol, eng, _samples(pol.tokenizer), FuncScorer({"e": reward}), cfg, out)


@pytest.fixture(scope="module")
def full_run(tiny_policy, tmp_path_factory):
    out = tmp_path_factory.mktemp("full")
    tr = _trainer(tiny_policy, out, steps=3)
    before = tr.trainable_state()
    tr.fit()
    return tr, before, out


def test_a_few_steps_change_trainable_parameters(full_run) -> None:
    tr, before, out = full_run
    after = tr.trainable_state()
    changed = [n for n in before if not torch.equal(before[n], after[n])]
    assert any("projector" in n for n in changed)  # soft tokens get gradient through the projector
    assert any("layers.0" in n for n in changed) and len(changed) > len(before) // 2
    hist = tr.history
    assert len(hist) == 3 and hist[-1]["reward/frac_zero_spread"] < 1.0
    assert all(0.125 <= h["uncertainty/weight_mean"] <= 1.0 for h in hist)
    assert (out / "last.ckpt").exists()


def test_kill_mid_step_and_resume_reproduces_uninterrupted_run(full_run, tiny_policy, tmp_path) -> None:
    full = full_run[0]
    killed = _trainer(tiny_policy, tmp_path, steps=3, kill_at_call=3)  # dies inside step 3; checkpoint is step 2
    with pytest.raises(Kill):
        killed.fit()
    assert killed.step == 2
    torch.manual_seed(123)  # whatever the new process drew before, the resumed run draws what the full one drew
    resumed = _trainer(tiny_policy, tmp_path, steps=3)
    resumed.fit(resume=True)
    assert resumed.step == 3 and len(resumed.history) == 3
    # every tensor of the final checkpoint, bit for bit: policy, projector, AdamW's moments, schedule, history
    a, b = (torch.load(d / "last.ckpt", map_location="cpu", weights_only=False) for d in (full_run[2], tmp_path))
    for st in (a, b):
        st["history"] = [{k: v for k, v in h.items() if not k.startswith("time/")} for h in st["history"]]
    assert assert_identical(a, b) > 20
    assert [h["reward/total"] for h in full.history] == [h["reward/total"] for h in resumed.history]


def test_a_given_batch_takes_the_same_step_and_its_phases_add_up(tiny_policy, tmp_path) -> None:
    """train_step(sample()) leaves the weights train_step() leaves; its logged phases sum to its step time,
    which leaves out whatever ran between the sampling and the rest of the step (a 0.5 s sleep here)."""
    ours, theirs = _trainer(tiny_policy, tmp_path / "a", steps=1), _trainer(tiny_policy, tmp_path / "b", steps=1)
    before = ours.trainable_state()
    sb = ours.sample()
    time.sleep(0.5)
    m = ours.train_step(sb)["scalars"]
    theirs.train_step()
    after, ref = ours.trainable_state(), theirs.trainable_state()
    changed = [n for n in after if not torch.equal(after[n], before[n])]
    assert changed and all(torch.equal(after[n], ref[n]) for n in after)
    phases = [m[f"time/{k}"] for k in ("rollout_s", "scoring_s", "reference_s", "hold_s", "loss_s", "update_s")]
    assert all(t >= 0 for t in phases) and m["time/loss_s"] > 0
    assert sum(phases) <= m["time/step_s"] < sum(phases) + 0.25


def test_query_indices_are_disjoint_across_ranks_and_cover_an_epoch() -> None:
    got = [query_indices(12, step, 4, seed=3, rank=r, world=2) for step in range(3) for r in range(2)]
    assert all(len(g) == 2 for g in got)  # 4 queries per step in all: 2 per rank
    flat = [i for g in got for i in g]
    assert sorted(flat) == list(range(12))  # one epoch = 3 steps x 4 queries
    assert query_indices(12, 3, 4, seed=3) != query_indices(12, 0, 4, seed=3)  # next epoch reshuffles
    with pytest.raises(ValueError, match="needs >= 8 training queries"):
        query_indices(6, 0, 8, seed=0, world=2)
    with pytest.raises(ValueError, match="does not split over 4 ranks"):
        query_indices(12, 0, 6, seed=0, world=4)


@pytest.mark.parametrize("world", [1, 2, 4])
def test_the_global_batch_does_not_depend_on_the_gpu_count(world: int) -> None:
    """queries_per_step is global: every step trains on the same queries on 1, 2 or 4 ranks."""
    for step in range(5):
        batch = sorted(i for r in range(world) for i in query_indices(40, step, 8, seed=1, rank=r, world=world))
        assert batch == sorted(query_indices(40, step, 8, seed=1))


class FakeDecoder:
    """forecast close path = last close * (1 + 0.01 k), k = 1..S, when the action says up; flat otherwise."""

    def forecast(self, windows, actions, n_samples, generator=None):
        n, s = len(windows), 5
        c0 = windows.hist[:, -1, 3][:, None]
        slope = np.array([[0.01 if a is not None and a.direction == "up" else 0.0] for a in actions])
        close = c0 * (1 + slope * np.arange(1, s + 1))
        return Forecast(close, np.repeat(close[:, None], 3, 1), close * 1.02, close * 0.98, close * 0 + 1e6,
                        np.full(n, 0.4))


class FakeWindows:
    def __init__(self, hist):
        self.hist = hist

    def __len__(self):
        return len(self.hist)

    def select(self, idx):
        return FakeWindows(self.hist[idx])


def _render(fc, i, error=None):
    return f"{FORECAST_TS_OPEN}close {fc.close[i, -1]:.1f}{FORECAST_TS_CLOSE}"


def test_stock_r1_scorer_on_real_rollouts_and_tool_tokens_get_no_gradient(tiny_tokenizer) -> None:
    tok = tiny_tokenizer
    p_good, p_bad = chat_prompt(tok, "Question: will it rise?"), chat_prompt(tok, "Question 2: will it rise?")
    scripts = {p_good: ["trend looks up. " + ACT, " so <answer>Yes</answer>"], p_bad: [BAD, " <answer>No</answer>"]}
    hist = np.zeros((2, 5, 5))
    hist[:, -1, 3] = 100.0
    tool = ForecastTool(FakeDecoder(), FakeWindows(hist), n_samples=3, render=_render)
    rollouts = RolloutEngine(ScriptedPolicy(tok, scripts), tok, [tool], max_new_tokens=64).generate(
        [p_good, p_bad], sample_refs=[0, 1], num_return_sequences=2)
    g = np.random.default_rng(0)
    th = ActionThresholds.fit_paths(100 * np.exp(np.cumsum(0.01 * g.standard_normal((50, 5)), 1)), np.full(50, 100.0))
    target = ForecastAction(direction="up", volatility_level="medium")
    true_close = 100 * (1 + 0.02 * np.arange(1, 6))
    cols = dict(answer="Yes", answer_type="yes_no", target_action=target, true_close=true_close, start_close=100.0)
    samples = [GRPOSample(p_good, 0, cols), GRPOSample(p_bad, 1, cols)]
    br = StockR1Scorer(th)(rollouts, samples)

    emitted = parse_action(ACT).action
    decoded = actions_from_forecast(rollouts[0].forecast, np.array([100.0]), th)[0]
    assert decoded.direction == "up"  # g of the decoded path the tool returned for this rollout
    assert br.components["r_ans"].tolist() == [1.0, 1.0, 0.0, 0.0]
    assert br.components["r_act"][:2].tolist() == [score_action(emitted, target).score] * 2
    assert br.components["r_cons"][:2].tolist() == [score_action(emitted, decoded).score] * 2
    assert br.components["r_act"][2:].tolist() == [PENALTY] * 2 and br.components["r_cons"][2:].tolist() == [PENALTY] * 2
    assert (br.components["r_prec"][:2] > br.components["r_prec"][2:]).all()  # up path beats the flat one

    # tool observation tokens are masked out and receive exactly zero gradient
    b = rollout_batch(rollouts, samples, tok.pad_token_id)
    r = rollouts[0]
    tool_pos = [i for i, m in enumerate(r.gen_mask) if m == 0 and i >= r.prompt_len]
    assert tool_pos and b["gen"][0, tool_pos].sum() == 0 and b["gen"][0].sum() == r.n_generated
    logp = torch.randn(b["ids"].shape, requires_grad=True)
    grpo_loss(logp, torch.tensor([1.0, -1.0, 0.5, -0.5]), b["gen"]).loss.backward()
    assert torch.all(logp.grad[0, tool_pos] == 0) and torch.all(logp.grad[0, r.prompt_len:][b["gen"][0, r.prompt_len:] == 1] != 0)


def test_config_from_dict_nested_and_rejects_unknown_keys() -> None:
    cfg = GRPOTrainConfig.from_dict({"group_size": 4, "loss": {"beta": 0.04}, "uncertainty": {"enabled": False},
                                     "reward_components": ["r_ans", "r_cons"]})
    assert cfg.loss.beta == 0.04 and not cfg.uncertainty.enabled and cfg.reward_components == ("r_ans", "r_cons")
    with pytest.raises(ValueError, match="unknown GRPOTrainConfig keys"):
        GRPOTrainConfig.from_dict({"G": 8})


def _one_step(tiny_policy, out: Path, us: list[float], **unc) -> dict[str, torch.Tensor]:
    """Parameters after one u-GRPO step (2 optimiser passes, KL on) on 4 queries with uncertainties ``us``."""
    torch.manual_seed(0)
    pol = tiny_policy(d_ts=D_TS)
    eng = RolloutEngine(pol, pol.tokenizer, [], max_new_tokens=6, temperature=1.0)
    cfg = GRPOTrainConfig.from_dict({"group_size": 4, "queries_per_step": 4, "max_steps": 1, "lr": 1e-2,
                                     "accelerator": "cpu", "ckpt_every": 10, "num_iterations": 2,
                                     "loss": {"beta": 0.04}, "uncertainty": unc})
    samples = [GRPOSample(s.prompt, s.sample_ref, ts_tokens=s.ts_tokens, uncertainty=u)
               for s, u in zip(_samples(pol.tokenizer), us, strict=True)]
    tr = GRPOTrainer(pol, eng, samples, FuncScorer({"e": count_e}), cfg, out)
    tr.fit()
    return tr.trainable_state() | {"_spread": torch.tensor(tr.history[-1]["uncertainty/weight_spread"])}


def test_queries_sharing_one_u_train_exactly_as_plain_grpo(tiny_policy, tmp_path) -> None:
    """w(0.7) = 0.38 for every query: normalised over the step it is 1, so the update is plain GRPO's, bit
    for bit; with different U the same step moves the weights elsewhere."""
    plain = _one_step(tiny_policy, tmp_path / "plain", [0.7] * 4, enabled=False)
    shared = _one_step(tiny_policy, tmp_path / "shared", [0.7] * 4, enabled=True)
    for n in plain:
        assert torch.equal(plain[n], shared[n]), n
    differ = _one_step(tiny_policy, tmp_path / "differ", [0.1, 0.9, 0.1, 0.9], enabled=True)
    assert float(differ.pop("_spread")) == pytest.approx(2 ** 2.6, rel=1e-5)  # w(0.1) / w(0.9) = 1 / 2^-2.6
    assert any(not torch.equal(plain[n], differ[n]) for n in differ)


def _first_update(tiny_policy, out: Path, policy: dict | None = None,
                  **optim) -> tuple[GRPOTrainer, dict[str, torch.Tensor]]:
    """One GRPO step from a fresh AdamW (the step's only optimiser pass): the trainer and each trainable
    tensor's change. ``policy``: PolicyConfig fields over the tiny policy's."""
    torch.manual_seed(0)
    pol = tiny_policy(d_ts=D_TS, **(policy or {}))
    eng = RolloutEngine(pol, pol.tokenizer, [], max_new_tokens=6, temperature=1.0)
    cfg = GRPOTrainConfig.from_dict({"group_size": 4, "queries_per_step": 2, "max_steps": 1, "lr": 1e-2,
                                     "accelerator": "cpu", "ckpt_every": 10, "max_grad_norm": 1e9, **optim})
    tr = GRPOTrainer(pol, eng, _samples(pol.tokenizer), FuncScorer({"e": count_e}), cfg, out)
    before = tr.trainable_state()
    tr.fit()
    after = tr.trainable_state()
    return tr, {n: after[n] - before[n] for n in before}


def test_adam_eps_and_betas_reach_the_optimiser_and_set_the_first_step(tiny_policy, tmp_path) -> None:
    """Default eps: the first update is about -lr sign(g), so most moved weights move by ~lr. An eps far
    above every |g| makes it -lr g / eps, linear in g: every weight moves by far less than lr."""
    tr, sign_like = _first_update(tiny_policy, tmp_path / "default")
    assert tr.opt.param_groups[0]["eps"] == 1e-8 and tr.opt.param_groups[0]["betas"] == (0.9, 0.999)
    moved = torch.cat([d.flatten() for d in sign_like.values()])
    moved = moved[moved != 0].abs()
    assert moved.numel() > 100 and float(moved.median()) == pytest.approx(1e-2, rel=0.05)
    tr, linear = _first_update(tiny_policy, tmp_path / "eps", adam_eps=1e3, adam_betas=[0.5, 0.9])
    assert tr.opt.param_groups[0]["eps"] == 1e3 and tr.opt.param_groups[0]["betas"] == (0.5, 0.9)
    assert max(float(d.abs().max()) for d in linear.values()) < 1e-4


def test_rows_and_projector_keep_their_own_lr_and_eps(tiny_policy, tmp_path) -> None:
    """The adapter linear in g (eps far above |g|: every LoRA weight moves by far less than lr) while the
    protocol rows and the projector keep AdamW's sign-like step at their own lr: each moved one by ~rows_lr."""
    tr, moved = _first_update(tiny_policy, tmp_path / "rows", policy={"lora_r": 4}, adam_eps=1e3,
                              rows_adam_eps=1e-8, rows_lr=3e-3)
    assert [(g["lr"], g["eps"]) for g in tr.opt.param_groups] == [(1e-2, 1e3), (3e-3, 1e-8)]
    rows = {n: d for n, d in moved.items() if any(k in n for k in ROW_PARAMS)}
    lora = {n: d for n, d in moved.items() if "lora_" in n}
    assert any("trainable_tokens" in n for n in rows) and any("projector." in n for n in rows) and lora
    assert max(float(d.abs().max()) for d in lora.values()) < 1e-4
    changed = torch.cat([d.flatten() for d in rows.values()])
    changed = changed[changed != 0].abs()
    assert changed.numel() > 10 and float(changed.median()) == pytest.approx(3e-3, rel=0.05)
    with pytest.raises(ValueError, match="train.rows_adam_eps must be > 0"):
        GRPOTrainConfig.from_dict({"rows_adam_eps": 0.0})


def test_grad_scales_by_group_against_hand_values() -> None:
    """Shares of |g|^2, per-entry RMS and mean |g| per kind of weight, on gradients set by hand; frozen or
    gradient-less weights are left out."""
    named = [(n, torch.nn.Parameter(torch.zeros(len(g)))) for n, g in
             [("emb.trainable_tokens.w", [3.0, -4.0]), ("projector.0.weight", [1.0, 0.0, 0.0, -1.0]),
              ("layers.0.lora_A.default.weight", [0.0, 2.0]), ("layers.0.lora_B.default.weight", [0.0, 0.0]),
              ("head.weight", [1.0])]]
    for (_, p), g in zip(named, ([3.0, -4.0], [1.0, 0.0, 0.0, -1.0], [0.0, 2.0], [0.0, 0.0], [1.0]), strict=True):
        p.grad = torch.tensor(g)
    frozen = torch.nn.Parameter(torch.ones(3), requires_grad=False)
    frozen.grad = torch.ones(3)
    out = grad_scales(named + [("lora_C.weight", frozen), ("projector.1.bias", torch.nn.Parameter(torch.ones(2)))])
    # |g|^2: rows 25, projector 2, adapter 4, base 1 (32 in all)
    assert [param_group(n) for n, _ in named] == ["rows", "projector", "adapter", "adapter", "base"]
    assert {k: round(v, 6) for k, v in out.items()} == {
        "policy/grad_share/rows": 25 / 32, "policy/grad_rms/rows": round((25 / 2) ** 0.5, 6),
        "policy/grad_mean_abs/rows": 3.5,
        "policy/grad_share/projector": 2 / 32, "policy/grad_rms/projector": round(0.5 ** 0.5, 6),
        "policy/grad_mean_abs/projector": 0.5,
        "policy/grad_share/adapter": 4 / 32, "policy/grad_rms/adapter": 1.0, "policy/grad_mean_abs/adapter": 0.5,
        "policy/grad_share/base": 1 / 32, "policy/grad_rms/base": 1.0, "policy/grad_mean_abs/base": 1.0}
    assert grad_scales([("x", torch.nn.Parameter(torch.zeros(2)))]) == {}


def test_a_step_logs_its_gradient_by_group_before_clipping(tiny_policy, tmp_path) -> None:
    """The step's logged group scales are those of the gradient the optimiser read (left in .grad; no
    clipping at max_grad_norm 1e9) and of the clipped one's direction when clipping bites (shares and
    ratios do not change with a common factor; the RMS is the unclipped one)."""
    tr, _ = _first_update(tiny_policy, tmp_path / "scales", policy={"lora_r": 4})
    logged = tr.history[-1]
    expected = grad_scales(tr.policy.named_parameters())
    assert {k for k in expected} >= {"policy/grad_share/rows", "policy/grad_share/projector", "policy/grad_share/adapter"}
    for k, v in expected.items():
        assert logged[k] == pytest.approx(v, rel=1e-5), k
    assert sum(logged[f"policy/grad_share/{g}"] for g in ("rows", "projector", "adapter")) == pytest.approx(1.0)
    tr, _ = _first_update(tiny_policy, tmp_path / "clipped", policy={"lora_r": 4}, max_grad_norm=1e-6)
    clipped = grad_scales(tr.policy.named_parameters())  # .grad after clipping: scaled by 1e-6 / |g|
    scale = 1e-6 / tr.history[-1]["policy/grad_norm"]
    for g in ("rows", "projector", "adapter"):
        assert tr.history[-1][f"policy/grad_share/{g}"] == pytest.approx(clipped[f"policy/grad_share/{g}"], rel=1e-4)
        assert tr.history[-1][f"policy/grad_rms/{g}"] * scale == pytest.approx(clipped[f"policy/grad_rms/{g}"], rel=1e-4)


@pytest.mark.parametrize("bad", [{"adam_eps": 0.0}, {"adam_betas": [0.9, 1.0]}, {"adam_betas": [0.9, 0.99, 0.9]}])
def test_bad_adam_settings_are_named(bad) -> None:
    with pytest.raises(ValueError, match="train.adam_betas must be two numbers"):
        GRPOTrainConfig.from_dict(bad)
