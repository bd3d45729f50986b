"""One way to launch a training stage on one device, several devices, or several nodes.

SFT and GRPO both call ``launch_fabric(train_cfg)`` before any work (their train configs carry
``accelerator``, ``devices``, ``num_nodes``, ``strategy`` and ``precision``, checked by ``check_distributed``). Lightning Fabric picks
the launcher from the environment: a plain ``stockr1 sft`` with ``devices: 2`` re-runs the same command
once per extra device (its subprocess launcher); under ``torchrun`` or SLURM's ``srun`` every process is
already started and Fabric reads its rank from the environment (docs/scale.md gives the commands).

Data sharding is the caller's: every rank draws the same global batch from the same generator and
keeps ``shard(idx, rank, world)``, so a run's global batch does not depend on the number of devices.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, ExitStack, nullcontext
from typing import Any

# Fabric strategy names a run config may give (the registry's aliases are accepted too)
SIMPLE_STRATEGIES = ("auto", "ddp", "ddp_spawn", "fsdp", "deepspeed", "single_device")


def check_distributed(devices: int | str, num_nodes: int, strategy: str, where: str = "train") -> None:
    """Refuse at load time what Fabric would refuse only after the model is built."""
    if isinstance(devices, bool) or not (isinstance(devices, int) and (devices >= 1 or devices == -1)
                                         or devices == "auto" or (isinstance(devices, str) and devices.isdigit())):
        raise ValueError(f"{where}.devices must be a positive integer, -1 or 'auto', got {devices!r}")
    if not isinstance(num_nodes, int) or isinstance(num_nodes, bool) or num_nodes < 1:
        raise ValueError(f"{where}.num_nodes must be an integer >= 1, got {num_nodes!r}")
    if strategy not in SIMPLE_STRATEGIES and strategy not in _registered_strategies():
        raise ValueError(f"{where}.strategy {strategy!r} is not a Fabric strategy; use one of {SIMPLE_STRATEGIES} "
                         f"(or a registered name such as 'ddp_find_unused_parameters_true')")


def _registered_strategies() -> list[str]:
    from lightning.fabric.strategies import STRATEGY_REGISTRY

    return list(STRATEGY_REGISTRY.available_strategies())


def launch_fabric(cfg: Any):
    """A launched ``lightning.fabric.Fabric`` for a train config with accelerator, devices, num_nodes,
    strategy and precision fields."""
    from lightning.fabric import Fabric

    fabric = Fabric(accelerator=cfg.accelerator, devices=cfg.devices, num_nodes=cfg.num_nodes,
                    strategy=cfg.strategy, precision=cfg.precision)
    fabric.launch()
    return fabric


def shard(idx: Sequence[int], rank: int, world: int) -> list[int]:
    """This rank's part of a global batch ``idx``: every ``world``-th item from ``rank`` (disjoint, and
    together the whole batch). The global batch must split evenly, so every rank's loss is a mean over
    the same number of items and DDP's gradient average is the global batch's mean."""
    if world < 1 or not 0 <= rank < world:
        raise ValueError(f"rank {rank} of world size {world}")
    if len(idx) % world:
        raise ValueError(f"a global batch of {len(idx)} does not split evenly over {world} ranks; make the "
                         f"batch size a multiple of devices x num_nodes")
    return list(idx[rank::world])


def precision_autocast(precision: str, device: Any) -> AbstractContextManager:
    """The autocast Fabric's ``precision`` runs a module's forward under, for code that calls the bare
    module (rollout sampling, reward probes): ``torch.autocast`` in bf16 / fp16 for the ``*-mixed`` settings,
    nothing otherwise (fp32, or weights already in a low dtype: ``bf16-true``). ``device``: the module's."""
    import torch

    dtype = {"bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}.get(str(precision))
    if dtype is None:
        return nullcontext()
    return torch.autocast(torch.device(device).type, dtype=dtype)


def full_precision() -> ExitStack:
    """No autocast inside, whatever the caller runs under: the forecast tool's trajectory (the text it
    renders) and the encoder's soft tokens must not depend on the precision the policy samples in, or a
    ``bf16-mixed`` GRPO run would read other numbers than SFT wrote."""
    import torch

    stack = ExitStack()
    stack.enter_context(torch.autocast("cpu", enabled=False))
    if torch.cuda.is_available():
        stack.enter_context(torch.autocast("cuda", enabled=False))
    return stack
