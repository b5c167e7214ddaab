"""Load an experiment config: YAML (or JSON) files, `extends:` overlays, overrides, then
validation against the JSON schema and the registries. Every error names the file and key.

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
import difflib
import json
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, fields
from importlib.resources import files
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from cptlab.errors import InputError

SCHEMA_PATH = files("cptlab") / "schemas" / "config.schema.yaml"
EXTENDS = "extends"
# Mappings that are a single setting: an overlay (or a method's `training`) that gives one
# means exactly these alarms (these evaluation shards), not the parent's plus these.
REPLACED_MAPPINGS = frozenset({"thresholds", "shards"})


class ConfigError(InputError):
    """The config breaks the schema or names something unknown; the message says where."""


def schema() -> dict:
    return yaml.safe_load(SCHEMA_PATH.read_text())


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


def load_config(paths: str | Path | Sequence[str | Path], overrides: Mapping | None = None) -> dict:
    """The validated config of `paths` (later files merged over earlier ones, each with its
    `extends:` chain), with `overrides` (Snakemake's --config) merged last."""
    if isinstance(paths, str | Path):
        paths = [paths]
    config: dict = {}
    for path in paths:
        config = merge(config, read_config_file(path))
    if overrides:
        config = merge(config, overrides)
    return validate_config(config, ", ".join(str(p) for p in paths))


def validate_config(config: dict, source: str = "config") -> dict:
    """`config` if it follows the schema and names only known things, else ConfigError."""
    check_schema(config, schema(), source)
    _check_names(config, source)
    return config


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


def _unknown(source: str, key: str, what: str, name: str, known) -> ConfigError:
    """`key` names `name`, which is no `what`: say the closest known names."""
    close = difflib.get_close_matches(name, list(known), n=3)
    hint = f"did you mean {' or '.join(map(repr, close))}?" if close else f"known: {sorted(known)}"
    return ConfigError(f"{source}: {key}: unknown {what} {name!r} ({hint})")


def _check_names(config: dict, source: str) -> None:
    """Every benchmark, domain and method the config names exists, every sequence domain can
    train, and every method entry is one its trainer can run (cptlab.train.spec)."""
    from cptlab.domains import BENCHMARKS
    from cptlab.plan import datasets, eval_benchmarks
    from cptlab.resources import launcher_processes, rule_resources
    from cptlab.train.spec import check_methods

    for data_set in datasets(config):
        if data_set.name not in BENCHMARKS:
            key = f"data.domains.{data_set.domain}.{data_set.split}"
            raise _unknown(source, key, "benchmark", data_set.name, BENCHMARKS)
    for name in (config["data"].get("sizes") or {}).get("benchmarks") or {}:
        if name not in BENCHMARKS:
            raise _unknown(source, "data.sizes.benchmarks", "benchmark", name, BENCHMARKS)
    evaluated = [b.name for b in eval_benchmarks(config)]
    for name in ((config.get("evaluation") or {}).get("shards")) or {}:
        if name not in evaluated:
            raise _unknown(source, "evaluation.shards", "evaluated benchmark", name, evaluated)
    domains = config["data"]["domains"]
    warmup = (config["base"].get("warmup") or {}) if "path" not in config["base"] else {}
    named = {
        "training.domain_steps": (config.get("training") or {}).get("domain_steps") or {},
        "base.warmup.domain_weights": warmup.get("domain_weights") or {},
        "base.warmup.domain_reprompt_share": warmup.get("domain_reprompt_share") or {},
    }
    for key, mapping in named.items():
        for domain in mapping:
            if domain not in domains:
                raise _unknown(source, key, "domain", domain, domains)
    methods = config.get("methods") or {}
    run = config.get("run")
    if run is not None:
        trainable = sorted(d for d, s in domains.items() if "train" in s)
        for k, domain in enumerate(run["sequence"]):
            if domain not in domains:
                raise _unknown(source, f"run.sequence[{k}]", "domain", domain, domains)
            if "train" not in domains[domain]:
                raise ConfigError(
                    f"{source}: run.sequence[{k}]: domain {domain!r} has no `train` split in "
                    f"data.domains, so it cannot train (trainable: {trainable})"
                )
        for k, method in enumerate(run["methods"]):
            if method not in methods:
                raise _unknown(source, f"run.methods[{k}]", "method", method, methods)
    processes = launcher_processes(rule_resources(config, "train")["launcher"])
    check_methods(config, processes, source)


def settings(cls: type, values: Mapping | None, where: str):
    """`cls(**values)` for a settings dataclass (a config section with its defaults), with a
    missing required key reported as a ConfigError naming it (`where.key`)."""
    values = dict(values or {})
    required = [
        f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING
    ]
    missing = [name for name in required if name not in values]
    if missing:
        raise ConfigError(f"{where}: missing required key(s) {missing}")
    return cls(**values)
