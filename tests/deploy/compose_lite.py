"""Load, interpolate and merge compose files the way `docker compose -f a -f b config` does.

Only what compose/ uses: `${VAR}`, `${VAR:-default}`, `${VAR-default}`, `${VAR:?error}`,
`${VAR?error}` and `$$`; YAML anchors and merge keys; the `!reset` and `!override` tags; and the
Compose merge rules for mappings, `environment`, `command` / `entrypoint` / `healthcheck.test`
(replaced), `volumes` (by target) and other sequences (appended, without duplicates).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPLACED_SEQUENCES = {"command", "entrypoint", "test"}
VARIABLE = re.compile(
    r"\$(?:(?P<escaped>\$)"
    r"|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}"
    r"|(?P<plain>[A-Za-z_][A-Za-z0-9_]*))"
)


class InterpolationError(ValueError):
    """A required variable (`${VAR:?...}`) is missing, or a `$` cannot be parsed."""


@dataclass
class Reset:
    """`!reset`: drop the attribute from the merged result."""


@dataclass
class Override:
    """`!override value`: replace the attribute instead of merging into it."""

    value: Any


class _Loader(yaml.SafeLoader):
    pass


def _reset(loader: yaml.SafeLoader, node: yaml.Node) -> Reset:
    return Reset()


def _override(loader: yaml.SafeLoader, node: yaml.Node) -> Override:
    if isinstance(node, yaml.MappingNode):
        return Override(loader.construct_mapping(node, deep=True))
    if isinstance(node, yaml.SequenceNode):
        return Override(loader.construct_sequence(node, deep=True))
    return Override(loader.construct_scalar(node))  # type: ignore[arg-type]


_Loader.add_constructor("!reset", _reset)
_Loader.add_constructor("!override", _override)


def load(path: Path) -> dict[str, Any]:
    """One compose file, tags kept as Reset / Override markers, nothing interpolated."""
    return yaml.load(path.read_text(), Loader=_Loader)  # noqa: S506 - a SafeLoader subclass


def interpolate(value: Any, env: Mapping[str, str]) -> Any:
    """Substitute variables in every string of `value`, like Compose does before merging."""
    if isinstance(value, str):
        return VARIABLE.sub(lambda m: _substitute(m, env), _check_dollars(value))
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if isinstance(value, Override):
        return Override(interpolate(value.value, env))
    return value


def _check_dollars(text: str) -> str:
    leftover = VARIABLE.sub("", text)
    if "$" in leftover:
        raise InterpolationError(f"cannot parse the $ in {text!r}")
    return text


def _substitute(match: re.Match[str], env: Mapping[str, str]) -> str:
    if match.group("escaped"):
        return "$"
    name = match.group("braced") or match.group("plain")
    op, arg = match.group("op"), match.group("arg")
    value = env.get(name)
    missing = value is None or (op is not None and op.startswith(":") and value == "")
    if op in (":-", "-"):
        return arg if missing else value  # type: ignore[return-value]
    if op in (":?", "?"):
        if missing:
            raise InterpolationError(f"{name}: {arg}")
        return value  # type: ignore[return-value]
    if op in (":+", "+"):
        return "" if missing else arg
    return value or ""


def merge(base: Any, override: Any, key: str = "") -> Any:
    """Merge `override` into `base` with Compose's rules; returns a new value."""
    if isinstance(override, Override):
        return _strip(override.value)
    if isinstance(base, dict) and isinstance(override, dict):
        merged = copy.deepcopy(base)
        for name, value in override.items():
            if isinstance(value, Reset):
                merged.pop(name, None)
            elif name in merged:
                merged[name] = merge(merged[name], value, name)
            else:
                merged[name] = _strip(value)
        return merged
    if key == "environment":
        return merge(_env_mapping(base), _env_mapping(override))
    if isinstance(base, list) and isinstance(override, list):
        if key in REPLACED_SEQUENCES:
            return _strip(override)
        if key == "volumes":
            return _merge_volumes(base, override)
        return copy.deepcopy(base) + [_strip(v) for v in override if v not in base]
    return _strip(override)


def _strip(value: Any) -> Any:
    """Resolve markers inside a value that has nothing underneath to merge with."""
    if isinstance(value, Override):
        return _strip(value.value)
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if not isinstance(v, Reset)}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _env_mapping(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    return dict(item.split("=", 1) if "=" in item else (item, None) for item in value)


def _volume_target(volume: Any) -> str:
    if isinstance(volume, dict):
        return str(volume["target"])
    parts = str(volume).split(":")
    return parts[1] if len(parts) > 1 else parts[0]


def _merge_volumes(base: list[Any], override: list[Any]) -> list[Any]:
    merged = {_volume_target(v): copy.deepcopy(v) for v in base}
    for volume in override:
        merged[_volume_target(volume)] = _strip(volume)
    return list(merged.values())


def config(paths: list[Path], env: Mapping[str, str]) -> dict[str, Any]:
    """The merged, interpolated model of `docker compose -f paths[0] -f paths[1] ...`."""
    model: dict[str, Any] = {}
    for path in paths:
        model = merge(model, interpolate(load(path), env))
    return _strip(model)


ENV_FILE_LINE = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_.-]*)=(.*)$")


def read_env_file(path: Path) -> dict[str, str]:
    """An `env_file:`: KEY=VALUE lines, # comments and blank lines skipped, one pair of quotes
    around a value removed (what Compose does for the plain files compose/ documents)."""
    values = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = ENV_FILE_LINE.match(stripped)
        if not match:
            raise ValueError(f"{path}:{number}: not KEY=VALUE")
        value = match.group(2)
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        values[match.group(1)] = value
    return values


def service_environment(model: dict[str, Any], service: str, directory: Path) -> dict[str, str]:
    """What the service's container sees: its `env_file:`s in order (paths relative to
    `directory`, the compose file's folder), then `environment:`, which wins."""
    spec = model["services"][service]
    files = spec.get("env_file", [])
    values: dict[str, str] = {}
    for entry in [files] if isinstance(files, (str, dict)) else files:
        path, required = (entry["path"], entry.get("required", True)) if isinstance(entry, dict) else (entry, True)
        full = directory / path
        if not full.exists():
            if required:
                raise FileNotFoundError(f"env file {full} not found")
            continue
        values.update(read_env_file(full))
    for name, value in _env_mapping(spec.get("environment", {})).items():
        if value is not None:
            values[name] = str(value)
    return values
