"""The ``stockr1 demo`` config (configs/demo.yaml): every stage section typed, parsed once, strict.

``DemoConfig.from_yaml(path, overrides)``: a misspelled section or key is an error naming its path and
the nearest valid key. A stage's ``overrides`` are merged into its ``config`` and checked at load time by
the loader the stage's own command uses (``SFTRunConfig``, ``GRPORunConfig``, the decoder's
``ActionTrainConfig.from_yaml``, the TS encoder's LightningCLI parser), so a typo inside an override fails
before any stage runs. ``args`` (a stage's extra CLI flags) are checked by that command when it runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from stockr1.config import YamlConfig, check_merged, config_from_dict, deep_update, load_yaml
from stockr1.pipeline.stages import DEFAULT_RELEASE

REPO = Path(__file__).resolve().parents[2]


def resolve(path: str) -> str:
    """A config path as given if it exists from here, else relative to the repository root."""
    p = Path(path)
    return str(p) if p.is_absolute() or p.exists() else str(REPO / p)


@dataclass(frozen=True)
class ArgsStage:
    """A stage driven by CLI flags: ``args`` ({flag: value}; true = bare flag; a list = several values)."""

    threads: int | None = None  # this stage's torch threads (default: the top-level ``threads``)
    args: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ConfigStage:
    """A stage driven by a YAML config: ``config`` with ``overrides`` deep-merged in."""

    config: str
    threads: int | None = None
    overrides: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ReleaseStage:
    dir: str = DEFAULT_RELEASE  # the shipped SFT run the demo starts from
    ts: str | None = None  # the release whose TS encoder the benches use (default: ``dir``'s)


@dataclass(frozen=True)
class DemoConfig(YamlConfig):
    """configs/demo.yaml (each section documented there)."""

    seed: int = 0
    threads: int = 2
    wandb: bool = False
    data: ArgsStage = field(default_factory=ArgsStage)
    ts: ConfigStage = field(default_factory=lambda: ConfigStage("configs/ts_encoder/tiny.yaml"))
    action: ConfigStage = field(default_factory=lambda: ConfigStage("configs/forecast_action/tiny.yaml"))
    release: ReleaseStage = field(default_factory=ReleaseStage)
    tokenizer: ArgsStage = field(default_factory=ArgsStage)
    sft: ConfigStage = field(default_factory=lambda: ConfigStage("configs/sft/tiny.yaml"))
    grpo: ConfigStage = field(default_factory=lambda: ConfigStage("configs/grpo/tiny.yaml"))
    bench_forecast: ArgsStage = field(default_factory=ArgsStage)
    bench_action: ArgsStage = field(default_factory=ArgsStage)
    bench_qa: ArgsStage = field(default_factory=ArgsStage)
    bench_backtest: ArgsStage = field(default_factory=ArgsStage)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DemoConfig:
        cfg = config_from_dict(cls, d, "demo config")
        if cfg.threads < 1 or any(getattr(s, "threads", None) is not None and s.threads < 1 for s in cfg.sections().values()):
            raise ValueError("demo config: threads (top-level and per stage) must be >= 1")
        cfg = dataclasses.replace(cfg, **{k: dataclasses.replace(s, config=resolve(s.config))
                                          for k, s in cfg.sections().items() if isinstance(s, ConfigStage)})
        cfg.check_overrides()
        return cfg

    def sections(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if isinstance(getattr(self, f.name), (ArgsStage, ConfigStage, ReleaseStage))}

    def check_overrides(self) -> None:
        """Each stage's config + overrides through the loader of the command that will read it."""
        from forecast_action.train import ActionTrainConfig
        from llm.sft_config import SFTRunConfig
        from rl.run_config import GRPORunConfig

        check_merged(SFTRunConfig, self.sft.config, self.sft.overrides, "demo config sft.overrides")
        check_merged(GRPORunConfig, self.grpo.config, self.grpo.overrides, "demo config grpo.overrides")
        with tempfile.TemporaryDirectory() as tmp:
            merged = Path(tmp) / "action.yaml"
            merged.write_text(yaml.safe_dump(deep_update(load_yaml(self.action.config), self.action.overrides)))
            try:
                ActionTrainConfig.from_yaml(merged)
            except ValueError as e:
                raise ValueError(f"demo config action.overrides: {self.action.config}: {e}") from e
            over = Path(tmp) / "ts_overrides.yaml"
            over.write_text(yaml.safe_dump(dict(self.ts.overrides)))
            check_ts_config([self.ts.config, str(over)], "demo config ts.overrides")


def check_ts_config(configs: list[str], where: str) -> None:
    """Parse ``stockr1 ts fit --config A --config B ...`` with the TS encoder's LightningCLI (``--print_config``:
    nothing is built); a key it refuses is an error naming ``where`` and the parser's message."""
    from ts_encoder.cli import main as ts_main

    argv = ["fit", *[a for c in configs for a in ("--config", c)], "--print_config"]
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            ts_main(argv)
            code = 0
        except SystemExit as e:
            code = e.code
    if code not in (0, None):
        msg = err.getvalue()
        raise ValueError(f"{where}: {' '.join(msg[msg.rfind('error:'):].split())[:600]}")
