"""One home for "YAML mapping -> frozen dataclass config".

`config_from_dict(cls, d, where)` is what every ``XConfig.from_dict`` calls. It

- rejects unknown keys, naming the section (``where``), listing the valid keys and suggesting the
  nearest one (``trian`` -> ``train``);
- builds nested dataclass fields from mappings (fields typed as a dataclass, plus ``nested``);
- turns lists into tuples for tuple-typed fields;
- coerces numeric strings for int / float fields. PyYAML follows YAML 1.1, where a float needs a
  dot: ``lr: 2e-3`` loads as the *string* "2e-3", which otherwise only fails deep inside the LR
  scheduler ("can't multiply sequence by non-int of type 'float'"). A string that is not a number
  is an error naming the field and the section.

Nothing else is converted: bools, mappings and ``int | str`` fields (e.g. ``devices: auto``) pass
through; each config keeps its own ``__post_init__`` / ``from_dict`` checks on top.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import difflib
import math
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, Union, get_args, get_origin

T = TypeVar("T")


def config_from_dict(cls: type[T], d: Mapping[str, Any] | None, where: str,
                     nested: Mapping[str, type] | None = None) -> T:
    """Build the dataclass ``cls`` from the mapping ``d`` (None = all defaults).

    where:  the section named in errors ("GRPOTrainConfig", "compare config"); a nested field's
            section is ``f"{where}.{key}"``.
    nested: key -> dataclass for fields whose annotation is not itself that dataclass (e.g. an
            ``Any``-typed field that should be built from its mapping).
    """
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise TypeError(f"config_from_dict needs a dataclass type, got {cls!r}")
    if d is None:
        d = {}
    if not isinstance(d, Mapping):
        raise ValueError(f"{where} must be a mapping of keys to values, got {type(d).__name__}: {d!r}")
    fields = [f for f in dataclasses.fields(cls) if f.init]
    names = {f.name for f in fields}
    check_keys(d, names, where)
    hints = typing.get_type_hints(cls)
    nested = dict(nested or {})
    kw = {}
    for key, value in d.items():
        sub = nested.get(key)
        if sub is not None and isinstance(value, Mapping):
            kw[key] = config_from_dict(sub, value, f"{where}.{key}")
        else:
            kw[key] = _convert(value, hints.get(key, Any), where, key)
    return cls(**kw)


def check_keys(keys: Iterable[Any], valid: Iterable[str], where: str) -> None:
    """An error listing the ``keys`` not in ``valid`` with the nearest valid one of each ("did you mean")."""
    names = sorted(valid)
    bad = sorted(set(keys) - set(names), key=str)
    if bad:
        hints = [f"{where}.{k}: did you mean {close[0]!r}?" for k in bad
                 if (close := difflib.get_close_matches(str(k), names, n=1, cutoff=0.6))]
        raise ValueError(f"unknown {where} keys {bad}; valid keys: {names}"
                         + ("" if not hints else " (" + "; ".join(hints) + ")"))


def _convert(value: Any, hint: Any, where: str, key: str) -> Any:
    """``value`` for a field annotated ``hint`` (see the module docstring for what converts)."""
    if value is None or hint is Any:
        return value
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        members = [a for a in get_args(hint) if a is not type(None)]
        if isinstance(value, str) and str in members:
            return value  # e.g. devices: int | str
        if len(members) == 1:
            return _convert(value, members[0], where, key)
        if isinstance(value, str) and members and set(members) <= {int, float}:
            return _number(value, float if float in members else int, where, key)
        if isinstance(value, list) and any(m is tuple or get_origin(m) is tuple for m in members):
            return tuple(value)
        return value
    if hint in (int, float):
        return _number(value, hint, where, key) if isinstance(value, str) else value
    if hint is tuple or origin is tuple:
        if not isinstance(value, (list, tuple)):
            return value
        args = get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(v, args[0], where, f"{key}[{i}]") for i, v in enumerate(value))
        if args and len(args) == len(value):
            return tuple(_convert(v, a, where, f"{key}[{i}]") for i, (v, a) in enumerate(zip(value, args, strict=True)))
        return tuple(value)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint) and isinstance(value, Mapping):
        return config_from_dict(hint, value, f"{where}.{key}")
    return value


def _number(text: str, kind: type, where: str, key: str) -> int | float:
    """A YAML 1.1 numeric string ("2e-3", "1e4", " 64 ") -> kind; anything else is an error."""
    if kind is int:
        try:
            return int(text)  # exact for big integers
        except ValueError:
            pass
    try:
        x = float(text)
    except ValueError:
        raise ValueError(f"{where}: {key!r} must be {'an integer' if kind is int else 'a number'}, "
                         f"got the string {text!r}") from None
    if kind is float:
        return x
    if not (math.isfinite(x) and x.is_integer()):
        raise ValueError(f"{where}: {key!r} must be an integer, got the string {text!r}")
    return int(x)


# --- YAML run configs: read, merge, override from the command line, print --------------------------


def load_yaml(path: str | Path) -> dict[str, Any]:
    """A run config file as a mapping ({} for an empty file); an unreadable file or bad YAML names the file."""
    import yaml

    try:
        return yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as e:
        raise ValueError(f"cannot read config {path}: {e}") from e


def deep_update(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``over`` merged in, recursively for nested mappings (``base`` is not modified)."""
    out = copy.deepcopy(dict(base))
    for k, v in over.items():
        out[k] = deep_update(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) else v
    return out


def dotted_overrides(args: Sequence[str]) -> dict[str, Any]:
    """Command-line overrides ``--train.lr 1e-3`` / ``--train.devices=2`` -> ``{"train": {"lr": 0.001,
    "devices": 2}}``. Values are read as YAML (``null``, ``[1, 2]``, ``{a: 1}``, ``true``); the typed
    config checks keys and values afterwards, so a misspelled path is refused with a suggestion."""
    import yaml

    out: dict[str, Any] = {}
    i = 0
    while i < len(args):
        tok = args[i]
        if not tok.startswith("--") or len(tok) <= 2:
            raise ValueError(f"unexpected argument {tok!r}: overrides look like --section.key VALUE or --key=VALUE")
        key, eq, value = tok[2:].partition("=")
        if not eq:
            if i + 1 >= len(args) or args[i + 1].startswith("--"):
                raise ValueError(f"override --{key} needs a value (--{key} VALUE or --{key}=VALUE)")
            value, i = args[i + 1], i + 1
        parts = key.replace("-", "_").split(".")
        if not all(parts):
            raise ValueError(f"bad override path --{key}")
        node = out
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ValueError(f"override --{key} conflicts with an earlier override of {p}")
        parsed = yaml.safe_load(value)
        if isinstance(parsed, str):  # YAML 1.1 reads "1e-3" as a string; on a command line it is a number
            with contextlib.suppress(ValueError):
                parsed = float(parsed) if parsed.strip().lower() not in ("nan", "inf", "-inf", "infinity") else parsed
        node[parts[-1]] = parsed
        i += 1
    return out


def as_plain(cfg: Any) -> Any:
    """A config dataclass (or anything inside one) as plain YAML-safe data: dataclasses -> dicts, tuples ->
    lists. ``--print_config`` prints this: every key with its resolved value, defaults included."""
    if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
        return {f.name: as_plain(getattr(cfg, f.name)) for f in dataclasses.fields(cfg) if f.init}
    if isinstance(cfg, Mapping):
        return {k: as_plain(v) for k, v in cfg.items()}
    if isinstance(cfg, (list, tuple)):
        return [as_plain(v) for v in cfg]
    return cfg


def load_run_config(cls: type[T], path: str | Path, overrides: Mapping[str, Any] | None = None) -> T:
    """``cls.from_dict`` of the YAML file at ``path`` with ``overrides`` deep-merged in; an error names the file."""
    try:
        return cls.from_dict(deep_update(load_yaml(path), overrides or {}))  # type: ignore[attr-defined]
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from e


class YamlConfig:
    """Mixin of a typed run config with a ``from_dict`` classmethod: ``XConfig.from_yaml(path, overrides)``."""

    @classmethod
    def from_yaml(cls: type[T], path: str | Path, overrides: Mapping[str, Any] | None = None) -> T:
        return load_run_config(cls, path, overrides)


def check_merged(cls: type, base: str | Path, overrides: Mapping[str, Any] | None, where: str) -> None:
    """Validate ``overrides`` meant for the config file ``base`` by loading the merged result through its
    typed config ``cls`` now, so a misspelled key inside an override fails at load time, naming ``where``."""
    try:
        load_run_config(cls, base, overrides)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from e


def parse_config_args(ap: Any, argv: Sequence[str] | None) -> tuple[Any, dict[str, Any]]:
    """``ap.parse_known_args(argv)`` with ``--print_config`` added and the leftover arguments read as dotted
    config overrides (``--train.lr 1e-4``): (args, overrides). A malformed override is ``ap.error``."""
    ap.add_argument("--print_config", "--print-config", action="store_true",
                    help="print the resolved config (every key, defaults included) and exit")
    args, rest = ap.parse_known_args(argv)
    try:
        return args, dotted_overrides(rest)
    except ValueError as e:
        ap.error(str(e))
        raise  # ap.error exits; this keeps type checkers content


def print_config(cfg: Any) -> None:
    """What ``--print_config`` prints: the typed config as YAML, every key with its resolved value."""
    import yaml

    print(yaml.safe_dump(as_plain(cfg), sort_keys=False), end="")
