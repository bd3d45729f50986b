"""The policy's weights as a serving engine loads them: LoRA merged, HF checkpoint names.

A LoRA-only push would leave a serving engine with stale weights wherever the policy trains more than
the adapters: under `llm.policy.Policy` the protocol tokens' embedding rows are trained too (peft's
trainable tokens), and every rollout writes them. So the engine gets full merged tensors:

- a LoRA linear (peft ``LoraLayer``): ``W + Σ_adapters ΔW`` (``get_delta_weight``, peft's own merge);
- a trainable-token embedding (peft ``TrainableTokensLayer``): its ``get_merged_weights`` (the
  trained rows written into the base matrix);
- everything else: the parameter itself (no copy).

Names are those of the unwrapped HF model (``model.layers.0.self_attn.q_proj.weight``, ...), which is
what a HF checkpoint holds and what vLLM's ``model.load_weights`` expects; a tied ``lm_head.weight``
appears once, as ``model.embed_tokens.weight`` (HF's ``named_parameters`` order). Equal to
``copy.deepcopy(model).merge_and_unload().state_dict()`` on those names (``tests/test_rollout_backends.py``)
without the copy of the whole model: one merged tensor at a time.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import Tensor, nn

_PEFT_PREFIX = "base_model.model."


def merged_named_weights(model: nn.Module) -> Iterator[tuple[str, Tensor]]:
    """(name, tensor) pairs of ``model`` (a HF causal LM, or a peft ``PeftModel`` around one) with every
    adapter merged; tensors are detached, on the model's device, in its dtype."""
    inner = unwrapped(model)
    wrappers = {name: mod for name, mod in inner.named_modules() if _merge_fn(mod) is not None}
    seen: set[int] = set()
    emitted: set[str] = set()
    with torch.no_grad():
        for name, param in inner.named_parameters():
            owner = _owner(name, wrappers)
            if owner is None:
                if id(param) not in seen:
                    seen.add(id(param))
                    yield name, param.detach()
                continue
            out_name = _unwrapped(owner) + "." + name.rsplit(".", 1)[-1]
            if out_name in emitted or not _is_base_param(name, owner):
                continue
            emitted.add(out_name)
            base = wrappers[owner].base_layer
            if id(base.weight) in seen:  # tied to an embedding emitted earlier
                continue
            seen.add(id(base.weight))
            if name.endswith(".weight"):
                yield out_name, _merge_fn(wrappers[owner])()
            else:  # a bias: adapters leave it as is
                yield out_name, param.detach()


def unwrapped(model: nn.Module) -> nn.Module:
    """The HF model inside a peft ``PeftModel`` (``model`` itself when it is not one)."""
    return model.base_model.model if _is_peft(model) else model


def _is_peft(model: nn.Module) -> bool:
    try:
        from peft import PeftModel
    except ImportError:
        return False
    return isinstance(model, PeftModel)


def _merge_fn(mod: nn.Module):
    """A function returning ``mod``'s merged weight, or None when ``mod`` is not an adapter wrapper."""
    try:
        from peft.tuners.lora import LoraLayer
        from peft.tuners.trainable_tokens.layer import TrainableTokensLayer
    except ImportError:
        return None
    if isinstance(mod, TrainableTokensLayer):
        return lambda: mod.get_merged_weights(mod.active_adapters).detach()
    if isinstance(mod, LoraLayer) and hasattr(mod, "get_delta_weight"):
        def merged() -> Tensor:
            w = mod.base_layer.weight.detach()
            if getattr(mod, "merged", False) or getattr(mod, "disable_adapters", False):
                return w
            for a in mod.active_adapters:
                if a in mod.lora_A:
                    w = w + mod.get_delta_weight(a).to(w.dtype)
            return w
        return merged
    return None


def _owner(name: str, wrappers: dict[str, nn.Module]) -> str | None:
    """The adapter wrapper whose subtree holds parameter ``name`` (the deepest one), or None."""
    parts = name.split(".")
    for k in range(len(parts) - 1, 0, -1):
        prefix = ".".join(parts[:k])
        if prefix in wrappers:
            return prefix
    return None


def _unwrapped(owner: str) -> str:
    """A wrapper's path in the unloaded model: peft's ``<module>.token_adapter`` sits where ``<module>`` was."""
    return owner[: -len(".token_adapter")] if owner.endswith(".token_adapter") else owner


def _is_base_param(name: str, owner: str) -> bool:
    """True for the wrapper's ``base_layer.weight`` / ``base_layer.bias`` (not adapter tensors)."""
    rest = name[len(owner) + 1 :]
    return rest in ("base_layer.weight", "base_layer.bias")
