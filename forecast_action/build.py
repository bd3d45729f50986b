"""The action-conditioned decoder as an artefact: build it from a config's ``decoder:`` section,
save it and load it back (every stage and benchmark goes through these three)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from forecast_action.decoder import ActionConditionedDecoder
from forecast_action.encoder import ActionEncoderConfig
from ts_encoder.config import TSEncoderConfig


def build_decoder(dcfg: dict[str, Any]) -> nn.Module:
    if dcfg.get("checkpoint"):
        if dcfg.get("config") and not Path(dcfg["checkpoint"]).exists():  # name the command that writes it
            raise FileNotFoundError(
                f"decoder checkpoint {dcfg['checkpoint']} does not exist; train it with `stockr1 decoder "
                f"--config {dcfg['config']} --out {Path(dcfg['checkpoint']).parent}`")
        decoder = load_decoder(dcfg["checkpoint"])
        if "tool_samples" in dcfg:  # the SFT config sets what the tool of every later stage draws
            decoder.tool_samples = int(dcfg["tool_samples"])
        if dcfg.get("observation"):  # ... and the layout it renders
            decoder.observation = str(dcfg["observation"])
        return decoder
    torch.manual_seed(int(dcfg.get("seed", 0)))
    kw = {k: dcfg[k] for k in ("tool_samples", "observation") if dcfg.get(k) is not None}
    return ActionConditionedDecoder(TSEncoderConfig(**dcfg.get("ts", {})), ActionEncoderConfig(**dcfg.get("action", {})),
                                    **kw)


def save_decoder(decoder: nn.Module, path: str | Path) -> None:
    """``ActionConditionedDecoder.save_pretrained``: the decoder's directory (config.json + model.safetensors)."""
    decoder.save_pretrained(path)


def load_decoder(path: str | Path) -> nn.Module:
    """A saved decoder directory (``save_decoder``; ``stockr1 decoder`` writes ``OUT/decoder/``), an
    older single ``.pt`` file, or, read for older runs, a Lightning checkpoint of ``forecast_action.train``
    (resume state; ``stockr1 decoder --export CKPT --out DIR`` converts it), in eval mode; ValueError
    naming the file when it cannot be used."""
    if Path(path).suffix == ".ckpt":
        from forecast_action.module import ActionDecoderModule  # lazy: Lightning only for the old .ckpt form

        try:
            module = ActionDecoderModule.load_from_checkpoint(path, map_location="cpu")
        except Exception as e:  # truncated / foreign / mismatched checkpoint: name the file, keep the cause
            raise ValueError(f"cannot load a decoder from Lightning checkpoint {path}: {e}") from e
        module.decoder.thresholds = module.thresholds
        return module.decoder.eval()
    return ActionConditionedDecoder.load(path)
