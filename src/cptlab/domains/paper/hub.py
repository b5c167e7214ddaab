"""The hub copies of the study's datasets: each one a snapshot of its repository at a pinned
commit in the Hugging Face cache, read offline once `cptlab fetch-data` has filled the cache.

Why not ``datasets.load_dataset(<hub id>)``: offline (``HF_HUB_OFFLINE=1``, as on compute
nodes), `datasets` 5.2.0 does not read the hub cache's files for a hub id; it falls back to a
dataset it built before (datasets/load.py, `dataset_module_factory`), which a node that only
fetched the files never has. And for a repository that holds a loading script
(LiveCodeBench's ``code_generation_lite.py``) it raises "Dataset scripts are no longer
supported", whatever `data_files` are given. So a hub source is read in two steps:

1. `snapshot`: ``huggingface_hub.snapshot_download`` of the repository at its revision, into
   the HF cache (``HF_HUB_CACHE``); offline, it returns the cached snapshot folder of that
   commit (a ref, such as ``main`` or ``refs/pr/6``, is resolved through the cache's
   ``refs/``). Online, it downloads what is missing, as `fetch-data` does.
2. `read`: the snapshot folder is a local folder in the repository's own layout. Without
   `files`, ``datasets.load_dataset(<folder>, <config>, split=...)`` reads it through the
   repository's README configs, the files and builders (csv, json, parquet, arrow) a hub load
   would use. With `files` (LiveCodeBench: its JSONL files beside its script), those files are
   read directly, as local files are.

`HubRepo` is one repository a benchmark reads, with the revision the registry pins (or the
config's `revision` option) and whether the repository is gated; `access_problem` checks a
token's access to it (`fetch-data` does so first, for every source).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from cptlab.errors import InputError

# A commit hash: the only revision that cannot move under a running study.
COMMIT = re.compile(r"[0-9a-f]{40}")
# The file every snapshot needs: the README's YAML names the configs `datasets` reads.
CARD = "README.md"


@dataclass(frozen=True)
class HubRepo:
    """One hub repository one benchmark reads.

    benchmark: the registry name (named in every error).
    repo:      the dataset repository id, ``owner/name``.
    revision:  the commit read (the registry's pin), or a ref the config names (`revision`);
               None where no commit is known and the config gives none (an error when read).
    files:     the files read directly from the snapshot (None: the repository's README
               configs, through `datasets`).
    gated:     whether the repository asks its users to accept terms (a token must have).
    """

    benchmark: str
    repo: str
    revision: str | None
    files: tuple[str, ...] | None = None
    gated: bool = False

    @property
    def patterns(self) -> list[str] | None:
        """What to fetch: the files read and the card (None: the whole repository)."""
        return None if self.files is None else [CARD, *self.files]

    @property
    def pinned(self) -> bool:
        return self.revision is not None and COMMIT.fullmatch(self.revision) is not None

    def describe(self) -> str:
        return f"{self.repo}@{self.revision}"

    def require_revision(self) -> str:
        """The revision, or the error that says how to give one."""
        if self.revision is None:
            raise InputError(
                f"{self.benchmark}: no commit of {self.repo} is pinned in cptlab (none could be "
                f"verified): set data.options.{self.benchmark}.revision to one (`cptlab "
                f"fetch-data` prints the commit main is at)"
            )
        return self.revision


def snapshot(source: HubRepo, cache_dir: str | None = None) -> Path:
    """The local folder of `source`'s snapshot: downloaded when the hub answers, else the HF
    cache's (``HF_HUB_OFFLINE=1``); every file it reads directly must be in it."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    revision = source.require_revision()
    try:
        folder = Path(
            snapshot_download(
                source.repo,
                repo_type="dataset",
                revision=revision,
                allow_patterns=source.patterns,
                cache_dir=cache_dir,
            )
        )
    except GatedRepoError:
        raise InputError(access_line(source, "gated")) from None
    except RevisionNotFoundError:
        raise InputError(
            f"{source.benchmark}: revision {revision!r} of {source.repo} does not exist on the hub "
            f"(data.options.{source.benchmark}.revision)"
        ) from None
    except RepositoryNotFoundError:
        raise InputError(access_line(source, "missing")) from None
    except LocalEntryNotFoundError as err:
        raise InputError(
            f"{source.benchmark}: {source.describe()} is not in the HF cache and the hub cannot "
            f"be reached: run `cptlab fetch-data --config <file>` on a node with internet, with "
            f"the same HF_HOME / HF_HUB_CACHE ({str(err).splitlines()[0]})"
        ) from None
    missing = [f for f in source.files or () if not (folder / f).is_file()]
    if missing:
        raise InputError(
            f"{source.benchmark}: {source.describe()} has no {', '.join(missing)} in its snapshot "
            f"{folder} (a partial download, or a revision with another layout)"
        )
    return folder


def access_line(source: HubRepo, problem: str) -> str:
    """One line naming a source a token cannot read and what to do about it."""
    page = f"https://huggingface.co/datasets/{source.repo}"
    if problem == "gated":
        return (
            f"{source.benchmark}: {source.repo} is gated: accept its terms at {page} with the "
            f"account of your token (HF_TOKEN or `hf auth login`)"
        )
    return f"{source.benchmark}: {source.repo} does not exist or is private to the token ({page})"


def access_problem(source: HubRepo, api: object = None) -> str | None:
    """None when the token can read `source`, else the line that says why not (`auth_check`:
    a gated repository whose terms the token's account has not accepted, or no such one)."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    api = api or HfApi()
    try:
        api.auth_check(source.repo, repo_type="dataset")
    except GatedRepoError:
        return access_line(source, "gated")
    except RepositoryNotFoundError:
        return access_line(source, "missing")
    return None
