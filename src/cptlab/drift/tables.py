"""Reading the drift analyses' inputs and writing their tables atomically.

Inputs: evaluation responses (JSONL, one item per line: {"id", "completions", "rewards",
"reasons"}), train logs (JSONL, one dict per step), canonical data rows (prompts). Every error
names the file (and line or id) so a broken artifact is found at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from cptlab.artifacts import atomic_write_json, atomic_write_text, read_json_lines
from cptlab.errors import InputError

ALL = "all"  # the benchmark name of a row pooled over every benchmark


def write_table(df: pd.DataFrame, path: str | Path, index: bool = False) -> Path:
    """Write `df` as CSV to `path` atomically (rendered to a string, then temp file + rename)."""
    return atomic_write_text(path, df.to_csv(index=index))


def write_json(obj: Any, path: str | Path) -> Path:
    """Write `obj` as indented JSON to `path` atomically."""
    return atomic_write_json(path, obj)


def read_responses(path: str | Path) -> dict[str, dict]:
    """An evaluation responses file as {id: record}, in file order.

    Each record needs a string-convertible "id" and a non-empty list of string "completions";
    "rewards" and "reasons" are optional (lists parallel to "completions"). Duplicate ids are an
    error.
    """
    path = Path(path)
    out: dict[str, dict] = {}
    for lineno, record in enumerate(read_json_lines(path), start=1):
        if "id" not in record:
            raise InputError(f"{path}: record {lineno} has no 'id'")
        rid = str(record["id"])
        completions = record.get("completions")
        if not isinstance(completions, list) or not completions:
            raise InputError(f"{path}: id {rid!r}: 'completions' must be a non-empty list")
        if not all(isinstance(c, str) for c in completions):
            raise InputError(f"{path}: id {rid!r}: every completion must be a string")
        if rid in out:
            raise InputError(f"{path}: duplicate id {rid!r}")
        out[rid] = record
    return out


def prompt_text(row: dict) -> str:
    """The text of a data row's prompt: the contents of its user messages (a plain string prompt
    is returned as is). System prompts are left out: they are shared by a whole data set and
    would only shrink the distances between data sets."""
    prompt = row.get("prompt")
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        parts = [m.get("content", "") for m in prompt if isinstance(m, dict)]
        users = [m["content"] for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
        return "\n".join(users or parts)
    raise InputError(f"row {row.get('id')!r}: 'prompt' is neither text nor chat messages")


def read_prompts(path: str | Path) -> list[str]:
    """The prompt texts of a JSONL data file (see `prompt_text`)."""
    path = Path(path)
    prompts = []
    for lineno, row in enumerate(read_json_lines(path), start=1):
        try:
            prompts.append(prompt_text(row))
        except ValueError as err:
            raise InputError(f"{path}: record {lineno}: {err}") from None
    if not prompts:
        raise InputError(f"{path}: no prompts")
    return prompts
