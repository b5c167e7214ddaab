"""The canonical row schema shared by every domain, synthetic or real.

A row is a plain dict so it round-trips through JSONL and HF `datasets` unchanged:

    id        str   unique within its benchmark, stable across runs with the same seed
    domain    str   the domain it belongs to (math, science, tool, code, logic, knowledge)
    benchmark str   the registry name of the benchmark/split that produced it
    prompt    list  chat messages [{"role": "system"|"user", "content": str}, ...]
    answer    str   the reference answer, in the form the verifier expects
    metadata  dict  verifier extras (unit tests, options, schemas) and, for synthetic rows,
                    "solution": a gold completion used for the base model's warm-up
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from cptlab.errors import InputError

REQUIRED_KEYS = ("id", "domain", "benchmark", "prompt", "answer", "metadata")
ROLES = ("system", "user", "assistant")


class RowError(InputError):
    """A row breaks the canonical schema; the message names the row and the problem."""


def validate_row(row: Any, where: str = "row") -> dict:
    """Return `row` if it follows the canonical schema, else raise RowError naming the problem.

    `where` locates the row for the message (for example "data/math_train.jsonl:17").
    """
    if not isinstance(row, dict):
        raise RowError(f"{where}: expected an object, got {type(row).__name__}")
    missing = [key for key in REQUIRED_KEYS if key not in row]
    if missing:
        raise RowError(f"{where} (id={row.get('id')!r}): missing key(s) {missing}")
    rid = row["id"]
    label = f"{where} (id={rid!r})"
    for key in ("id", "domain", "benchmark", "answer"):
        if not isinstance(row[key], str):
            raise RowError(f"{label}: '{key}' must be a string, got {type(row[key]).__name__}")
    if not rid.strip():
        raise RowError(f"{label}: empty 'id'")
    if not row["answer"].strip():
        raise RowError(f"{label}: empty reference 'answer'")
    prompt = row["prompt"]
    if not isinstance(prompt, list) or not prompt:
        raise RowError(f"{label}: 'prompt' must be a non-empty list of chat messages")
    for i, message in enumerate(prompt):
        if not isinstance(message, dict) or set(message) != {"role", "content"}:
            raise RowError(f"{label}: prompt[{i}] must be {{'role', 'content'}}")
        if message["role"] not in ROLES:
            raise RowError(f"{label}: prompt[{i}] has unknown role {message['role']!r}")
        if not isinstance(message["content"], str):
            raise RowError(f"{label}: prompt[{i}].content must be a string")
    if not any(m["role"] == "user" and m["content"].strip() for m in prompt):
        raise RowError(f"{label}: 'prompt' has no non-empty user message")
    if not isinstance(row["metadata"], dict):
        raise RowError(f"{label}: 'metadata' must be an object")
    return row


def read_jsonl(path: str | Path) -> list[dict]:
    """Read and validate a JSONL file of rows; errors name the file and line."""
    path = Path(path)
    rows = []
    with open(path, "rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            where = f"{path}:{lineno}"
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise RowError(
                    f"{where}: invalid UTF-8 ({err.reason} at byte {err.start})"
                ) from err
            if not text.strip():
                continue
            try:
                row = json.loads(text)
            except json.JSONDecodeError as err:
                raise RowError(f"{where}: invalid JSON ({err.msg})") from err
            rows.append(validate_row(row, where))
    return rows


def iter_jsonl_text(rows: Iterable[dict]) -> Iterator[str]:
    for row in rows:
        yield json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n"
