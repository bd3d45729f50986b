"""Every fitted statistic sees the train split only, tested where it is called.

Each command's fitted artefacts are built twice on tiny synthetic data: once as is, once with every
value after the train end replaced (the raw frames after the last day a train window reads, then
the inputs and labels of every validation and test window: ``x``, ``hist``, ``context``, ``y``,
``future``). They must be bit-identical: ``stockr1 ts fit`` (weights, input stats, U normaliser),
the decoder training ``forecast_action.train`` (thresholds, weights, input stats, U normaliser),
``stockr1 sft`` prepare (thresholds.json, decoder_init, train QA items, traces) and ``stockr1
grpo`` setup (thresholds, the decoder's buffers, every train query's prompt, soft tokens and U_q).

Model selection may read validation but never test: with only the test labels replaced, the chosen
checkpoints (``best.ckpt`` of both, ``decoder/`` exported from the decoder's) are bit-identical too, and so are ``bench
sft_recipe``'s graded numbers and exported step and the baselines' validation-tuned settings.

The plants at the end fit on more than train in a way that gets past the ``train_only`` type check
(rows relabelled as train, or a fit helper called on every split) and show that each comparison
catches it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml
from safetensors.torch import load_file

from forecast_action.derive import ActionThresholds
from forecast_action.train import ActionTrainConfig
from forecast_action.train import train as train_decoder
from llm.build import load_data
from llm.qa.context import store_context
from llm.sft import prepare
from llm.tokenizer import train_tokenizer
from stockr1.data import build_windows, load_source
from stockr1.data.context import synthetic_store
from stockr1.data.leakage import perturb_after_train, perturb_frames, train_end
from stockr1.data.quality import check_frames
from stockr1.data.splits import SAMPLE_SPLIT
from stockr1.types import CLOSE, TrainWindows, Windows, train_only

REPO = Path(__file__).resolve().parents[1]
DATA = {"source": "synthetic", "n_tickers": 2, "n_days": 260, "seed": 0, "lookback": 30, "horizon": 10}
ENC = {"lookback": 30, "horizon": 10, "patch_len": 10, "d_model": 16, "n_layers": 1, "n_heads": 2, "ffn_dim": 32,
       "dropout": 0.0, "d_llm": 16}
ACTION = {"cond_dim": 8, "emb_dim": 2, "hidden": 16}
DECODER = {"seed": 0, "warmup_steps": 2, "tool_samples": 4, "ts": ENC, "action": ACTION}
Data = tuple[Windows, Callable]


# --- data: as is, everything after the train end replaced, test labels replaced -----------------


@pytest.fixture(scope="module")
def data() -> dict[str, Data]:
    """``load_data(DATA)`` as the commands read it, and its two perturbed twins."""
    base = load_data(DATA)
    kw = {k: DATA[k] for k in ("n_tickers", "n_days", "seed")}
    raw = load_source("synthetic", **kw)  # load_data's context store reads the unchecked frames
    frames = check_frames(raw)[0]
    end = train_end(frames, base[0])
    pf = perturb_frames(frames, end, seed=1)
    w = build_windows(pf, lookback=DATA["lookback"], horizon=DATA["horizon"], split=SAMPLE_SPLIT,
                      context=synthetic_store(pf, seed=DATA["seed"]))
    after_train = (perturb_after_train(w, seed=2), store_context(synthetic_store(perturb_frames(raw, end, seed=1))))
    test_labels = (perturb_after_train(base[0], seed=3, splits=("test",), labels_only=True), base[1])
    return {"base": base, "after_train": after_train, "test_labels": test_labels}


@contextmanager
def reading(data: Data) -> Iterator[None]:
    """Every command's data loader returns ``data`` (the commands read nothing else)."""
    windows, _ = data
    with pytest.MonkeyPatch.context() as m:
        m.setattr("llm.sft.load_data", lambda cfg: data)
        m.setattr("rl.setup.load_data", lambda cfg: data)
        m.setattr("ts_encoder.datamodule.source_windows", lambda *a, **k: windows)
        m.setattr("forecast_action.train.source_windows", lambda *a, **k: windows)
        yield


def diff(a: Any, b: Any, key: str = "") -> list[str]:
    """Keys (dotted) whose values differ: tensors and arrays bit for bit, containers recursively."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        if set(a) != set(b):
            return [f"{key}: keys {sorted(set(a) ^ set(b))}"]
        return [d for k in a for d in diff(a[k], b[k], f"{key}.{k}" if key else str(k))]
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return [f"{key}: length {len(a)} vs {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in diff(x, y, f"{key}[{i}]")]
    if isinstance(a, torch.Tensor):
        same = isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    elif isinstance(a, np.ndarray):
        same = isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    else:
        same = type(a) is type(b) and a == b
    return [] if same else [key]


def test_the_perturbation_moves_every_value_after_the_train_end_and_none_before(data) -> None:
    (base, _), (pert, _), (tl, _) = data["base"], data["after_train"], data["test_labels"]
    train, test = base.split == "train", base.split == "test"
    assert (pert.split == base.split).all() and (pert.date == base.date).all()
    for name in ("x", "y", "hist", "future", "context"):
        np.testing.assert_array_equal(getattr(pert, name)[train], getattr(base, name)[train], err_msg=name)
        moved = getattr(pert, name)[~train] != getattr(base, name)[~train]
        assert moved.reshape(len(moved), -1).all(), name  # every value of every val/test window
    for name in ("y", "future"):
        assert (getattr(tl, name)[test] != getattr(base, name)[test]).all()
    for name in ("x", "hist", "context"):
        np.testing.assert_array_equal(getattr(tl, name), getattr(base, name))
    np.testing.assert_array_equal(tl.y[~test], base.y[~test])


# --- the mechanism -------------------------------------------------------------------------------


def test_train_only_is_the_one_door_and_every_fit_refuses_anything_else(data) -> None:
    from forecast_action.decoder import ActionConditionedDecoder
    from forecast_action.encoder import ActionEncoderConfig
    from ts_encoder.config import TSEncoderConfig
    from ts_encoder.datamodule import input_stats
    from ts_encoder.module import TSForecastModule

    w = data["base"][0]
    t = train_only(w)
    assert isinstance(t, TrainWindows) and len(t) == int((w.split == "train").sum()) and train_only(t) is t
    np.testing.assert_array_equal(t.future, w.split_of("train").future)
    with pytest.raises(ValueError, match="train rows only"):
        dataclasses.replace(t, split=np.where(np.arange(len(t)) == 0, "test", t.split))
    dec = ActionConditionedDecoder(TSEncoderConfig(**ENC), ActionEncoderConfig(**ACTION))
    fits = {"ActionThresholds.fit": ActionThresholds.fit, "fit_uncertainty": dec.fit_uncertainty,
            "fit_input_stats": dec.fit_input_stats, "fit_normalizer": TSForecastModule(encoder=ENC).fit_normalizer,
            "input_stats": input_stats}
    for name, fit in fits.items():
        for wrong in (w, w.split_of("train"), w.split_of("test")):  # a plain Windows, even of train rows
            with pytest.raises(TypeError, match=f"{name} fits on the train split only"):
                fit(wrong)


# --- the four commands -----------------------------------------------------------------------------


def ts_fit(tmp: Path, data: Data) -> dict[str, Any]:
    """``stockr1 ts fit`` (configs/ts_encoder/tiny.yaml, tiny encoder, 2 epochs of 2 steps)."""
    from ts_encoder.cli import main

    cfg = yaml.safe_load((REPO / "configs/ts_encoder/tiny.yaml").read_text())
    for cb in cfg["trainer"]["callbacks"]:
        if "dirpath" in cb.get("init_args", {}):
            cb["init_args"]["dirpath"] = str(tmp / "ckpt")
    cfg["model"]["encoder"].update(ENC)
    cfg["model"].update(warmup_steps=1, fan_chart_windows=0, val_samples=4, normalizer_fit_windows=64)
    cfg["data"] = {"source": "synthetic", "lookback": 30, "horizon": 10, "batch_size": 32, "eval_batch_size": 64}
    cfg["trainer"].update(max_epochs=2, limit_train_batches=2, num_sanity_val_steps=0, enable_model_summary=False,
                          default_root_dir=str(tmp), logger=[{"class_path": "lightning.pytorch.loggers.CSVLogger",
                                                              "init_args": {"save_dir": str(tmp), "name": "logs"}}])
    (tmp / "fit.yaml").write_text(yaml.safe_dump(cfg))
    with reading(data):
        assert main(["fit", "--config", str(tmp / "fit.yaml")]) == 0
    return {name: checkpoint(tmp / "ckpt" / f"{name}.ckpt") for name in ("last", "best")}


def checkpoint(path: Path) -> dict[str, Any]:
    """What a Lightning checkpoint fixed: weights and buffers, step, hyper-parameters, and which
    checkpoint the validation monitor chose (its score and file name): ts fit's val/loss, the decoder
    training's val/objective."""
    ck = torch.load(path, map_location="cpu", weights_only=False)
    monitors = {k: v for k, v in ck["callbacks"].items() if "val/loss" in k or "val/objective" in k}
    return {"state_dict": ck["state_dict"], "global_step": ck["global_step"],
            "hparams": json.loads(json.dumps(ck.get("hyper_parameters", {}), default=str)),
            "chosen": {k: (v["best_model_score"], Path(v["best_model_path"]).name) for k, v in monitors.items()}}


def decoder_training(tmp: Path, data: Data) -> dict[str, Any]:
    """``python -m forecast_action.train`` (2 epochs), the stage that trains the action decoder."""
    cfg = ActionTrainConfig.from_dict({
        "data": {"source": "synthetic", "lookback": 30, "horizon": 10, "max_train": 64}, "model": ENC, "action": ACTION,
        "train": {"lr": 3e-3, "batch_size": 32, "max_epochs": 2, "seed": 0, "val_samples": 4,
                  "normalizer_fit_windows": 64, "warmup_steps": 1}})
    with reading(data):
        train_decoder(cfg, tmp)
    saved = decoder_file(tmp / "decoder")  # the val-best weights; the thresholds inside are train-fitted
    return {"thresholds": saved["thresholds"], "decoder/": saved,
            "last": checkpoint(tmp / "last.ckpt"), "best": checkpoint(tmp / "best.ckpt")}


SFT = {"data": DATA, "max_context_chars": 200, "qa": {"n_train": 8, "n_val": 4, "n_test": 4, "seed": 0},
       "traces": {"drop_trivial": False}, "decoder": DECODER}


def decoder_file(path: Path) -> dict[str, Any]:
    """A saved decoder directory as plain data: its configs and its weights (not the file hash, which
    the config carries and which follows the weights)."""
    meta = json.loads((path / "config.json").read_text())
    return {**{k: meta.get(k) for k in ("ts_cfg", "act_cfg", "tool_samples", "thresholds")},
            "state_dict": load_file(str(path / "model.safetensors"))}


def sft_prepare(tmp: Path, data: Data) -> dict[str, Any]:
    """``stockr1 sft``'s prepare: QA items, thresholds, the prepared decoder, traces."""
    with reading(data):
        prepare(SFT, tmp)
    items = [json.loads(line) for line in (tmp / "qa.jsonl").read_text().splitlines()]
    return {"thresholds.json": (tmp / "thresholds.json").read_text(),
            "decoder_init": decoder_file(tmp / "decoder_init"),
            "train_items": [it for it in items if it["split"] == "train"],
            "traces.jsonl": (tmp / "traces.jsonl").read_text(),
            "_read": [it for it in items if it["split"] != "train"]}  # may move: not compared


@pytest.fixture(scope="module")
def policy_cfg(tmp_path_factory, data) -> dict[str, Any]:
    tok = tmp_path_factory.mktemp("tok")
    train_tokenizer([str(c) for c in data["base"][0].context[:40]] + ["Question: will it rise?"] * 5, 500, tok)
    return {"name_or_path": "tiny", "tokenizer_path": str(tok), "tiny_hidden": 32, "tiny_layers": 1, "tiny_heads": 2,
            "tiny_kv_heads": 1, "tiny_intermediate": 64, "lora_r": 0, "d_ts": 16}


def grpo_setup(policy: dict[str, Any], data: Data) -> dict[str, Any]:
    """``stockr1 grpo``'s setup without an SFT run: QA items, thresholds, the fresh decoder prepared
    on train (input scaling, U normaliser), and one GRPO sample per train query."""
    from rl.setup import build_setup
    from rl.soft_tokens import soft_tokens

    cfg = {"seed": 0, "data": DATA, "max_context_chars": 200, "qa": {"n_train": 6, "n_val": 2, "n_test": 2, "seed": 0},
           "decoder": DECODER, "policy": policy, "rollout": {"max_new_tokens": 8},
           "train": {"group_size": 2, "queries_per_step": 1, "max_steps": 1, "accelerator": "cpu"}}
    with reading(data):
        st = build_setup(cfg, None)
    return {"thresholds": st.thresholds.to_dict(), "decoder": dict(st.decoder.state_dict()),
            "soft_tokens": soft_tokens(st.samples),
            "samples": [{"prompt": s.prompt, "ref": s.sample_ref, "U_q": s.uncertainty,
                         "columns": {k: v for k, v in s.columns.items() if k != "target_action"},
                         "target_action": s.columns["target_action"].model_dump()} for s in st.samples],
            "_read": {"future": st.windows.future}}  # may move: not compared


COMMANDS = {"ts_fit": ts_fit, "decoder_training": decoder_training, "sft_prepare": sft_prepare}


class Built(dict):
    """command -> data variant -> its artefacts, each command run on first use (so a command that
    raises fails its own tests only)."""

    def __init__(self, tmp_factory, data: dict[str, Data], policy: dict[str, Any]) -> None:
        super().__init__()
        self.tmp_factory, self.data, self.policy = tmp_factory, data, policy

    def __missing__(self, cmd: str) -> dict[str, Any]:
        if cmd == "grpo_setup":
            self[cmd] = {v: grpo_setup(self.policy, self.data[v]) for v in ("base", "after_train")}
        else:
            self[cmd] = {v: COMMANDS[cmd](self.tmp_factory.mktemp(f"{cmd}-{v}"), d) for v, d in self.data.items()}
        return self[cmd]


@pytest.fixture(scope="module")
def built(tmp_path_factory, data, policy_cfg) -> Built:
    return Built(tmp_path_factory, data, policy_cfg)


@pytest.mark.parametrize("cmd", [*COMMANDS, "grpo_setup"])
def test_every_artefact_a_command_fits_is_bit_identical_when_everything_after_the_train_end_moves(built, cmd) -> None:
    got = {v: {k: a for k, a in art.items() if not k.startswith("_")} for v, art in built[cmd].items()}
    if cmd in ("ts_fit", "decoder_training"):  # the val/loss choice may read validation; everything else not
        got = {v: {k: a for k, a in art.items() if k not in ("best", "decoder/")} for v, art in got.items()}
        for art in got.values():
            art["last"] = {k: a for k, a in art["last"].items() if k != "chosen"}
    assert diff(got["base"], got["after_train"]) == []


def test_the_compared_artefacts_hold_the_fitted_statistics(built) -> None:
    """Guards against a vacuous comparison: each fitted statistic is present and fitted."""
    ts = built["ts_fit"]["base"]["last"]["state_dict"]
    assert bool(ts["normalizer.fitted"]) and ts["model.x_scale"].ne(1).all() and ts["normalizer.knots"].diff().gt(0).all()
    dec = built["decoder_training"]["base"]
    assert dec["thresholds"]["n_fit"] > 3 and bool(dec["last"]["state_dict"]["normalizer.fitted"])
    init = built["sft_prepare"]["base"]["decoder_init"]["state_dict"]
    assert bool(init["normalizer.fitted"]) and init["encoder.x_scale"].ne(1).all()
    assert built["sft_prepare"]["base"]["train_items"] and built["sft_prepare"]["base"]["traces.jsonl"]
    u = [s["U_q"] for s in built["grpo_setup"]["base"]["samples"]]
    assert u and all(0.0 <= x <= 1.0 for x in u) and len(set(u)) > 1
    # and each command read the perturbed data: what may see validation / test did move
    for cmd in ("ts_fit", "decoder_training"):
        a, b = (built[cmd][v]["last"]["chosen"] for v in ("base", "after_train"))
        assert [float(s) for s, _ in a.values()] != [float(s) for s, _ in b.values()]  # val/loss
    for cmd in ("sft_prepare", "grpo_setup"):
        a, b = (built[cmd][v]["_read"] for v in ("base", "after_train"))
        assert a and diff(a, b)


@pytest.mark.parametrize("cmd", [*COMMANDS])
def test_model_selection_and_every_artefact_ignore_the_test_labels(built, cmd) -> None:
    """Replacing only the test split's ``y``/``future`` changes no chosen checkpoint (``best.ckpt`` of
    ts fit and of the decoder training, and its exported ``decoder/``: both by val/loss) and nothing else either."""
    got = {v: {k: a for k, a in art.items() if not k.startswith("_")} for v, art in built[cmd].items()}
    assert diff(got["base"], got["test_labels"]) == []
    if cmd in ("ts_fit", "decoder_training"):
        chosen = got["base"]["last"]["chosen"]
        assert len(chosen) == 1 and all(np.isfinite(float(s)) for s, _ in chosen.values())


# --- plants: a fit on more than train that gets past the type check is still caught ----------------


def relabelled(w: Windows) -> TrainWindows:
    """Every row of ``w`` passed off as train: the way a plant gets past ``require_train``."""
    fields = {f.name: getattr(w, f.name) for f in dataclasses.fields(w)}
    return TrainWindows(**{**fields, "split": np.full(len(w), "train", dtype=object)})


@contextmanager
def tertiles_on_every_split(windows: Windows) -> Iterator[None]:
    """``stockr1 sft`` prepare's tertiles fitted on the realised futures of every split."""
    every = classmethod(lambda cls, train, **kw: cls.fit_paths(windows.future[:, :, CLOSE], windows.last_close, **kw))
    with pytest.MonkeyPatch.context() as m:
        m.setattr(ActionThresholds, "fit", every)
        yield


@contextmanager
def u_normaliser_on_every_split(windows: Windows) -> Iterator[None]:
    """``stockr1 grpo`` setup's fresh decoder: U_q normaliser fitted on every split."""

    def prepare(decoder, w) -> None:
        decoder.fit_input_stats(train_only(w))
        decoder.fit_uncertainty(relabelled(w))

    with pytest.MonkeyPatch.context() as m:
        m.setattr("rl.setup.prepare_fresh_decoder", prepare)
        yield


@contextmanager
def ts_normaliser_on_test(windows: Windows) -> Iterator[None]:
    """``stockr1 ts fit``: the TS module's U normaliser fitted on the test split."""
    from ts_encoder.module import TSForecastModule

    def start(self) -> None:
        self._val_outputs = []
        self.fit_normalizer(relabelled(self.trainer.datamodule.windows["test"]))

    with pytest.MonkeyPatch.context() as m:
        m.setattr(TSForecastModule, "on_validation_epoch_start", start)
        yield


PLANTS = {  # plant -> (command, the artefact that must move)
    "tertiles_on_every_split": (tertiles_on_every_split, "sft_prepare", "thresholds.json"),
    "u_normaliser_on_every_split": (u_normaliser_on_every_split, "grpo_setup", "decoder.normalizer.knots"),
    "ts_normaliser_on_test": (ts_normaliser_on_test, "ts_fit", "last.state_dict.normalizer.knots"),
}


@pytest.mark.parametrize("plant", PLANTS)
def test_a_planted_fit_on_more_than_train_is_caught(plant, data, policy_cfg, tmp_path) -> None:
    planted, cmd, key = PLANTS[plant]
    got = {}
    for v in ("base", "after_train"):
        with planted(data[v][0]):
            if cmd == "grpo_setup":
                got[v] = grpo_setup(policy_cfg, data[v])
            else:
                (tmp_path / v).mkdir()
                got[v] = COMMANDS[cmd](tmp_path / v, data[v])
        got[v].pop("_read", None)
    assert key in diff(got["base"], got["after_train"])


# --- model selection: every other place a checkpoint, step or hyper-parameter is chosen -----------


def test_sft_recipe_export_rule_reproduces_the_committed_choice() -> None:
    """results/sft_recipe/README.md: step 1,500 (one shared clip) and 2,000 (clipped apart) were exported."""
    from benchmarks.sft_recipe import export_step

    res = json.loads((REPO / "results/sft_recipe/metrics.json").read_text())["results"]
    assert {k: export_step(v) for k, v in res.items()} == {"h128_l4_bs4": "1500", "h128_l4_bs4_clip_apart": "2000"}
    tie = {"2": {"action_and_answer_rate": 90.0, "overall": 40.0}, "4": {"action_and_answer_rate": 90.0, "overall": 40.0},
           "6": {"action_and_answer_rate": 80.0, "overall": 60.0}, "avg2-4": {"action_and_answer_rate": 100.0, "overall": 99.0}}
    assert export_step(tie) == "4" and export_step({}) is None  # the later step; averages are not candidates


def test_sft_recipe_grading_and_export_ignore_the_test_labels(data, tmp_path) -> None:
    """``bench sft_recipe`` grades every evaluated step on validation questions and exports by
    ``export_step``: with the test split's labels (and so its QA answers) replaced, every graded
    number and the exported step are the same."""
    from benchmarks.sft_recipe import export_step, run_variant
    from tests.test_bench_sft_recipe import _sft_config

    sft = yaml.safe_load(_sft_config(tmp_path).read_text())
    assert sft["data"] == DATA
    sft["qa"]["n_test"] = 4
    (tmp_path / "sft.yaml").write_text(yaml.safe_dump(sft))
    sweep = {"sft_config": str(tmp_path / "sft.yaml"), "eval_at": [2, 4], "n_eval": 3, "max_new_tokens": 8,
             "variants": {"v": {}}}
    got = {}
    for variant in ("base", "test_labels"):
        with reading(data[variant]):
            res = run_variant(sweep, "v", tmp_path / variant, "cpu")
        got[variant] = {step: {k: m for k, m in metrics.items() if k != "train_s"} for step, metrics in res.items()}
        items = [json.loads(line) for line in (tmp_path / variant / "v" / "qa.jsonl").read_text().splitlines()]
        got[f"{variant}/test_answers"] = [it["answer"] for it in items if it["split"] == "test"]
    assert got["base/test_answers"] != got["test_labels/test_answers"]  # the test labels did move
    assert set(got["base"]) == {"2", "4"} and got["base"] == got["test_labels"]
    assert export_step(got["base"]) == export_step(got["test_labels"]) is not None


def test_baseline_hyper_parameters_are_chosen_without_the_test_labels(data) -> None:
    """``bench forecast`` fits each baseline on train and tunes it on validation (the trailing
    volatility window; DLinear's early-stopped epoch count): the choices are the same with the test
    split's labels replaced."""
    from benchmarks.forecast.command import run_forecasters

    chosen = {}
    for variant in ("base", "test_labels"):
        w = data[variant][0]
        _, info = run_forecasters(w, w.split_of("test"), ["random_walk", "drift", "dlinear"], None, n_samples=8,
                                  seed=0)
        chosen[variant] = {name: {k: i[k] for k in ("vol_window", "epochs_trained") if k in i}
                           for name, i in info.items()}
    assert chosen["base"] == chosen["test_labels"]
    assert chosen["base"]["dlinear"]["epochs_trained"] >= 1 and all("vol_window" in c for c in chosen["base"].values())
