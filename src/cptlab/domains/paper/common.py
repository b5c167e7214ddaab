"""Shared machinery of the paper loaders: reading raw files and hub datasets, the
filter -> split -> subsample -> convert pipeline with its exclusion counts, and the small
helpers every converter uses (see the package docstring for the design).

What the family modules and `pipeline` use:

- Reading: `open_source` (local paths and hub snapshots -> `RawSource`), `open_segments` (one
  of them -> `RawSegment` list), `path_specs` (a `path` option's items), `looks_local`,
  `check_hub_options`, `PathSpec`, `HUB_OPTIONS`;
  `RowContext` tells a converter where its raw row comes from.
- The pipeline: `LoadRun` (filter, convert, exclusion counts), `holdout_split`, `subsample`,
  `check_sample_size`, `exclusions` / `EXCLUSIONS`, `SPLIT_SEED`, `TEST_FRACTION`.
- Converters: `BadRawRow` (a raw row that cannot be converted), `required_text`,
  `first_present`, `json_value`, `drop_none`, `last_user_text`, `duplicate_reason`,
  `chat_prompt`, `options_text`, `LETTERS`, `content_digest`, `slug`, `canonical_row`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cptlab.domains.paper.hub import HubRepo, snapshot
from cptlab.errors import InputError
from cptlab.rows import RowError

# One logger for the whole package, under its historical name.
logger = logging.getLogger("cptlab.domains.paper")

LETTERS = "ABCDEFGHIJ"
LOCAL_SUFFIXES = (".json", ".jsonl", ".parquet", ".csv")

# Rows excluded by a rule at the last load of each benchmark: {benchmark: {reason: count}}.
EXCLUSIONS: dict[str, dict[str, int]] = {}


def exclusions(name: str) -> dict[str, int]:
    """Rows the last load of benchmark `name` excluded, counted per reason ({} if none)."""
    return dict(EXCLUSIONS.get(name, {}))


# The train/test split of the datasets the study holds out part of (datasets' seed).
SPLIT_SEED = 42
TEST_FRACTION = 0.1


# ===== Reading raw data =========================================================================


class BadRawRow(ValueError):
    """A raw row cannot be converted; the pipeline turns it into a RowError naming the row
    (or, with ``strict=False``, counts it as an exclusion)."""


class _JsonlTable:
    """A JSONL file indexed by byte offset: rows are parsed on access, never all held."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offsets: list[int] = []
        self.lines: list[int] = []
        with open(path, "rb") as handle:
            offset = 0
            for lineno, raw in enumerate(handle, start=1):
                if raw.strip():
                    self.offsets.append(offset)
                    self.lines.append(lineno)
                offset += len(raw)

    def __len__(self) -> int:
        return len(self.offsets)

    def where(self, k: int) -> str:
        return f"{self.path}:{self.lines[k]}"

    def row(self, k: int) -> dict:
        with open(self.path, "rb") as handle:
            handle.seek(self.offsets[k])
            return _parse_json_line(handle.readline())

    def iter_rows(self) -> Iterator[dict | BadRawRow]:
        with open(self.path, "rb") as handle:
            for raw in handle:
                if raw.strip():
                    try:
                        yield _parse_json_line(raw)
                    except BadRawRow as err:
                        yield err


def _parse_json_line(raw: bytes) -> dict:
    try:
        value = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise BadRawRow(f"invalid UTF-8 ({err.reason})") from None
    except json.JSONDecodeError as err:
        raise BadRawRow(f"invalid JSON ({err.msg})") from None
    if not isinstance(value, dict):
        raise BadRawRow(f"expected a JSON object, got {type(value).__name__}")
    return value


@dataclass
class RawSegment:
    """One file or hub dataset: `label` names it in ids, `origin` in error messages."""

    label: str
    origin: str
    table: Any  # list[dict] | _JsonlTable | datasets.Dataset
    arrow: bool = False  # read through Arrow: nested dicts may carry None padding
    wheres: list[str] | None = None  # per-row locations for synthetic segments

    def __len__(self) -> int:
        return len(self.table)

    def where(self, k: int) -> str:
        if self.wheres is not None:
            return self.wheres[k]
        if isinstance(self.table, _JsonlTable):
            return self.table.where(k)
        return f"{self.origin}[{k}]"

    def row(self, k: int) -> dict:
        if isinstance(self.table, _JsonlTable):
            return self.table.row(k)
        value = self.table[k]
        if not isinstance(value, dict):
            raise BadRawRow(f"expected an object, got {type(value).__name__}")
        return value

    def iter_rows(self, columns: Sequence[str] | None) -> Iterator[dict | BadRawRow]:
        if isinstance(self.table, _JsonlTable):
            yield from self.table.iter_rows()
        elif self.arrow:
            table = self.table
            if columns is not None:
                table = table.select_columns([c for c in columns if c in table.column_names])
            yield from table
        else:
            for value in self.table:
                yield value if isinstance(value, dict) else BadRawRow("expected an object")


@dataclass(frozen=True)
class RowContext:
    """Where a raw row comes from, for converters: global and in-segment index, label."""

    index: int
    local: int
    label: str
    arrow: bool


class RawSource:
    """The raw rows of one benchmark: one or more segments addressed by a global index."""

    def __init__(self, dataset: str, segments: list[RawSegment]) -> None:
        self.dataset = dataset
        self.segments = segments
        self.starts: list[int] = []
        total = 0
        for segment in segments:
            self.starts.append(total)
            total += len(segment)
        self.total = total

    def __len__(self) -> int:
        return self.total

    def locate(self, i: int) -> tuple[RawSegment, int]:
        for segment, start in zip(reversed(self.segments), reversed(self.starts), strict=True):
            if i >= start:
                return segment, i - start
        raise IndexError(i)

    def where(self, i: int) -> str:
        segment, k = self.locate(i)
        return segment.where(k)

    def ctx(self, i: int) -> RowContext:
        segment, k = self.locate(i)
        return RowContext(i, k, segment.label, segment.arrow)

    def row(self, i: int) -> dict:
        segment, k = self.locate(i)
        return segment.row(k)

    def iter_rows(
        self, columns: Sequence[str] | None = None
    ) -> Iterator[tuple[int, dict | BadRawRow]]:
        i = 0
        for segment in self.segments:
            for value in segment.iter_rows(columns):
                yield i, value
                i += 1

    def error(self, i: int, problem: str) -> RowError:
        """The error naming raw row `i` of this source, where it is, and `problem`."""
        return RowError(f"{self.dataset}: raw row {i} ({self.where(i)}): {problem}")


PathSpec = str | Path | Sequence[str | Path] | None
# The options every loader takes besides its own: where and how its rows are read.
HUB_OPTIONS = ("config", "hub_split", "cache_dir", "hub_kwargs", "revision")


def check_hub_options(dataset: str, hub: dict) -> None:
    """Reject any hub option other than `HUB_OPTIONS`, naming the dataset's config key."""
    unknown = sorted(set(hub) - set(HUB_OPTIONS))
    if unknown:
        raise InputError(f"{dataset}: unknown option(s) {unknown} (data.options.{dataset})")


def open_source(
    dataset: str,
    specs: Sequence[str | Path | HubRepo],
    *,
    config: str | None = None,
    hub_split: str | None = None,
    cache_dir: str | None = None,
    hub_kwargs: dict | None = None,
) -> RawSource:
    """Open local files/folders and hub snapshots (`HubRepo`) as one source.

    The hub options are those of every loader: `config` (the hub config name), `hub_split`,
    `cache_dir` (the Arrow cache `datasets` builds from a snapshot or a parquet/csv file) and
    `hub_kwargs` (more keyword arguments of `datasets.load_dataset` on a snapshot folder).
    """
    if not specs:
        raise InputError(f"{dataset}: no path given and the dataset has no hub default")
    segments: list[RawSegment] = []
    for item in specs:
        segments.extend(
            open_segments(
                dataset,
                item,
                config=config,
                hub_split=hub_split,
                cache_dir=cache_dir,
                hub_kwargs=hub_kwargs,
            )
        )
    return RawSource(dataset, segments)


def looks_local(spec: str) -> bool:
    """Whether `spec` is written as a local path (not a hub name), existing or not."""
    return (
        spec.startswith(("/", ".", "~"))
        or spec.count("/") > 1
        or "\\" in spec
        or spec.endswith(LOCAL_SUFFIXES)
    )


def is_hub_name(item: str | Path) -> bool:
    """Whether one item of a `path` option names a hub repository (not a local path)."""
    return (
        not isinstance(item, Path)
        and not Path(item).expanduser().exists()
        and not looks_local(str(item))
    )


def path_specs(
    dataset: str, path: PathSpec, revision: str | dict | None
) -> list[str | Path | HubRepo]:
    """The items of a `path` option: local files and folders as they are, hub names as
    `HubRepo`s at `revision` (one commit, or {repo: commit}); a hub name needs one."""
    items = [path] if isinstance(path, str | Path) else list(path or [])
    specs: list[str | Path | HubRepo] = []
    for item in items:
        if not is_hub_name(item):
            local = Path(item).expanduser()
            if not local.exists():
                raise FileNotFoundError(f"{dataset}: {item} does not exist")
            specs.append(local)
            continue
        rev = revision.get(str(item)) if isinstance(revision, dict) else revision
        if rev is None:
            raise InputError(
                f"{dataset}: hub repository {item} needs a commit: set "
                f"data.options.{dataset}.revision"
            )
        specs.append(HubRepo(dataset, str(item), rev))
    return specs


def open_segments(
    dataset: str,
    spec: str | Path | HubRepo,
    *,
    config: str | None,
    hub_split: str | None,
    cache_dir: str | None,
    hub_kwargs: dict | None,
    label: str | None = None,
) -> list[RawSegment]:
    """The segments of one item: a file, every data file of a folder (sorted, labelled by
    relative path), or a hub snapshot (labelled `label`, else its name and config)."""
    if isinstance(spec, HubRepo):
        return _read_snapshot(dataset, spec, config, hub_split, cache_dir, hub_kwargs, label)
    local = Path(spec).expanduser()
    if not local.exists():
        raise FileNotFoundError(f"{dataset}: {spec} does not exist")
    if local.is_file():
        return [_read_file(local, local.stem, cache_dir)]
    files = sorted(
        f for f in local.rglob("*") if f.is_file() and f.suffix.lower() in LOCAL_SUFFIXES
    )
    if not files:
        raise FileNotFoundError(f"{dataset}: no {'/'.join(LOCAL_SUFFIXES)} files in {local}")
    return [
        _read_file(f, f.relative_to(local).with_suffix("").as_posix(), cache_dir) for f in files
    ]


def _read_file(path: Path, label: str, cache_dir: str | None) -> RawSegment:
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return RawSegment(label, str(path), _JsonlTable(path))
    if suffix == ".json":
        try:
            with open(path, encoding="utf-8") as handle:
                value = json.load(handle)
        except (json.JSONDecodeError, UnicodeDecodeError):
            # JSONL content in a .json file (BFCL's files): read it line by line.
            return RawSegment(label, str(path), _JsonlTable(path))
        rows = value if isinstance(value, list) else [value]
        return RawSegment(label, str(path), rows)
    import datasets  # heavy import, only when a parquet/csv file is read

    kind = {".parquet": "parquet", ".csv": "csv"}[suffix]
    table = datasets.load_dataset(kind, data_files=str(path), split="train", cache_dir=cache_dir)
    return RawSegment(label, str(path), table, arrow=True)


def _read_snapshot(
    dataset: str,
    source: HubRepo,
    config: str | None,
    hub_split: str | None,
    cache_dir: str | None,
    hub_kwargs: dict | None,
    label: str | None,
) -> list[RawSegment]:
    """A hub source from its snapshot (`hub.snapshot`): its `files` read as local files, or
    the whole snapshot through `datasets` and the repository's README configs."""
    folder = snapshot(source)
    label = label or (f"{source.repo}/{config}" if config else source.repo)
    if source.files is not None:
        return [
            _read_file(folder / f, f"{label}/{Path(f).with_suffix('').as_posix()}", cache_dir)
            for f in source.files
        ]
    import datasets

    loaded = datasets.load_dataset(
        str(folder), config, split=hub_split, cache_dir=cache_dir, **(hub_kwargs or {})
    )
    if isinstance(loaded, datasets.DatasetDict):
        if len(loaded) != 1:
            raise InputError(
                f"{dataset}: hub dataset {source.repo} has splits {sorted(loaded)}; pass hub_split="
            )
        loaded = next(iter(loaded.values()))
    origin = f"hub:{source.describe()}" + (f"/{config}" if config else "")
    return [RawSegment(label, origin, loaded, arrow=True)]


# ===== The pipeline =============================================================================

Keep = Callable[[dict], str | None]
Convert = Callable[[dict, RowContext], dict]


class LoadRun:
    """Filter -> split -> subsample -> convert over one source, recording exclusions.

    A raw row that cannot be read or converted raises a RowError naming it when `strict`,
    else is counted as an exclusion.
    """

    def __init__(self, name: str, source: RawSource, strict: bool) -> None:
        self.name = name
        self.source = source
        self.strict = strict
        self.excluded: Counter[str] = Counter()

    def fail(self, i: int, problem: str) -> None:
        """Raw row `i` cannot be used: a RowError when strict, else a counted exclusion."""
        if self.strict:
            raise self.source.error(i, problem)
        self.excluded[f"unconvertible raw row ({problem[:80]})"] += 1
        logger.debug("%s", self.source.error(i, problem))

    def filter(self, keep: Keep | None, columns: Sequence[str] | None = None) -> list[int]:
        """The positions `keep` keeps (None: all), counting the reasons of the others;
        `columns` are the raw fields `keep` reads."""
        if keep is None:
            return list(range(len(self.source)))
        kept = []
        for i, raw in self.source.iter_rows(columns):
            if isinstance(raw, BadRawRow):
                self.fail(i, str(raw))
                continue
            try:
                reason = keep(raw)
            except (BadRawRow, KeyError, TypeError, ValueError, AttributeError) as err:
                self.fail(i, _describe(err))
                continue
            if reason is None:
                kept.append(i)
            else:
                self.excluded[reason] += 1
        if not kept and self.excluded:
            # Every row excluded by a rule is a wrong source or filter, never an empty split.
            reasons = "; ".join(f"{k}: {v}" for k, v in self.excluded.most_common(3))
            raise RowError(
                f"{self.name}: all {sum(self.excluded.values())} raw rows were excluded "
                f"({reasons}); check the source's format and the loader options"
            )
        return kept

    def convert(self, positions: list[int], convert: Convert) -> list[dict]:
        """The canonical rows `convert` makes of the raw rows at `positions`."""
        rows = []
        for i in positions:
            try:
                rows.append(convert(self.source.row(i), self.source.ctx(i)))
            except (BadRawRow, KeyError, TypeError, ValueError, AttributeError) as err:
                self.fail(i, _describe(err))
        return rows

    def report(self, returned: int) -> None:
        """Record the exclusions of this load and log them (a warning) if there are any."""
        EXCLUSIONS[self.name] = dict(self.excluded)
        if self.excluded:
            total = sum(self.excluded.values())
            details = "; ".join(f"{k}: {v}" for k, v in sorted(self.excluded.items()))
            logger.warning(
                "%s: excluded %d raw rows, returned %d rows: %s",
                self.name,
                total,
                returned,
                details,
            )

    def finish(
        self, positions: Sequence[int], n: int | None, seed: int, convert: Convert
    ) -> list[dict]:
        """Subsample `positions`, convert them and report: the last stages of every loader."""
        rows = self.convert(subsample(positions, n, seed), convert)
        self.report(len(rows))
        return rows


def _describe(err: Exception) -> str:
    if isinstance(err, KeyError):
        return f"missing field {err.args[0]!r}"
    if isinstance(err, BadRawRow):
        return str(err)
    return f"{type(err).__name__}: {err}"


def holdout_split(
    positions: Sequence[int], part: str, fraction: float, split_seed: int
) -> list[int]:
    """The `part` ("train" or "test") of a held-out split of `positions`, in source order.

    Same permutation as ``datasets.Dataset.train_test_split(test_size=fraction,
    seed=split_seed)``: the first ceil(fraction * N) permuted rows are the test part.
    """
    import numpy as np

    if part not in ("train", "test"):
        raise ValueError(f"part must be 'train' or 'test', got {part!r}")
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"test fraction must be in (0, 1), got {fraction}")
    total = len(positions)
    if total == 0:
        return []
    n_test = math.ceil(fraction * total)
    permutation = np.random.default_rng(split_seed).permutation(total)
    chosen = permutation[:n_test] if part == "test" else permutation[n_test:]
    return [positions[k] for k in sorted(int(k) for k in chosen)]


def subsample(positions: Sequence[int], n: int | None, seed: int) -> list[int]:
    """At most `n` of `positions`, drawn with `random.Random(seed)`, kept in source order."""
    if n is None or n >= len(positions):
        return list(positions)
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    chosen = random.Random(seed).sample(range(len(positions)), n)
    return [positions[k] for k in sorted(chosen)]


# ===== Helpers ==================================================================================


def required_text(value: Any, what: str) -> str:
    """`value` as stripped text (a number is written as text); `BadRawRow` naming `what` when
    it is missing, empty or not text."""
    if value is None:
        raise BadRawRow(f"missing {what}")
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise BadRawRow(f"{what} must be text, got {type(value).__name__}")
    text = str(value).strip()
    if not text:
        raise BadRawRow(f"empty {what}")
    return text


def first_present(raw: dict, keys: Sequence[str]) -> Any:
    """The value of the first of `keys` that `raw` holds and is not None (None if none is):
    the one field of a dataset published under several names."""
    for key in keys:
        if raw.get(key) is not None:
            return raw[key]
    return None


def content_digest(*parts: str) -> str:
    """A 16-hex-digit hash of `parts`: the row key of a dataset that has no ids of its own."""
    return hashlib.sha1("\x1f".join(parts).encode("utf-8")).hexdigest()[:16]


def slug(text: str) -> str:
    """`text` with every run of characters other than letters, digits, `.`, `_`, `-` made one
    `_` (none kept at either end): a dataset's own id as the key of a row id."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "_"


def drop_none(value: Any) -> Any:
    """Remove the None-valued keys Arrow adds when it unifies nested object schemas."""
    if isinstance(value, dict):
        return {k: drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [drop_none(v) for v in value]
    return value


def last_user_text(messages: list, what: str, missing: str) -> str:
    """The text of the last user message in `messages`; `BadRawRow(missing)` if there is none."""
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    if not users:
        raise BadRawRow(missing)
    return required_text(users[-1].get("content"), what)


def duplicate_reason(seen: dict[str, str], key: str, answer: str, what: str) -> str | None:
    """None the first time `key` is seen (recording its answer), else the exclusion reason."""
    if key not in seen:
        seen[key] = answer
        return None
    if seen[key] != answer:
        return f"duplicate {what} with a different answer (first kept)"
    return f"duplicate {what}"


def chat_prompt(system: str | None, user: str) -> list[dict]:
    """The chat messages of a prompt: the system message (when there is one), then `user`."""
    messages = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": user})
    return messages


def canonical_row(
    name: str, domain: str, key: str, prompt: list[dict], answer: str, meta: dict
) -> dict:
    """A canonical row (`cptlab.rows`) of benchmark `name`, with id ``<name>-<key>``."""
    return {
        "id": f"{name}-{key}",
        "domain": domain,
        "benchmark": name,
        "prompt": prompt,
        "answer": answer,
        "metadata": meta,
    }


def options_text(options: Sequence[str], style: str = "{letter}. {text}") -> str:
    """The options of a multiple-choice question, one line each, lettered A, B, ... in order."""
    return "\n".join(style.format(letter=LETTERS[i], text=o) for i, o in enumerate(options))


def json_value(value: Any, what: str) -> Any:
    """`value` itself, or parsed if it is a JSON string."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as err:
            raise BadRawRow(f"{what} is not valid JSON ({err.msg})") from None
    return value


def check_sample_size(n: int | None) -> None:
    """Reject a subsample size `n` that is neither None nor a non-negative int."""
    if n is not None and (not isinstance(n, int) or n < 0):
        raise InputError(f"n must be a non-negative int or None, got {n!r}")
