"""The map of the package stays true. It is in the code: `src/cptlab/__init__.py`'s docstring
names every shared module and subpackage, and each package's `__init__` docstring every module
and subpackage of that package. A module is named by its file name (`spec.py`, or `spec` in
backquotes) and a subpackage by its folder (`embedded/`). The modules are read from the file
system, so a new module fails here until its package's docstring names it, and a docstring whose
list names a module the package no longer has fails too.

docs/design.md keeps what is not a module list: one row per package of its "Module map" table,
and every `cptlab` subcommand.
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


def listed_in_docstring(package: str) -> set[str]:
    """The modules the package docstring's list names: lines that start with `name.py`."""
    return {m.group(1) for m in re.finditer(r"^(\w+\.py)\s", docstring(package), re.M)}


@pytest.mark.parametrize("package", packages(), ids=lambda p: p or "cptlab")
def test_every_module_is_named_in_its_package_docstring(package):
    missing = [m for m in members(package) if not names(docstring(package), m)]
    where = Path("src/cptlab", package, "__init__.py")
    assert not missing, f"{where}'s docstring does not name {missing}"


@pytest.mark.parametrize("package", packages(), ids=lambda p: p or "cptlab")
def test_no_docstring_lists_a_module_that_is_gone(package):
    gone = sorted(listed_in_docstring(package) - set(members(package)))
    assert not gone, f"src/cptlab/{package}/__init__.py's list names {gone}, which it does not have"


def test_design_md_has_a_row_for_each_top_level_package():
    text = DESIGN.read_text()
    section = text.split("\n## Module map\n", 1)[1].split("\n## ", 1)[0]
    rows = set(re.findall(r"^\|\s*`([\w/]+)/`\s*\|", section, re.M))
    assert rows == {"cptlab"} | {p for p in packages() if p and "/" not in p}


def test_every_subcommand_is_named_in_design_md():
    for module in cli.COMMAND_MODULES:
        importlib.import_module(module)
    text = DESIGN.read_text()
    missing = sorted(name for name in cli.COMMANDS if f"`{name}`" not in text)
    assert not missing, f"docs/design.md does not name the subcommands {missing}"
