"""The experiment's shape, read from its config: which data sets it names, which chains of
stages it trains and which checkpoints it evaluates. The Snakefile and every package module
take these lists from here.

A data set's domain and split are its place in `data.domains` (a benchmark named twice counts
where it is first named).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cptlab.errors import ConfigError

SPLITS = ("train", "id", "ood")


@dataclass(frozen=True)
class DataSet:
    name: str
    domain: str
    split: str  # "train", "id" or "ood"


def datasets(config: Mapping, splits: Sequence[str] = SPLITS) -> list[DataSet]:
    """Every data set of `data.domains` with a split in `splits`, in config order (domain by
    domain: train, id, ood), each once."""
    found: list[DataSet] = []
    seen: set[str] = set()
    for domain, spec in config["data"]["domains"].items():
        named = [(spec["train"], "train")] if "train" in spec else []
        named += [(n, "id") for n in spec.get("id", [])] + [(n, "ood") for n in spec.get("ood", [])]
        for name, split in named:
            if split in splits and name not in seen:
                seen.add(name)
                found.append(DataSet(name, domain, split))
    return found


def eval_benchmarks(config: Mapping) -> list[DataSet]:
    """What every checkpoint is evaluated on: each id and ood benchmark."""
    return datasets(config, ("id", "ood"))


def builds_base(config: Mapping) -> bool:
    """True when the workflow builds the embedded base; False when `base.path` names one."""
    return "path" not in config["base"]


def base_measure_benchmarks(config: Mapping) -> list[str]:
    """What `build-base` measures: the first id benchmark of each trained domain and the first
    ood benchmark of each evaluation-only one (adding a benchmark does not rebuild the base)."""
    names = []
    for spec in config["data"]["domains"].values():
        names += spec.get("id", [])[:1] if "train" in spec else spec.get("ood", [])[:1]
    return names


@dataclass(frozen=True)
class Plan:
    """What an experiment trains and evaluates: the config's `run` and `data.domains`.

    sequence:   the domains trained in stages 1..K
    methods:    the method names of `run.methods`, one chain per (method, seed)
    seeds:      the training seeds
    benchmarks: every id and ood benchmark (eval_benchmarks)
    anchor:     `run.anchor`, the checkpoint an SDPO teacher anchored at `base` starts from
                (None: the base model)
    """

    sequence: list[str]
    methods: list[str]
    seeds: list[int]
    benchmarks: list[DataSet]
    anchor: str | None = None

    @classmethod
    def from_config(cls, config: Mapping) -> Plan:
        domains = config["data"]["domains"]
        run = config.get("run") or {}
        sequence = list(run.get("sequence") or [d for d, s in domains.items() if "train" in s])
        methods = list(run.get("methods") or list(config.get("methods", {})))
        seeds = [int(s) for s in run.get("seeds", [0])]
        if not sequence:
            raise ConfigError("run.sequence: no domain to train")
        if not methods:
            raise ConfigError("run.methods: no method")
        unknown = [d for d in sequence if d not in domains]
        if unknown:
            raise ConfigError(f"run.sequence names domains not in data.domains: {unknown}")
        return cls(sequence, methods, seeds, eval_benchmarks(config), run.get("anchor"))

    @property
    def stages(self) -> list[int]:
        """0 (the base) and 1..K."""
        return list(range(len(self.sequence) + 1))

    def stage_domain(self, stage: int) -> str:
        return "base" if stage == 0 else self.sequence[stage - 1]

    def of_split(self, split: str) -> list[DataSet]:
        return [b for b in self.benchmarks if b.split == split]

    @property
    def chains(self) -> list[tuple[str, int]]:
        """Every (method, seed): one chain of stages each."""
        return [(m, s) for m in self.methods for s in self.seeds]

    @property
    def trained_stages(self) -> list[tuple[str, int, int, str]]:
        """Every (method, seed, stage k >= 1, its domain)."""
        return [(m, s, k, d) for m, s in self.chains for k, d in enumerate(self.sequence, start=1)]
