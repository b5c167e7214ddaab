"""The maps of the package stay true: every module is named in its package's docstring, in the
module map of docs/design.md and in the README's layout, and every `cptlab` subcommand is named
in docs/design.md.

A module is named by its file name (`spec.py`, or `spec` in backquotes) and a subpackage by its
folder (`embedded/`), in the text that describes its package:
  docstring  the package's `__init__` docstring (the top-level modules: `cptlab/__init__.py`'s);
  design.md  the row of the table under "## Module map" whose first cell is the package's path
             (`cptlab/` for the top level, `train/`, `domains/embedded/`); a subpackage is
             named by having a row;
  README     the package's entry in the code block under "## Layout": the line under
             `src/cptlab/` that starts with its path, and the more indented lines below it (a
             top-level module or package is an entry of its own).
The modules are read from the file system, so a new module fails here until it is documented,
and a map that names a module the package no longer has fails too.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from cptlab import cli

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "cptlab"
DESIGN = ROOT / "docs" / "design.md"
README = ROOT / "README.md"


def packages() -> list[str]:
    """Every package under src/cptlab/, as its path relative to it ("" for the top level)."""
    found = sorted(p.parent.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("__init__.py"))
    return ["" if p == "." else p for p in found]


def members(package: str) -> list[str]:
    """The modules (`spec.py`) and subpackages (`embedded/`) of `package`."""
    folder = PACKAGE / package
    modules = [p.name for p in sorted(folder.glob("*.py")) if p.name != "__init__.py"]
    subpackages = [p.parent.name + "/" for p in sorted(folder.glob("*/__init__.py"))]
    return modules + subpackages


def names(text: str, member: str) -> bool:
    """Whether `text` names `member` (`spec.py` or `spec` in backquotes; `embedded/`)."""
    if member.endswith("/"):
        return re.search(rf"(?<![\w/.-]){re.escape(member)}", text) is not None
    stem = member.removesuffix(".py")
    return re.search(rf"(?<![\w/.-]){re.escape(member)}\b|`{re.escape(stem)}`", text) is not None


def docstring(package: str) -> str:
    return ast.get_docstring(ast.parse((PACKAGE / package / "__init__.py").read_text())) or ""


def design_rows() -> dict[str, str]:
    """The module map of docs/design.md: package path -> the text of its row."""
    text = DESIGN.read_text()
    assert "\n## Module map\n" in text, "docs/design.md has no '## Module map' section"
    section = text.split("\n## Module map\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        match = re.match(r"\|\s*`([\w/]+)/`\s*\|(.*)", line)
        if match:
            rows[match.group(1)] = match.group(2)
    return rows


def readme_entries() -> dict[str, str]:
    """The README layout's entries under `src/cptlab/`: path -> the entry's text."""
    text = README.read_text()
    section = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```", 2)[1]
    entries: dict[str, str] = {}
    inside, current = False, None
    for line in block.splitlines():
        if line.startswith("src/cptlab/"):
            inside = True
            continue
        if not inside:
            continue
        if line and not line.startswith(" "):
            break
        entry = re.match(r"  (\S+)", line)
        if entry:
            current = entry.group(1)
            entries[current] = line[len(entry.group(0)) :]
        elif current is not None:
            entries[current] += "\n" + line
    return entries


@pytest.mark.parametrize("package", packages(), ids=lambda p: p or "cptlab")
def test_every_module_is_named_in_its_package_docstring(package):
    missing = [m for m in members(package) if not names(docstring(package), m)]
    where = Path("src/cptlab", package, "__init__.py")
    assert not missing, f"{where}'s docstring does not name {missing}"


@pytest.mark.parametrize("package", packages(), ids=lambda p: p or "cptlab")
def test_every_module_is_named_in_the_module_map_of_design_md(package):
    rows = design_rows()
    key = package or "cptlab"
    assert key in rows, f"docs/design.md's module map has no row `{key}/`"
    # A subpackage is named by its own row, which its own case of this test requires.
    modules = [m for m in members(package) if not m.endswith("/")]
    missing = [m for m in modules if not names(rows[key], m)]
    assert not missing, f"docs/design.md's module map, row `{key}/`, does not name {missing}"


@pytest.mark.parametrize("package", packages(), ids=lambda p: p or "cptlab")
def test_every_module_is_named_in_the_readme_layout(package):
    entries = readme_entries()
    if package == "":
        missing = [m for m in members(package) if m not in entries]
        assert not missing, f"README's layout has no entry under src/cptlab/ for {missing}"
        return
    assert package + "/" in entries, f"README's layout has no entry {package}/ under src/cptlab/"
    missing = [m for m in members(package) if not names(entries[package + "/"], m)]
    assert not missing, f"README's layout, entry {package}/, does not name {missing}"


def test_every_subcommand_is_named_in_design_md():
    for module in cli.COMMAND_MODULES:
        importlib.import_module(module)
    text = DESIGN.read_text()
    missing = sorted(name for name in cli.COMMANDS if f"`{name}`" not in text)
    assert not missing, f"docs/design.md does not name the subcommands {missing}"


def named_modules(text: str) -> set[str]:
    """The module file names `text` mentions on their own (`spec.py`; not `train/spec.py`)."""
    return set(re.findall(r"(?<![\w/.-])(\w+\.py)\b", text))


def listed_in_docstring(package: str) -> set[str]:
    """The modules the package docstring's list names: lines that start with `name.py`."""
    return {m.group(1) for m in re.finditer(r"^(\w+\.py)\s", docstring(package), re.M)}


@pytest.mark.parametrize("package", packages(), ids=lambda p: p or "cptlab")
def test_no_map_names_a_module_that_is_gone(package):
    existing = set(members(package))
    key = package or "cptlab"
    maps = {
        f"src/cptlab/{package}/__init__.py's list": listed_in_docstring(package),
        f"docs/design.md's row `{key}/`": named_modules(design_rows()[key]),
    }
    if package:
        maps[f"README's layout, entry {package}/"] = named_modules(readme_entries()[package + "/"])
    for where, named in maps.items():
        gone = sorted(named - existing)
        assert not gone, f"{where} names {gone}, which src/cptlab/{package} does not have"
