"""Shipped configs: small/base/large land within 15% of Stock-R1 Table 4's parameter counts; every
config parses through the Lightning CLI parser into the module and datamodule."""

from pathlib import Path

import pytest
import yaml

from ts_encoder.config import TSEncoderConfig
from ts_encoder.model import count_parameters

CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "ts_encoder"
TABLE4 = {"small": (512, 8, 8, 27e6), "base": (768, 12, 12, 65e6), "large": (1024, 16, 16, 119e6)}


def _encoder(name: str) -> TSEncoderConfig:
    return TSEncoderConfig(**yaml.safe_load((CONFIGS / f"{name}.yaml").read_text())["model"]["encoder"])


@pytest.mark.parametrize("name", sorted(TABLE4))
def test_table4_sizes_and_parameter_counts(name: str) -> None:
    d, layers, heads, target = TABLE4[name]
    cfg = _encoder(name)
    assert (cfg.d_model, cfg.n_layers, cfg.n_heads) == (d, layers, heads)
    assert (cfg.lookback, cfg.horizon, cfg.patch_len, cfg.dropout) == (90, 10, 5, 0.1)  # App. C.2
    n = count_parameters(cfg)
    print(f"{name}: {n / 1e6:.2f}M parameters (Table 4: {target / 1e6:.0f}M, {100 * (n / target - 1):+.1f}%)")
    assert abs(n / target - 1) <= 0.15


def test_count_parameters_matches_a_real_build() -> None:
    from ts_encoder.model import TSEncoder

    cfg = _encoder("tiny")
    assert count_parameters(cfg) == sum(p.numel() for p in TSEncoder(cfg).parameters())


@pytest.mark.parametrize("name", ["tiny", "small"])  # base/large: same schema, slow to build
def test_config_parses_with_lightning_cli(name: str) -> None:
    from lightning.pytorch.cli import LightningCLI

    from ts_encoder.datamodule import WindowDataModule
    from ts_encoder.module import TSForecastModule

    cli = LightningCLI(TSForecastModule, WindowDataModule, run=False,
                       args=["--config", str(CONFIGS / f"{name}.yaml"), "--trainer.logger", "false"])
    assert cli.model.cfg == _encoder(name)
    assert cli.datamodule.hparams.lookback == cli.model.cfg.lookback
