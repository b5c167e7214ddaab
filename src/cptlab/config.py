"""Load a YAML config and validate it against the JSON schema; errors name the bad key."""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path

import jsonschema
import yaml

SCHEMA_PATH = files("cptlab") / "schemas" / "config.schema.yaml"


class ConfigError(ValueError):
    """The config breaks the schema or names something unknown; the message says where."""


def schema() -> dict:
    return yaml.safe_load(SCHEMA_PATH.read_text())


def validate_config(config: dict, source: str = "config") -> dict:
    validator = jsonschema.Draft202012Validator(schema())
    errors = sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [f"  {'.'.join(map(str, e.absolute_path)) or '<top>'}: {e.message}" for e in errors]
        raise ConfigError(f"{source}: invalid configuration\n" + "\n".join(lines))
    _check_names(config, source)
    return config


def _check_names(config: dict, source: str) -> None:
    from cptlab.domains import BENCHMARKS

    for domain, spec in config["data"]["domains"].items():
        names = (
            ([spec["train"]] if "train" in spec else []) + spec.get("id", []) + spec.get("ood", [])
        )
        for name in names:
            if name not in BENCHMARKS:
                raise ConfigError(
                    f"{source}: data.domains.{domain} names unknown benchmark {name!r}; "
                    f"known: {sorted(BENCHMARKS)}"
                )
    run = config.get("run")
    if run is None:
        return
    domains = config["data"]["domains"]
    for k, domain in enumerate(run["sequence"]):
        if "train" not in domains.get(domain, {}):
            raise ConfigError(
                f"{source}: run.sequence[{k}] is {domain!r}, which has no `train` split in "
                f"data.domains (trainable: {sorted(d for d, s in domains.items() if 'train' in s)})"
            )
    for k, method in enumerate(run["methods"]):
        if method not in config.get("methods", {}):
            raise ConfigError(
                f"{source}: run.methods[{k}] is {method!r}, not a key of `methods` "
                f"({sorted(config.get('methods', {}))})"
            )


def load_config(path: str | Path) -> dict:
    path = Path(path)
    text = path.read_text()
    try:
        # JSON is read as JSON: YAML 1.1 would take a number such as 3e-05 for a string.
        config = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (yaml.YAMLError, json.JSONDecodeError) as err:
        raise ConfigError(f"{path}: not valid {path.suffix[1:].upper() or 'YAML'} ({err})") from err
    if not isinstance(config, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return validate_config(config, str(path))


def benchmarks_in(config: dict) -> list[str]:
    """Every benchmark the config names, in domain order: train, id, ood."""
    names = []
    for spec in config["data"]["domains"].values():
        names += (
            ([spec["train"]] if "train" in spec else []) + spec.get("id", []) + spec.get("ood", [])
        )
    return names


def base_measure_benchmarks(config: dict) -> list[str]:
    """What `build-base` measures: the first id benchmark of each trained domain and the first
    ood benchmark of each evaluation-only one (adding a benchmark does not rebuild the base)."""
    names = []
    for spec in config["data"]["domains"].values():
        names += spec.get("id", [])[:1] if "train" in spec else spec.get("ood", [])[:1]
    return names
