"""The benchmark registry: one declarative entry per benchmark split."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from cptlab.errors import InputError
from cptlab.rows import RowError, validate_row
from cptlab.verifiers import VERIFIERS

SPLITS = ("train", "id", "ood", "pretrain")
# `data.rewards`: the project's verifiers (each benchmark's official rule), or the study's
# published reward functions where it has one (cptlab.verifiers.study).
REWARD_SETS = ("strict", "study")


@dataclass(frozen=True)
class Source:
    """Where a real benchmark's raw rows are read from when the config gives no `path`.

    hub:      Hugging Face hub dataset id, or several read as one (None: no hub copy, so the
              config must give a `path`).
    config:   hub config name.
    split:    hub split.
    revision: the commit of each hub repository (one, or one per id of `hub`): what the
              loader and `cptlab fetch-data` read unless `data.options.<name>.revision` names
              another; None where no commit could be verified (the config must then give one).
    files:    files read directly from the hub snapshot, where its loading script keeps
              `datasets` from reading it (None: the repository's README configs).
    gated:    the hub repository asks users to accept its terms (a token must have done so).
    also:     the other sources the loader reads, for the docs (local copies, the study's
              prepared files).
    """

    hub: str | tuple[str, ...] | None = None
    config: str | None = None
    split: str | None = None
    revision: str | None | tuple[str | None, ...] = None
    files: tuple[str, ...] | None = None
    gated: bool = False
    also: str = ""

    def repos(self) -> tuple[tuple[str, str | None], ...]:
        """(hub id, pinned commit) of each hub repository, in order."""
        if self.hub is None:
            return ()
        ids = (self.hub,) if isinstance(self.hub, str) else self.hub
        pins = self.revision if isinstance(self.revision, tuple) else (self.revision,) * len(ids)
        if len(pins) != len(ids):
            raise ValueError(f"{len(ids)} hub ids but {len(pins)} revisions: {ids}")
        return tuple(zip(ids, pins, strict=True))


@dataclass(frozen=True)
class Published:
    """A row count published for a benchmark, and the range its prepared rows must fall in
    (`cptlab prepare-data` stops outside it).

    low, high: the expected range (equal where the count is exact).
    source:    where the count is published, for the record and the error.
    rows:      the published count itself, where there is one (None: only the range is known).
    options:   the loader options it holds for ({option: value}); another value of any of them
               (a date window, an error-type filter) leaves the count unchecked.
    """

    low: int
    high: int
    source: str
    rows: int | None = None
    options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def holds_for(self, settings: Mapping[str, Any]) -> bool:
        """Whether the count applies to a load with these option values."""
        return all(_same(settings.get(k), v) for k, v in self.options.items())

    def expected(self, n: int | None) -> tuple[int, int]:
        """The range of a load capped at `n` rows (None: every row)."""
        return (self.low, self.high) if n is None else (min(n, self.low), min(n, self.high))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return list(a) == list(b)
    return a == b


@dataclass(frozen=True)
class Prompt:
    """A prompt format: an optional system message and a user message, `str.format` templates
    filled with a row's fields (`{question}`, `{options}`, ...; literal braces doubled)."""

    user: str
    system: str | None = None

    def messages(self, **fields: Any) -> list[dict]:
        """The chat messages for one row (the fields are inserted as they are)."""
        user = self.user.format(**fields)
        system = None if self.system is None else self.system.format(**fields)
        return ([{"role": "system", "content": system}] if system else []) + [
            {"role": "user", "content": user}
        ]


@dataclass(frozen=True)
class Benchmark:
    """One benchmark split.

    name:        registry key, used in configs and file names (e.g. "math_id", "aime").
    domain:      the domain it measures (math, science, tool, code, logic, knowledge).
    split:       "train" (RL training prompts), "id" / "ood" (evaluation), or "pretrain"
                 (the synthetic warm-up mixture of the embedded base model).
    verifier:    name of a registered verifier (cptlab.verifiers.VERIFIERS): the benchmark's
                 official rule, used under `data.rewards: strict`.
    study_verifier: the verifier that reproduces the study's reward function, used under
                 `data.rewards: study`; None where the study published none (the official
                 rule then serves both sets).
    loader:      called as loader(n=..., seed=..., **options) -> iterable of canonical rows:
                 a generator for synthetic data; for real data a `Recipe`
                 (cptlab.domains.paper.pipeline), which holds the entry's source, prompt
                 format and row converter, run by the one loader of every real benchmark.
    description: one line for reports.
    defaults:    default loader options (overridable from the config).
    reasoning:   a regular expression matching the reasoning part of this benchmark's
                 answers, where its format reasons outside `<think>` blocks (an embedded
                 science answer's `<reasoning>...</reasoning>`). SDPO's
                 `remove_thinking_from_demonstration` deletes it from demonstrations, as it
                 deletes `<think>` blocks; None: the format has no reasoning of its own.
    """

    name: str
    domain: str
    split: str
    verifier: str
    loader: Callable[..., Iterable[dict]]
    description: str = ""
    defaults: dict[str, Any] = field(default_factory=dict)
    study_verifier: str | None = None
    reasoning: str | None = None

    def __post_init__(self) -> None:
        if self.split not in SPLITS:
            raise ValueError(f"benchmark {self.name}: split {self.split!r} not in {SPLITS}")
        for verifier in (self.verifier, self.study_verifier):
            if verifier is not None and verifier not in VERIFIERS:
                raise ValueError(f"benchmark {self.name}: unknown verifier {verifier!r}")

    def verifier_for(self, rewards: str) -> str:
        """The verifier of reward set `rewards` ("strict" or "study")."""
        if rewards not in REWARD_SETS:
            raise ValueError(f"reward set {rewards!r} not in {REWARD_SETS}")
        if rewards == "study" and self.study_verifier is not None:
            return self.study_verifier
        return self.verifier


BENCHMARKS: dict[str, Benchmark] = {}


def register_benchmark(benchmark: Benchmark) -> Benchmark:
    if benchmark.name in BENCHMARKS:
        raise ValueError(f"benchmark {benchmark.name!r} registered twice")
    BENCHMARKS[benchmark.name] = benchmark
    return benchmark


def get_benchmark(name: str) -> Benchmark:
    try:
        return BENCHMARKS[name]
    except KeyError:
        raise InputError(f"unknown benchmark {name!r}; known: {sorted(BENCHMARKS)}") from None


def verifier_for(row: dict) -> str:
    """The verifier that scores a row: warm-up rows mix forms and carry their own; the others
    use their benchmark's."""
    return row["metadata"].get("verifier") or get_benchmark(row["benchmark"]).verifier


def benchmarks_of(domain: str, split: str | None = None) -> list[Benchmark]:
    found = [
        b for b in BENCHMARKS.values() if b.domain == domain and (split is None or b.split == split)
    ]
    if not found:
        domains = sorted({b.domain for b in BENCHMARKS.values()})
        raise InputError(f"unknown domain {domain!r} (split={split}); known: {domains}")
    return found


def load_benchmark(name: str, n: int | None = None, seed: int = 0, **options: Any) -> list[dict]:
    """Load a benchmark's rows, validated; errors name the benchmark, row index and problem.

    Row ids must be unique: a duplicate is an error, never a silent drop.
    """
    benchmark = get_benchmark(name)
    rows = []
    seen: set[str] = set()
    for i, row in enumerate(benchmark.loader(n=n, seed=seed, **{**benchmark.defaults, **options})):
        validate_row(row, where=f"benchmark {name} row {i}")
        if row["id"] in seen:
            raise RowError(f"benchmark {name} row {i}: duplicate id {row['id']!r}")
        if row["benchmark"] != name or row["domain"] != benchmark.domain:
            raise RowError(
                f"benchmark {name} row {i} (id={row['id']!r}): labelled "
                f"{row['benchmark']}/{row['domain']}, expected {name}/{benchmark.domain}"
            )
        seen.add(row["id"])
        rows.append(row)
    return rows
