"""What ``benchmarks.gpu_check.command`` needs of the machine: versions found, and ``Unfit`` when it cannot run."""

from __future__ import annotations

import importlib
import platform
from pathlib import Path
from typing import Any

# imported by the SFT / rollout / GRPO path (pydantic is optional: forecast_action.schema has a stand-in)
REQUIRED = ("torch", "transformers", "lightning", "peft", "tokenizers", "numpy", "pandas", "scipy", "yaml")
MIN_TRANSFORMERS = 5


class Unfit(RuntimeError):
    """The machine cannot run the check; the message says why."""


def read_yaml(path: str | Path) -> dict[str, Any]:
    import yaml

    return yaml.safe_load(Path(path).read_text()) or {}


def _version(name: str) -> str | None:
    try:
        mod = importlib.import_module(name)
    except ImportError:
        return None
    return str(getattr(mod, "__version__", "?"))


def check_environment(device: str) -> dict[str, Any]:
    """Print and return the versions and the device found; raise ``Unfit`` naming what is missing."""
    info: dict[str, Any] = {"python": platform.python_version(), "platform": platform.platform()}
    info.update({name: _version(name) for name in (*REQUIRED, "pydantic", "arch")})
    if info["pydantic"] is None:
        info["pydantic"] = "absent (forecast_action.schema uses its stand-in, forecast_action/_standin.py)"
    missing = [n for n in REQUIRED if info[n] is None]
    problems = [f"missing packages: {', '.join(missing)}"] if missing else []
    tv = info.get("transformers")
    if tv and int(tv.split(".")[0]) < MIN_TRANSFORMERS:
        problems.append(f"transformers {tv} < {MIN_TRANSFORMERS} (the policy code needs transformers >= 5)")
    if info["torch"] is not None:
        import torch

        info["cuda_available"] = torch.cuda.is_available()
        info["torch_cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(0)
            info.update(device_name=props.name, device_memory_gib=props.total_memory / 2**30,
                        device_count=torch.cuda.device_count(), bf16=bool(torch.cuda.is_bf16_supported()),
                        capability=".".join(map(str, torch.cuda.get_device_capability(0))))
        if device == "cuda" and not torch.cuda.is_available():
            problems.append("--device cuda but torch.cuda.is_available() is False")
        elif device == "cuda" and not info.get("bf16"):
            problems.append(f"{info.get('device_name')} has no bf16: the recipes train in bf16-mixed")
    print("gpu_check found: " + ", ".join(f"{k} {v}" for k, v in info.items()), flush=True)
    if problems:
        raise Unfit("; ".join(problems))
    return info
