"""config/README.md, written from the config schema: every key with its type, default and
description, section by section (`cptlab config-reference --out config/README.md`; a test
checks that the file in the repository is current)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cptlab.cli import arg, command

HEADER = """# Configuration reference

Written by `cptlab config-reference --out config/README.md` from the config schema: the
sections written out in `src/cptlab/schemas/config.schema.yaml`, and those the settings
dataclasses state (`base`, `evaluation`, `drift`, `methods`, `training`: each key's type, default
and accepted values on its field, its description in its class docstring). Edit those, not this
file. Unknown keys are errors.

A config may start with `extends: <file>` (a path relative to it): the file's keys are merged
over that parent's, mappings key by key and anything else (lists included) replaced, so an
overlay states only what it changes (`config/learning.yaml`). `snakemake --configfile` and the
`cptlab` commands resolve it the same way.
"""


def _type(spec: dict, defs: dict) -> str:
    if "$ref" in spec:
        return "mapping (" + spec["$ref"].rsplit("/", 1)[-1] + ")"
    if "enum" in spec:
        return " \\| ".join(f"`{v}`" for v in spec["enum"])
    kind = spec.get("type", "any")
    kinds = kind if isinstance(kind, list) else [kind]
    names = {"object": "mapping", "array": "list", "number": "number", "null": "null"}
    return " or ".join(names.get(k, k) for k in kinds)


def _default(spec: dict) -> str:
    if "default" not in spec:
        return ""
    return "`" + json.dumps(spec["default"], ensure_ascii=False) + "`"


def _text(value: str) -> str:
    return " ".join(value.split()).replace("|", "\\|")


def _rows(prefix: str, spec: dict, defs: dict, out: list[str]) -> None:
    properties = spec.get("properties", {})
    for key, child in properties.items():
        path = f"{prefix}.{key}" if prefix else key
        required = key in spec.get("required", [])
        name = f"`{path}`" + (" (required)" if required else "")
        out.append(
            f"| {name} | {_type(child, defs)} | {_default(child)} | "
            f"{_text(child.get('description', ''))} |"
        )
        _rows(path, child, defs, out)  # a $ref's keys are listed once, in its own section
        extra = child.get("additionalProperties")
        if isinstance(extra, dict) and extra.get("properties"):
            _rows(f"{path}.<name>", extra, defs, out)


def reference(schema: dict) -> str:
    """The markdown reference of `schema`: one table per top-level section."""
    defs = schema.get("$defs", {})
    parts = [HEADER]
    for key, spec in schema["properties"].items():
        required = " (required)" if key in schema.get("required", []) else ""
        parts.append(f"\n## `{key}`{required}\n\n{_text(spec.get('description', ''))}\n")
        rows: list[str] = []
        _rows(key, spec, defs, rows)
        extra = spec.get("additionalProperties")
        if isinstance(extra, dict) and extra.get("properties"):
            _rows(f"{key}.<name>", extra, defs, rows)
        if rows:
            parts.append("| key | type | default | description |\n|---|---|---|---|")
            parts.append("\n".join(rows))
    for name, spec in defs.items():
        parts.append(f"\n## `<{name}>`\n\n{_text(spec.get('description', ''))}\n")
        rows = []
        _rows(f"<{name}>", spec, defs, rows)
        parts.append("| key | type | default | description |\n|---|---|---|---|")
        parts.append("\n".join(rows))
    return "\n".join(parts).rstrip() + "\n"


@command(
    "config-reference",
    "write the configuration reference (config/README.md) from the schema",
    arg("--out", default=None, help="output file (default: standard output)"),
)
def config_reference(args: argparse.Namespace) -> None:
    from cptlab.validation import schema

    text = reference(schema())
    if args.out:
        Path(args.out).write_text(text)
    else:
        print(text, end="")
