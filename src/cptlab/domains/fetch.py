"""`cptlab fetch-data`: every hub dataset a config's benchmarks read, at its revision, into the
Hugging Face cache, on a node with internet; `prepare-data` then runs offline
(``HF_HUB_OFFLINE=1``), as on compute nodes, from the same ``HF_HOME`` / ``HF_HUB_CACHE``.

It first checks the token's access to every source (gated repositories need their terms
accepted) and names each one it cannot read, one line each, with each source whose revision
the config must still give; then it downloads the others. A benchmark whose `path` is local
reads no hub repository and is not fetched.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from cptlab.domains import get_benchmark
from cptlab.domains.paper.hub import HubRepo, access_problem
from cptlab.errors import InputError


def hub_sources(config: Mapping) -> list[HubRepo]:
    """The hub repositories the config's data sets read, each (repository, revision) once,
    named after the first benchmark that reads it."""
    from cptlab.plan import datasets

    options = (config["data"].get("options") or {}) if "data" in config else {}
    seen: dict[tuple, HubRepo] = {}
    for data_set in datasets(config):
        loader = get_benchmark(data_set.name).loader
        hub_repos = getattr(loader, "hub_repos", None)  # a real dataset's Recipe
        if hub_repos is None:
            continue
        given = options.get(data_set.name) or {}
        for repo in hub_repos(given.get("path"), given.get("revision")):
            seen.setdefault((repo.repo, repo.revision, repo.files), repo)
    return list(seen.values())


def fetch_data(
    config: Mapping,
    *,
    api: Any = None,
    download: Callable[..., str] | None = None,
    say: Callable[[str], None] = print,
) -> list[str]:
    """Check every hub source, then download those that can be read; returns the lines of
    those that cannot (printed first, one each). `api` is a ``huggingface_hub.HfApi`` and
    `download` its ``snapshot_download`` (the defaults)."""
    from huggingface_hub import HfApi, constants, snapshot_download

    if constants.is_offline_mode():
        raise InputError(
            "fetch-data reads the hub: unset HF_HUB_OFFLINE (and run it on a node with internet)"
        )
    api = api or HfApi()
    download = download or snapshot_download
    sources = hub_sources(config)
    problems, blocked = [], set()
    for source in sources:
        line = access_problem(source, api)
        if line is None and source.revision is None:
            main = api.dataset_info(source.repo).sha
            line = (
                f"{source.benchmark}: no commit of {source.repo} is pinned in cptlab: set "
                f"data.options.{source.benchmark}.revision (its main is at {main})"
            )
        if line is not None:
            problems.append(line)
            blocked.add(source)
            say(line)
    for source in sources:
        if source in blocked:
            continue
        folder = download(
            source.repo,
            repo_type="dataset",
            revision=source.revision,
            allow_patterns=source.patterns,
        )
        commit = str(folder).rstrip("/").rsplit("/", 1)[-1]
        pinned = "" if source.pinned else f" (the ref {source.revision!r} is commit {commit})"
        say(f"{source.benchmark}: {source.describe()}{pinned} -> {folder}")
    return problems
