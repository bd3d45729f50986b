"""The one saved form of a model artefact: a directory with ``config.json`` and ``model.safetensors``.

The convention of transformers, peft and the Chronos / TimesFM pipelines: weights as safetensors (no
pickled code, loadable without this project's training state), the configuration as JSON beside them.
``config.json`` holds ``{"format", "version", "weights", "sha256", ...}`` plus whatever the artefact
needs to rebuild itself (its configs, fitted statistics that are not tensors). The SHA-256 of the
weights is checked on load, so a truncated or edited file is named instead of half-loaded.

Used by the TS encoder (``forecast_action.forecaster.Forecaster``), the action-conditioned decoder
(``ActionConditionedDecoder.save_pretrained``) and the policy's projector. Lightning / Fabric
checkpoints stay what they are: resume state, not artefacts.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from torch import Tensor, nn

from stockr1.outdir import atomic_write

CONFIG_FILE, WEIGHTS_FILE = "config.json", "model.safetensors"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def save_artifact(directory: str | Path, fmt: str, version: int, meta: Mapping[str, Any],
                  state: Mapping[str, Tensor]) -> Path:
    """Write ``state`` to ``model.safetensors`` and ``meta`` (+ format, version, weights, sha256) to
    ``config.json``, each atomically, weights first: a reader never sees a config whose weights are
    missing. Returns the directory."""
    from safetensors.torch import save_file

    d = Path(directory)
    if d.exists() and not d.is_dir():
        raise ValueError(f"cannot save a {fmt} artefact to {d}: it is a file, not a directory")
    d.mkdir(parents=True, exist_ok=True)
    flat = {k: v.detach().cpu().contiguous() for k, v in state.items()}
    atomic_write(d / WEIGHTS_FILE, lambda p: save_file(flat, str(p), metadata={"format": fmt}))
    full = {"format": fmt, "version": version, **meta, "weights": WEIGHTS_FILE, "sha256": sha256_file(d / WEIGHTS_FILE)}
    atomic_write(d / CONFIG_FILE, lambda p: p.write_text(json.dumps(full, indent=1) + "\n"))
    return d


def read_config(directory: str | Path, fmt: str, max_version: int, what: str | None = None) -> dict[str, Any]:
    """``config.json`` of a ``fmt`` artefact; FileNotFoundError / ValueError naming the file when the
    directory is not one (``what`` names the artefact), the JSON is unreadable, or the format is another
    or newer."""
    d = Path(directory)
    path = d / CONFIG_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{d} is not a saved {what or fmt} (no {CONFIG_FILE}); write one with save_pretrained")
    try:
        meta = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"cannot read {path}: {e}") from e
    version = meta.get("version")
    if meta.get("format") != fmt or not isinstance(version, int) or version > max_version:
        raise ValueError(f"{path}: format {meta.get('format')!r} version {version!r}; this code reads "
                         f"{fmt!r} up to version {max_version}")
    return meta


def load_weights(directory: str | Path, meta: Mapping[str, Any]) -> dict[str, Tensor]:
    """The safetensors weights ``meta`` names, after checking their SHA-256 when ``meta`` has one."""
    from safetensors.torch import load_file

    path = Path(directory) / meta.get("weights", WEIGHTS_FILE)
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist")
    if meta.get("sha256") and sha256_file(path) != meta["sha256"]:
        raise ValueError(f"{path} is corrupt: its SHA-256 differs from the one in {Path(directory) / CONFIG_FILE}")
    try:
        return load_file(str(path))
    except Exception as e:  # noqa: BLE001 - any deserialisation failure = unusable file; name it
        raise ValueError(f"cannot read {path}: {type(e).__name__}: {e}") from e


def load_strict(module: nn.Module, state: Mapping[str, Tensor], source: str) -> None:
    """``load_state_dict`` that names every missing / unexpected key and every shape mismatch, so an
    artefact loaded into a config of another shape says which tensor disagrees."""
    expected = module.state_dict()
    problems = [f"missing {k}" for k in expected if k not in state]
    problems += [f"unexpected {k}" for k in state if k not in expected]
    problems += [f"{k}: {tuple(state[k].shape)} in the weights vs {tuple(v.shape)} for the config"
                 for k, v in expected.items() if k in state and tuple(state[k].shape) != tuple(v.shape)]
    if problems:
        more = f" (+{len(problems) - 5} more)" if len(problems) > 5 else ""
        raise ValueError(f"{source}: weights do not fit the config: {'; '.join(problems[:5])}{more}")
    module.load_state_dict(dict(state))
