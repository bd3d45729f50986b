"""A stand-in for the part of pydantic v2 that ``forecast_action.schema`` uses, for machines without it.

Why: GPU images (the lent H200's, docs/scale.md "The prepared GPU check") ship torch, transformers and
peft but not pydantic, and have no network to install it. With pydantic installed (``./run``, CI) it is
used and this module is not imported. Covered: ``BaseModel`` subclasses with ``model_config =
ConfigDict(extra="forbid", frozen=True)`` and fields ``float | None``, ``int | None``, ``str | None``
and ``Literal[...] | None`` with ``Field(default, ge, le, pattern, allow_inf_nan)``, validated in
pydantic's lax mode (numeric strings and bools coerce, an int field takes only integral floats, a
Literal takes only its exact values); ``ValidationError.errors()`` with ``loc``; ``model_fields``,
``model_dump``, ``model_dump_json``. tests/test_action_schema_standin.py checks it against pydantic.
"""

from __future__ import annotations

import json
import math
import numbers
import re
import typing
from typing import Any, Literal


class ValidationError(ValueError):
    def __init__(self, errors: list[dict[str, Any]]):
        super().__init__("; ".join(f"{e['loc'][0]}: {e['msg']}" for e in errors))
        self._errors = errors

    def errors(self) -> list[dict[str, Any]]:
        return list(self._errors)


def ConfigDict(**kw: Any) -> dict[str, Any]:  # noqa: N802 (pydantic's name)
    return dict(kw)


class FieldInfo:
    def __init__(self, default: Any = None, ge: float | None = None, le: float | None = None,
                 pattern: str | None = None, allow_inf_nan: bool = True):
        self.default, self.ge, self.le, self.allow_inf_nan = default, ge, le, allow_inf_nan
        self.pattern = re.compile(pattern) if pattern else None
        self.annotation: Any = None


def Field(default: Any = None, **kw: Any) -> FieldInfo:  # noqa: N802 (pydantic's name)
    return FieldInfo(default, **kw)


def _number(v: Any, integer: bool) -> float | int:
    if isinstance(v, str):
        v = v.strip()
        v = int(v) if integer else float(v)  # ValueError -> invalid
    elif not isinstance(v, numbers.Real):
        raise ValueError(f"expected a number, got {type(v).__name__}")
    if integer:
        if isinstance(v, numbers.Integral):
            return int(v)
        f = float(v)
        if not math.isfinite(f) or f != int(f):
            raise ValueError("expected an integer")
        return int(f)
    return float(v)


def _check(info: FieldInfo, v: Any) -> Any:
    if v is None:
        return None
    args = [a for a in typing.get_args(info.annotation) if a is not type(None)] or [info.annotation]
    kind = args[0]
    if typing.get_origin(kind) is Literal:
        if not any(v == x and type(v) is type(x) for x in typing.get_args(kind)):
            raise ValueError(f"expected one of {typing.get_args(kind)}")
        return v
    if kind is str:
        if not isinstance(v, str) or (info.pattern is not None and not info.pattern.search(v)):
            raise ValueError("expected a string matching the pattern")
        return v
    out = _number(v, kind is int)
    if not info.allow_inf_nan and not math.isfinite(out):
        raise ValueError("expected a finite number")
    if (info.ge is not None and out < info.ge) or (info.le is not None and out > info.le):
        raise ValueError(f"expected a value in [{info.ge}, {info.le}]")
    return out


class BaseModel:
    model_config: dict[str, Any] = {}
    model_fields: dict[str, FieldInfo] = {}

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        fields = {}
        for name, ann in typing.get_type_hints(cls).items():
            if name.startswith("_") or name in ("model_config", "model_fields"):
                continue
            raw = cls.__dict__.get(name)
            info = raw if isinstance(raw, FieldInfo) else FieldInfo(raw)
            info.annotation = ann
            fields[name] = info
        cls.model_fields = fields

    def __init__(self, **data: Any):
        fields, errors, values = self.model_fields, [], {}
        for k in data:
            if k not in fields:
                errors.append({"loc": (k,), "msg": "extra inputs are not permitted", "type": "extra_forbidden"})
        for name, info in fields.items():
            try:
                values[name] = _check(info, data.get(name, info.default))
            except (ValueError, OverflowError) as e:
                errors.append({"loc": (name,), "msg": str(e), "type": "value_error", "input": data.get(name)})
        if errors:
            raise ValidationError(errors)
        object.__setattr__(self, "__dict__", values)

    def __setattr__(self, name: str, value: Any) -> None:
        raise TypeError(f"{type(self).__name__} is frozen")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.__dict__ == self.__dict__

    def __hash__(self) -> int:
        return hash((type(self), tuple(self.__dict__.items())))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.__dict__.items())})"

    def model_dump(self, exclude_none: bool = False) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if not (exclude_none and v is None)}

    def model_dump_json(self, exclude_none: bool = False) -> str:
        return json.dumps(self.model_dump(exclude_none), separators=(",", ":"))
