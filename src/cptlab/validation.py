"""Load a config with every check cptlab makes: the JSON schema (cptlab.config), then the
names it uses (benchmarks, domains, methods: the registries and the plan) and each method entry
as its trainer will run it (cptlab.train.spec). It sits above those modules so that the config
reader below them imports none of them. Every error is a ConfigError naming the file and key.
"""

from __future__ import annotations

import copy
import difflib
import functools
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

from cptlab.base_model.settings import BaseSettings
from cptlab.config import (
    SCHEMA_PATH,
    check_schema,
    dataclass_schema,
    merge,
    read_config_file,
    resolve_fallback_paths,
    schema_file,
)
from cptlab.domains import BENCHMARKS
from cptlab.drift.settings import DriftSettings
from cptlab.errors import ConfigError
from cptlab.evaluation.settings import EvalSettings
from cptlab.plan import datasets, eval_benchmarks
from cptlab.resources import launcher_processes, rule_resources
from cptlab.train.settings import schema_sections
from cptlab.train.spec import check_methods, method_settings

logger = logging.getLogger(__name__)


def load_config(paths: str | Path | Sequence[str | Path], overrides: Mapping | None = None) -> dict:
    """The validated config of `paths` (later files merged over earlier ones, each with its
    `extends:` chain), with `overrides` (Snakemake's --config) merged last, and each data
    option's `fallback_path` used where its `path` is absent here (said in one warning)."""
    if isinstance(paths, str | Path):
        paths = [paths]
    config: dict = {}
    for path in paths:
        config = merge(config, read_config_file(path))
    if overrides:
        config = merge(config, overrides)
    config, fallback = resolve_fallback_paths(config)
    if fallback is not None:
        logger.warning("%s", fallback)
    return validate_config(config, ", ".join(str(p) for p in paths))


def schema() -> dict:
    """The config's JSON schema: cptlab/schemas/config.schema.yaml, in which each section written
    `{}` is stated by the settings dataclass that reads it (cptlab.config.dataclass_schema). A
    copy of the schema joined once per process."""
    return copy.deepcopy(_joined_schema())


@functools.cache
def _joined_schema() -> dict:
    stated = {
        "base": dataclass_schema(BaseSettings),
        "evaluation": dataclass_schema(EvalSettings),
        "drift": dataclass_schema(DriftSettings),
        **schema_sections(),
    }
    out = schema_file()
    for section, spec in stated.items():
        if out["properties"].get(section) != {}:
            raise ValueError(f"{SCHEMA_PATH}: `{section}` must be `{{}}` (its dataclass states it)")
        out["properties"][section] = spec  # in the file's place
    return out


def validate_config(config: dict, source: str = "config") -> dict:
    """`config` if it follows the schema and names only known things, else ConfigError."""
    check_schema(config, _joined_schema(), source)
    check_names(config, source)
    return config


def _unknown(source: str, key: str, what: str, name: str, known) -> ConfigError:
    """`key` names `name`, which is no `what`: say the closest known names."""
    close = difflib.get_close_matches(name, list(known), n=3)
    hint = f"did you mean {' or '.join(map(repr, close))}?" if close else f"known: {sorted(known)}"
    return ConfigError(f"{source}: {key}: unknown {what} {name!r} ({hint})")


def check_names(config: dict, source: str) -> None:
    """Every benchmark, domain and method the config names exists, every sequence domain can
    train, and every method entry is one its trainer can run (cptlab.train.spec)."""
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
    if run is not None:
        check_within_stage(config, source)


def check_within_stage(config: dict, source: str) -> None:
    """`evaluation.within_stage.every` is a multiple of each trained method's save_steps: the
    within-stage checkpoints are the weights a stage exports at its trainer saves."""
    every = ((config.get("evaluation") or {}).get("within_stage") or {}).get("every")
    if every is None:
        return
    for method in config["run"]["methods"]:
        save_steps = method_settings(config, method, source)[2].save_steps
        if every % save_steps:
            raise ConfigError(
                f"{source}: evaluation.within_stage.every: {every} is not a multiple of "
                f"training.save_steps {save_steps} (method {method}): the within-stage "
                "checkpoints are the weights each stage exports at its trainer saves"
            )
