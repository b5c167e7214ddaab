"""Atomic artifact writing: data goes to a temporary name then is renamed; a manifest written
last marks a folder as complete."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from cptlab.errors import InputError

MANIFEST = "manifest.json"


def atomic_write_text(path: str | Path, text: str | Iterable[str]) -> Path:
    """Write text (or an iterable of chunks) to `path` atomically (temp file + rename)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as err:
        raise OSError(err.errno, f"cannot write {path}: {err.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            if isinstance(text, str):
                handle.write(text)
            else:
                handle.writelines(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(err, OSError):  # a full disk, a folder turned read-only: name the file
            raise OSError(err.errno, f"cannot write {path}: {err.strerror}") from None
        raise
    return path


def atomic_write_json(path: str | Path, obj: Any) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def write_manifest(folder: str | Path, info: dict) -> Path:
    """Write `manifest.json` into `folder`; call it last, after every other file is in place."""
    return atomic_write_json(Path(folder) / MANIFEST, info)


def read_manifest(folder: str | Path) -> dict:
    path = Path(folder) / MANIFEST
    if not path.exists():
        raise FileNotFoundError(f"{folder}: no {MANIFEST}; the artifact is incomplete")
    return json.loads(path.read_text())


def read_json_lines(path: str | Path) -> list[dict]:
    """The JSON objects of a JSONL file (blank lines skipped); errors name the file and line."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    records = []
    with open(path, encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise InputError(f"{path}:{lineno}: invalid JSON ({err.msg})") from None
            if not isinstance(record, dict):
                raise InputError(
                    f"{path}:{lineno}: expected an object, got {type(record).__name__}"
                )
            records.append(record)
    return records
