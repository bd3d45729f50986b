"""Every YAML under configs/ (globbed: a new config is covered automatically) loads through the loader
its command really uses, and refuses a misspelled top-level section and a misspelled nested key, naming
the key. Nothing is built: the loaders parse and validate only."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from stockr1.config import load_yaml

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted((ROOT / "configs").rglob("*.yaml"))


def _ts(path: Path) -> None:
    from stockr1.pipeline.demo_config import check_ts_config

    check_ts_config([str(path)], str(path))


def _typed(module: str, cls: str) -> Callable[[Path], object]:
    def load(path: Path) -> object:
        import importlib

        return getattr(importlib.import_module(module), cls).from_yaml(path)

    return load


# config folder (relative to configs/) -> the loader of the command that reads it
LOADERS: dict[str, Callable[[Path], object]] = {
    "ablation": _typed("benchmarks.ablation.command", "AblationConfig"),
    "compare": _typed("benchmarks.compare.config", "CompareConfig"),
    "demo.yaml": _typed("stockr1.pipeline.demo_config", "DemoConfig"),
    "demo_tiny.yaml": _typed("stockr1.pipeline.demo_config", "DemoConfig"),
    "forecast_action": _typed("forecast_action.train", "ActionTrainConfig"),
    "grpo": _typed("rl.run_config", "GRPORunConfig"),
    "grpo_check": _typed("benchmarks.grpo_check.command", "GRPOCheckConfig"),
    "methods/trading_r1": _typed("rl.methods.trading_r1.curriculum", "CurriculumConfig"),
    "policy": _typed("llm.policy", "PolicyConfig"),
    "sft": _typed("llm.sft_config", "SFTRunConfig"),
    "sft_recipe": _typed("benchmarks.sft_recipe", "RecipeConfig"),
    "ts_encoder": _ts,
}
NO_HINT = ("ts_encoder",)  # LightningCLI's parser names the key, with no suggestion


def _family(path: Path) -> str:
    rel = path.relative_to(ROOT / "configs").as_posix()
    fam = max((k for k in LOADERS if rel == k or rel.startswith(k + "/")), key=len, default=None)
    assert fam is not None, f"configs/{rel} has no loader in LOADERS: add the one its command uses"
    return fam


def _typo(key: str, taken) -> str:
    for cand in (key[0] + key[2] + key[1] + key[3:] if len(key) > 3 else key + "x", key + "x", "x" + key):
        if cand != key and cand not in taken:
            return cand
    raise AssertionError(key)


def _write(tmp_path: Path, name: str, d: dict) -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(d, sort_keys=False))
    return p


def _edits(d: dict) -> list[tuple[str, str, dict]]:
    """(id, misspelled key, edited config): a misspelled top-level section and a misspelled key inside the
    first non-empty mapping section."""
    sec = next((k for k, v in d.items() if isinstance(v, dict) and v), None)
    assert sec is not None, "a config without a nested section: nothing nested to misspell"
    top = _typo(sec, d)
    e_top = copy.deepcopy(d)
    e_top[top] = e_top.pop(sec)
    key = next(iter(d[sec]))
    nested = _typo(str(key), d[sec])
    e_nested = copy.deepcopy(d)
    e_nested[sec][nested] = e_nested[sec].pop(key)
    return [("top", top, e_top), (f"{sec}.{key}", nested, e_nested)]


def _check(path: Path, tmp_path: Path, which: str) -> None:
    fam = _family(path)
    load = LOADERS[fam]
    d = load_yaml(path)
    load(_write(tmp_path, path.name, d))  # as written, the config loads
    kind, bad, edited = _edits(d)[0 if which == "top" else 1]
    with pytest.raises(ValueError) as err:
        load(_write(tmp_path, path.name, edited))
    msg = str(err.value)
    assert bad in msg, f"{kind}: the error does not name {bad!r}: {msg}"
    if fam not in NO_HINT:
        assert "did you mean" in msg, msg


def _ids(p: Path) -> str:
    return p.relative_to(ROOT / "configs").as_posix()


@pytest.mark.parametrize("path", CONFIGS, ids=_ids)
def test_misspelled_section_is_refused(path: Path, tmp_path: Path) -> None:
    _check(path, tmp_path, "top")


@pytest.mark.parametrize("path", CONFIGS, ids=_ids)
def test_misspelled_nested_key_is_refused(path: Path, tmp_path: Path) -> None:
    _check(path, tmp_path, "nested")


def test_every_config_folder_has_a_loader() -> None:
    assert CONFIGS and all(_family(p) for p in CONFIGS)
