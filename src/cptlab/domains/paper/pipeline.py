"""The one loader of every real benchmark: a `Recipe` says what is particular to a dataset
(its source, prompt format, filter rule, split and row converter); `Recipe.__call__` runs the
same stages for all of them: open -> (expand) -> filter -> split -> subsample -> convert.

Adding a dataset is adding a registry entry whose loader is a Recipe: constants for its raw
schema, a `convert` (and, where the study filters, a `keep`), and its Source and Prompt.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from cptlab.domains.paper.common import (
    HUB_OPTIONS,
    SPLIT_SEED,
    TEST_FRACTION,
    LoadRun,
    PathSpec,
    RawSource,
    RowContext,
    check_sample_size,
    holdout_split,
    is_hub_name,
    open_source,
    path_specs,
)
from cptlab.domains.paper.hub import HubRepo
from cptlab.domains.registry import Prompt, Published, Source
from cptlab.errors import InputError


@dataclass(frozen=True)
class Holdout:
    """The entry is one part ("train" or "test") of a split held out of its source; `fraction`
    is the default of its `holdout` option (None: by default the source is the split)."""

    part: str
    fraction: float | None = TEST_FRACTION


@dataclass
class Load:
    """One call of a recipe: its settings (the entry's options, resolved), its subsampling seed,
    the pipeline's `LoadRun` (exclusion counts) and `state`, where the hooks of one load keep what
    they share."""

    recipe: Recipe
    settings: dict[str, Any]
    hub: dict[str, Any]
    seed: int = 0
    run: LoadRun | None = None
    state: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.settings[key]


Keep = Callable[[dict, Load], str | None]
Convert = Callable[[dict, RowContext, Load], dict]


@dataclass(frozen=True)
class Recipe:
    """How one benchmark turns raw rows into canonical rows.

    name, domain: the entry's.
    source:  where raw rows come from without a `path` (`registry.Source`).
    prompt:  the prompt format `convert` fills (`registry.Prompt`).
    convert: (raw row, where it is, load) -> canonical row; raises `BadRawRow` for a row it cannot
             convert (an error naming the row; counted with ``strict=False``).
    keep:    (raw row, load) -> None to keep it, else the reason it is excluded (counted).
    columns: the raw fields `keep` reads (Arrow sources read only those while filtering).
    holdout: the part of a held-out split this entry is (`Holdout`), or None.
    group:   (load, positions) -> {group: positions}: each group is split on its own (called
             on every load, so it may also record per-row facts for `convert`).
    open:    (load, path) -> `RawSource`, for sources the generic reader cannot open.
    expand:  (load, source) -> `RawSource`: the items to convert, when a raw row holds several.
    check:   (load) -> None, raising ValueError for option values the entry does not take.
    options: the entry's own options and their defaults; any other option is an error.
    needs_path: the error when no `path` is given and the source has no hub copy.
    published: the row counts published for the entry (`registry.Published`), each for the
             option values it names; the first that holds for a load applies.
    """

    name: str
    domain: str
    source: Source
    prompt: Prompt | None
    convert: Convert
    keep: Keep | None = None
    columns: tuple[str, ...] | None = None
    holdout: Holdout | None = None
    group: Callable[[Load, list[int]], dict[Any, list[int]]] | None = None
    open: Callable[[Load, PathSpec], RawSource] | None = None
    expand: Callable[[Load, RawSource], RawSource] | None = None
    check: Callable[[Load], None] | None = None
    options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    needs_path: str | None = None
    published: tuple[Published, ...] = ()

    def published_for(self, options: Mapping[str, Any]) -> Published | None:
        """The published count that holds for a load with `options` (None: none does)."""
        settings = {**self.defaults(), **options}
        return next((p for p in self.published if p.holds_for(settings)), None)

    def defaults(self) -> dict[str, Any]:
        """Every option the entry takes, with its default."""
        split = {"holdout": self.holdout.fraction, "split_seed": SPLIT_SEED} if self.holdout else {}
        return {**self.options, **split}

    def __call__(
        self,
        n: int | None = None,
        seed: int = 0,
        path: PathSpec = None,
        *,
        strict: bool = True,
        **options: Any,
    ) -> list[dict]:
        check_sample_size(n)
        hub = {k: options.pop(k) for k in list(options) if k in HUB_OPTIONS}
        defaults = self.defaults()
        unknown = sorted(set(options) - set(defaults))
        if unknown:
            raise InputError(
                f"{self.name}: unknown option(s) {unknown} (data.options.{self.name}); "
                f"known: {sorted(defaults)}"
            )
        load = Load(self, {**defaults, **options}, hub, seed)
        if self.check is not None:
            self.check(load)
        source = self.open(load, path) if self.open else self._open(path, hub)
        load.run = run = LoadRun(self.name, source, strict)
        if self.expand is not None:
            source = run.source = self.expand(load, source)
        keep = None if self.keep is None else (lambda raw: self.keep(raw, load))
        positions = run.filter(keep, self.columns)
        # The groups are formed even without a split: `group` may record what convert reads.
        groups = self.group(load, positions) if self.group else {None: positions}
        if self.holdout is not None and load["holdout"] is not None:
            chosen = {
                i
                for members in groups.values()
                for i in holdout_split(
                    members, self.holdout.part, load["holdout"], load["split_seed"]
                )
            }
            positions = [i for i in positions if i in chosen]
        return run.finish(positions, n, seed, lambda raw, ctx: self.convert(raw, ctx, load))

    def hub_repos(self, path: PathSpec = None, revision: str | dict | None = None) -> list[HubRepo]:
        """The hub repositories a load with `path` reads (none for local files), each at
        `revision` (the `revision` option: one commit, or {hub id: commit}) or the Source's
        pinned commit."""
        if path is not None:
            items = [path] if isinstance(path, str | Path) else list(path)
            named = [str(item) for item in items if is_hub_name(item)]
            return [s for s in path_specs(self.name, named, revision) if isinstance(s, HubRepo)]
        if isinstance(revision, str) and len(self.source.repos()) > 1:
            raise InputError(
                f"{self.name}: {len(self.source.repos())} hub repositories: give "
                f"data.options.{self.name}.revision as {{hub id: commit}}"
            )
        repos = []
        for repo, pinned in self.source.repos():
            given = revision.get(repo) if isinstance(revision, dict) else revision
            files = self.source.files
            repos.append(HubRepo(self.name, repo, given or pinned, files, self.source.gated))
        if isinstance(revision, dict) and set(revision) - {r.repo for r in repos}:
            raise InputError(
                f"{self.name}: data.options.{self.name}.revision names "
                f"{sorted(set(revision) - {r.repo for r in repos})}, not among its hub "
                f"repositories {[r.repo for r in repos]}"
            )
        return repos

    def _open(self, path: PathSpec, hub: dict) -> RawSource:
        """`path` (local files and folders, or hub names at the `revision` option), or the
        Source's hub snapshots at their pinned commits."""
        if path is None and self.source.hub is None:
            raise InputError(self.needs_path or f"{self.name}: no path given and no hub copy")
        revision = hub.get("revision")
        if path is None:
            specs: list = self.hub_repos(None, revision)
        else:
            specs = path_specs(self.name, path, revision)
        return open_source(
            self.name,
            specs,
            config=hub.get("config", self.source.config),
            hub_split=hub.get("hub_split", self.source.split),
            cache_dir=hub.get("cache_dir"),
            hub_kwargs=hub.get("hub_kwargs"),
        )
