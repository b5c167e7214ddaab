"""Read an experiment config: YAML (or JSON) files with their `extends:` overlays, the JSON
schema and its checks, and settings dataclasses: built from sections, and stating their own
part of the schema (`setting`, `dataclass_schema`). The lowest layer of the
package (it imports only cptlab.errors); cptlab.validation loads a config with every check,
those that need the registries and the training settings included. Every error names the file
and key.

An overlay config states only what it changes:

    extends: config.yaml          # a path relative to this file
    experiment: learning
    run: {sequence: [math]}

`merge` applies it over its parent: mappings merge key by key (except those in
REPLACED_MAPPINGS, which are one value each), anything else, lists included, replaces. The
Snakefile resolves `--configfile` with the same function, so both read the same config.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import MISSING, field, fields, is_dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from cptlab.errors import ConfigError

SCHEMA_PATH = files("cptlab") / "schemas" / "config.schema.yaml"
EXTENDS = "extends"
# Mappings that are a single setting: an overlay (or a method's `training`) that gives one
# means exactly these alarms (these evaluation shards), not the parent's plus these.
REPLACED_MAPPINGS = frozenset({"thresholds", "shards"})


def schema_file() -> dict:
    """The schema's sections kept as YAML (cptlab/schemas/config.schema.yaml); the sections that
    are settings dataclasses state themselves (`dataclass_schema`), and cptlab.validation.schema
    joins the two. A copy of the file parsed once per process."""
    return copy.deepcopy(_parsed_schema_file())


@functools.cache
def _parsed_schema_file() -> dict:
    return yaml.safe_load(SCHEMA_PATH.read_text())


def setting(default: Any = MISSING, *, factory: Any = MISSING, **rules: Any) -> Any:
    """A field of a settings dataclass: its default (or `factory`) and the JSON-schema `rules`
    the config accepts beyond its type (`minimum`, `enum`, ...). Its description is its entry
    under `Parameters:` in the class docstring."""
    return field(default=default, default_factory=factory, metadata={"schema": rules})


def dataclass_schema(cls: type) -> dict:
    """The JSON schema of the config section that settings dataclass `cls` reads: one key per
    field, its type from the annotation, its default, its `setting` rules and its description
    from the docstring (a nested dataclass is a section of its own); unknown keys are errors.
    The section's description is the docstring's text before `Parameters:`."""
    description = " ".join((cls.__doc__ or "").split("Parameters:")[0].split())
    hints = typing.get_type_hints(cls)
    docs = parameter_docs(cls)
    properties = {}
    for f in fields(cls):
        if f.name not in docs:
            raise TypeError(f"{cls.__name__}.{f.name}: no entry under Parameters: in its docstring")
        nested = _optional(hints[f.name])
        if is_dataclass(nested):
            properties[f.name] = dataclass_schema(nested)  # described by its own docstring
            if nested is not hints[f.name]:
                properties[f.name]["type"] = ["object", "null"]
                if f.default is None:
                    properties[f.name]["default"] = None
            continue
        spec = _type_schema(hints[f.name])
        rules = f.metadata.get("schema", {})
        spec.update({k: list(v) if isinstance(v, tuple) else v for k, v in rules.items()})
        if f.default is not MISSING:
            spec["default"] = f.default
        elif f.default_factory is not MISSING:
            spec["default"] = f.default_factory()
        spec["description"] = docs[f.name]
        properties[f.name] = spec
    out: dict[str, Any] = {"type": "object", "additionalProperties": False}
    required = required_fields(cls)
    if required:
        out["required"] = required
    if description:
        out["description"] = description
    out["properties"] = properties
    return out


def required_fields(cls: type) -> list[str]:
    """The fields of dataclass `cls` without a default: the section's required keys."""
    return [f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING]


def parameter_docs(cls: type) -> dict[str, str]:
    """Field -> its description: the entries under `Parameters:` in the docstrings of `cls` and
    its bases, each a line `name:` (text may follow) continued by the lines indented deeper."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        doc = klass.__dict__.get("__doc__") or ""
        if "Parameters:" not in doc:
            continue
        name, indent = None, 0
        for line in doc.split("Parameters:", 1)[1].splitlines():
            depth = len(line) - len(line.lstrip())
            entry = re.fullmatch(r"\s*(\w+):(.*)", line)
            if entry and (name is None or depth <= indent):
                name, indent = entry[1], depth
                out[name] = entry[2].strip()
            elif name and line.strip():
                if depth <= indent:  # the text after the parameters
                    break
                out[name] = f"{out[name]} {line.strip()}".strip()
    return out


_JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string"}


def _optional(hint: Any) -> Any:
    """`X` of `X | None`, else `hint`."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (types.UnionType, typing.Union) and len(args) == 1:
        return args[0]
    return hint


def _type_schema(hint: Any) -> dict:
    """The JSON schema of a field's annotation: scalars, `X | None`, `dict[str, X]`, `list[X]`."""
    inner = _optional(hint)
    if inner is not hint:
        spec = _type_schema(inner)
        spec["type"] = [spec["type"], "null"]
        return spec
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint in _JSON_TYPES:
        return {"type": _JSON_TYPES[hint]}
    if dict in (hint, origin):
        values = args[1] if args and args[1] is not Any else None
        return {
            "type": "object",
            **({"additionalProperties": _type_schema(values)} if values else {}),
        }
    if origin is list:
        return {"type": "array", "items": _type_schema(args[0])}
    raise TypeError(f"no JSON schema for the annotation {hint!r}")


def merge(base: Mapping, override: Mapping) -> dict:
    """`override` over `base`: nested mappings merge key by key, other values replace."""
    out = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            if key not in REPLACED_MAPPINGS:
                out[key] = merge(out[key], value)
                continue
        out[key] = copy.deepcopy(value)
    return out


# `data.options.<benchmark>.fallback_path`: read where `path` names nothing on this machine (a
# folder only CI has, such as ../shared/study-data); such rows are not the published ones, so
# their count goes unchecked (`expected_rows: null`).
FALLBACK_PATH = "fallback_path"


def resolve_fallback_paths(config: Mapping) -> tuple[dict, str | None]:
    """`config` with each benchmark's `fallback_path` in place of a `path` that does not exist
    here (and no `fallback_path` left), and the one line that says which benchmarks fell back
    (None: none did)."""
    options = (config.get("data") or {}).get("options") or {}
    if not any(FALLBACK_PATH in (spec or {}) for spec in options.values()):
        return dict(config), None
    out = copy.deepcopy(dict(config))
    fell_back, absent = [], []
    for name, spec in out["data"]["options"].items():
        if not spec or FALLBACK_PATH not in spec:
            continue
        fallback = spec.pop(FALLBACK_PATH)
        paths = spec.get("path")
        missing = [p for p in ([paths] if isinstance(paths, str) else paths or []) if not
                   Path(p).expanduser().exists()]  # fmt: skip
        if paths is None or missing:
            spec["path"] = fallback
            spec.setdefault("expected_rows", None)
            fell_back.append(name)
            absent += [p for p in missing if p not in absent]
    if not fell_back:
        return out, None
    where = (
        f"{absent[0]} does not exist here"
        if len(absent) == 1
        else f"{len(absent)} paths under {os.path.commonpath(absent)}/ do not exist here"
    )
    line = (
        f"{where}: {', '.join(fell_back)} read their data.options.<benchmark>.fallback_path "
        f"instead (the project's fixtures; no count check)"
    )
    return out, line


def read_config_file(path: str | Path, _chain: tuple[Path, ...] = ()) -> dict:
    """One config file with its `extends:` chain resolved (not validated)."""
    path = Path(path)
    if not path.is_file():
        via = f" (extended by {_chain[-1]})" if _chain else ""
        raise ConfigError(f"{path}: no such config file{via}")
    resolved = path.resolve()
    if resolved in _chain:
        loop = " -> ".join(str(p) for p in (*_chain, resolved))
        raise ConfigError(f"{path}: `extends` loops back to itself ({loop})")
    text = path.read_text()
    try:
        # JSON is read as JSON: YAML 1.1 would take a number such as 3e-05 for a string.
        config = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (yaml.YAMLError, json.JSONDecodeError) as err:
        kind = "JSON" if path.suffix == ".json" else "YAML"
        raise ConfigError(f"{path}: not valid {kind} ({' '.join(str(err).split())})") from None
    if not isinstance(config, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    parent = config.pop(EXTENDS, None)
    if parent is None:
        return config
    if not isinstance(parent, str):
        raise ConfigError(f"{path}: `extends` must be a path, got {parent!r}")
    return merge(read_config_file(path.parent / parent, (*_chain, resolved)), config)


def check_schema(value: Any, spec: dict, source: str, prefix: str = "") -> None:
    """ConfigError listing every way `value` breaks schema `spec`, each with its full key
    (`prefix` names where `value` sits in the config)."""
    validator = jsonschema.Draft202012Validator(spec)
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [line for e in errors for line in _error_lines(e, prefix)]
        if len(lines) == 1:
            raise ConfigError(f"{source}: {lines[0].strip()}")
        raise ConfigError(f"{source}: invalid configuration\n" + "\n".join(lines))


def _error_lines(error: jsonschema.ValidationError, prefix: str = "") -> list[str]:
    """One line per problem, naming the full key (an unknown key by its own name)."""
    where = ".".join([p for p in [prefix] if p] + list(map(str, error.absolute_path)))
    known = error.schema.get("properties")
    if error.validator == "additionalProperties" and isinstance(error.instance, dict) and known:
        return [
            f"  {f'{where}.' if where else ''}{key}: unknown key (known: {', '.join(known)})"
            for key in error.instance
            if key not in known
        ]
    return [f"  {where or '<top>'}: {error.message}"]


def settings(cls: type, values: Mapping | None, where: str):
    """`cls(**values)` for a settings dataclass (a config section with its defaults), with a
    missing required key reported as a ConfigError naming it (`where.key`)."""
    values = dict(values or {})
    missing = [name for name in required_fields(cls) if name not in values]
    if missing:
        raise ConfigError(f"{where}: missing required key(s) {missing}")
    return cls(**values)
