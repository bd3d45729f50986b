"""Typed run configs: every shipped SFT / GRPO config (and the demo's and ablation's merged ones) is
valid; a misspelled section or key, or an impossible value, fails at load time naming its path."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from benchmarks.ablation.command import VARIANTS, AblationConfig, resolved_grpo, resolved_sft
from llm.sft import run_sft
from llm.sft_config import SFTRunConfig
from rl.run_config import GRPORunConfig
from rl.setup import load_config
from stockr1.cli import main as stockr1_main
from stockr1.config import deep_update, dotted_overrides, load_yaml

ROOT = Path(__file__).parents[1]
SFT = sorted((ROOT / "configs" / "sft").glob("*.yaml"))
GRPO = sorted((ROOT / "configs" / "grpo").glob("*.yaml"))


@pytest.mark.parametrize("path", SFT, ids=lambda p: p.name)
def test_every_shipped_sft_config_is_valid(path: Path) -> None:
    cfg = SFTRunConfig.from_dict(load_yaml(path))
    assert cfg.train.lr > 0 and cfg.data.horizon <= cfg.data.lookback


@pytest.mark.parametrize("path", GRPO, ids=lambda p: p.name)
def test_every_shipped_grpo_config_is_valid(path: Path) -> None:
    cfg = GRPORunConfig.from_dict(load_config(path))
    assert cfg.train.group_size >= 2


def test_the_demo_and_ablation_overrides_merge_into_valid_configs() -> None:
    for name in ("demo.yaml", "demo_tiny.yaml"):
        demo = load_yaml(ROOT / "configs" / name)
        if "sft" in demo:  # --from-scratch's tiny SFT (configs/demo_tiny.yaml)
            SFTRunConfig.from_dict(deep_update(load_yaml(ROOT / demo["sft"]["config"]), demo["sft"]["overrides"]))
        GRPORunConfig.from_dict(deep_update(load_yaml(ROOT / demo["grpo"]["config"]), demo["grpo"]["overrides"]))
    abl = AblationConfig.from_dict(load_yaml(ROOT / "configs" / "ablation" / "demo.yaml"))
    sft_cfg = SFTRunConfig.from_dict(resolved_sft(abl, 0, None))
    for variant in VARIANTS[1:]:  # every GRPO row's switches on top of the shared budget
        full, _ = resolved_grpo(abl, variant, 0, dataclasses.asdict(sft_cfg))
        GRPORunConfig.from_dict(full)


@pytest.mark.parametrize(("edit", "message"), [
    ({"trian": {"lr": 1e-3}}, r"unknown sft keys \['trian'\].*sft\.trian: did you mean 'train'\?"),
    ({"data": {"sourc": "sample"}}, r"unknown sft\.data keys \['sourc'\].*did you mean 'source'\?"),
    ({"train": {"lrr": 1e-3}}, r"sft\.train\.lrr: did you mean 'lr'\?"),
    ({"decoder": {"ts": {"d_modle": 8}}}, r"sft\.decoder\.ts\.d_modle: did you mean 'd_model'\?"),
    ({"policy": {"lora_rank": 8}}, r"unknown sft\.policy keys \['lora_rank'\]"),
    ({"train": {"lr": -1e-3}}, r"train\.lr must be > 0"),
    ({"train": {"batch_size": 0}}, r"train\.batch_size must be >= 1"),
    ({"data": {"lookback": 10, "horizon": 20}}, r"horizon \(20\) is longer than the window"),
    ({"data": {"source": "yahoo"}}, r"data\.source must be one of"),
    ({"decoder": {"tool_samples": 0}}, r"decoder\.tool_samples must be >= 1"),
])
def test_a_bad_sft_config_fails_naming_the_key(edit: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SFTRunConfig.from_dict(deep_update(load_yaml(ROOT / "configs" / "sft" / "tiny.yaml"), edit))


@pytest.mark.parametrize(("edit", "message"), [
    ({"rollout": {"temprature": 0.8}}, r"grpo\.rollout\.temprature: did you mean 'temperature'\?"),
    ({"train": {"group_size": 0}}, r"group_size must be >= 2"),
    ({"train": {"lr": 0.0}}, r"train\.lr must be > 0"),
    ({"train": {"loss": {"bta": 0.1}}}, r"grpo\.train\.loss\.bta: did you mean 'beta'\?"),
    ({"rollout": {"top_p": 1.5}}, r"0 < top_p <= 1"),
    ({"rollout": {"n_samples": 4}}, r"rollout\.n_samples is gone"),
    ({"sft": {"rundir": "x"}}, r"grpo\.sft\.rundir: did you mean 'run_dir'\?"),
])
def test_a_bad_grpo_config_fails_naming_the_key(edit: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_config(ROOT / "configs" / "grpo" / "tiny.yaml", edit)


def test_the_sft_command_refuses_a_typo_before_any_work(tmp_path: Path, capsys) -> None:
    cfg = deep_update(load_yaml(ROOT / "configs" / "sft" / "tiny.yaml"), {"trian": {"lr": 1e-3}})
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(ValueError, match="typo.yaml: unknown sft keys"):
        run_sft(path, out_root=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()  # nothing was written
    assert stockr1_main(["sft", "--config", str(path), "--out", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert "typo.yaml" in err and "did you mean 'train'" in err and "Traceback" not in err


def test_dotted_overrides_build_nested_sections_with_yaml_values() -> None:
    got = dotted_overrides(["--train.lr", "1e-3", "--train.devices=2", "--rollout.stop", "[a, b]", "--run", "x",
                            "--train.grad-clip", "null"])
    assert got == {"train": {"lr": 1e-3, "devices": 2, "grad_clip": None}, "rollout": {"stop": ["a", "b"]}, "run": "x"}
    for bad, msg in ((["train.lr", "1"], "unexpected argument"), (["--train.lr"], "needs a value"),
                     (["--train..lr", "1"], "bad override path"), (["--train", "1", "--train.lr", "2"], "conflicts")):
        with pytest.raises(ValueError, match=msg):
            dotted_overrides(bad)


@pytest.mark.parametrize("stage", ["sft", "grpo"])
def test_print_config_resolves_overrides_and_defaults(stage: str, capsys) -> None:
    cfg = ROOT / "configs" / stage / "tiny.yaml"
    assert stockr1_main([stage, "--config", str(cfg), "--print_config", "--train.devices", "2",
                         "--train.strategy", "ddp", "--train.num_nodes", "3"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["train"]["devices"] == 2 and printed["train"]["num_nodes"] == 3
    assert printed["train"]["strategy"] == "ddp"
    file_train = load_yaml(cfg)["train"]
    assert printed["train"]["lr"] == pytest.approx(float(file_train["lr"]))  # the file's value
    assert set(printed["train"]) > set(file_train)  # and every default the file leaves out
    # a misspelled dotted path is refused with the nearest key, before any work
    assert stockr1_main([stage, "--config", str(cfg), "--print_config", "--train.strategi", "ddp"]) == 2
    assert "did you mean 'strategy'" in capsys.readouterr().err


@pytest.mark.parametrize("argv, path, value, typo, hint", [
    (["curriculum", "--config", "configs/methods/trading_r1/curriculum.yaml"], ["n_train"], 5, "--n_trian", "n_train"),
    (["bench", "ablation", "--config", "configs/ablation/demo.yaml"], ["eval", "n"], 5, "--eval.nn", "n"),
    (["bench", "compare", "--config", "configs/compare/tiny.yaml"], ["eval", "max_batch_rows"], 5, "--eval.max_batch_row",
     "max_batch_rows"),
    (["bench", "sft_recipe", "--config", "configs/sft_recipe/tiny.yaml"], ["n_eval"], 5, "--n_evl", "n_eval"),
    (["demo"], ["grpo", "overrides", "train", "max_steps"], 5, "--grpo.overrides.train.max_step", "max_steps"),
], ids=["curriculum", "ablation", "compare", "sft_recipe", "demo"])
def test_other_yaml_commands_print_config_and_take_dotted_overrides(argv, path, value, typo, hint, capsys) -> None:
    dotted = "--" + ".".join(path)
    assert stockr1_main([*argv, "--print_config", dotted, str(value)]) == 0
    node = yaml.safe_load(capsys.readouterr().out)
    for k in path:
        node = node[k]
    assert node == value
    assert stockr1_main([*argv, "--print_config", typo, "1"]) == 2
    assert f"did you mean {hint!r}" in capsys.readouterr().err


def test_the_pretrained_ablation_config_has_the_issue_minimums() -> None:
    """Issue 33 part 4: >= 3 seeds, >= 300 test questions, one shared SFT start, >= 8 queries per GRPO step."""
    abl = AblationConfig.from_dict(load_yaml(ROOT / "configs" / "ablation" / "smollm2-135m.yaml"))
    assert len(abl.seeds) >= 3 and abl.eval.n >= 300 and abl.eval.split == "test" and abl.sft.run_dir
    sft_cfg = SFTRunConfig.from_dict(resolved_sft(abl, 0, None))
    for variant in VARIANTS[1:]:
        _, train = resolved_grpo(abl, variant, 0, dataclasses.asdict(sft_cfg))
        assert train.queries_per_step >= 8 and train.uncertainty.normalize
