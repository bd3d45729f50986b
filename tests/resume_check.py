"""``assert_identical``: two saved training states are the same, every tensor bit for bit (the resume tests)."""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from typing import Any

import torch


def assert_identical(a: Any, b: Any, where: str = "", skip: Container[str] = ()) -> int:
    """Walk two nested checkpoint structures (dicts, lists, tuples) and require every tensor to be
    ``torch.equal`` with the same dtype and every other leaf ``==``; keys in ``skip`` (wall times, paths)
    are not compared. Returns the number of tensors compared, so a caller can check it compared some."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape, where
        assert torch.equal(a, b), f"{where}: max |diff| {(a.double() - b.double()).abs().max().item():.3g}"
        return 1
    if isinstance(a, Mapping):
        assert isinstance(b, Mapping), where
        keys = [k for k in a if k not in skip]
        assert sorted(map(str, keys)) == sorted(str(k) for k in b if k not in skip), where
        return sum(assert_identical(a[k], b[k], f"{where}.{k}", skip) for k in keys)
    if isinstance(a, Sequence) and not isinstance(a, str):
        assert isinstance(b, Sequence) and len(a) == len(b), where
        return sum(assert_identical(x, y, f"{where}[{i}]", skip) for i, (x, y) in enumerate(zip(a, b, strict=True)))
    assert a == b or (a != a and b != b), f"{where}: {a!r} != {b!r}"  # NaN == NaN here
    return 0
