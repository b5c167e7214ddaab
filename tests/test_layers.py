"""Imports point one way: no import cycle between cptlab's packages and shared modules, and each
package imports only the packages below it, in the order docs/design.md states."""

from __future__ import annotations

import graphlib
import re
from collections import defaultdict
from pathlib import Path

from cptlab.provenance import SourceTree

DESIGN = Path(__file__).resolve().parents[1] / "docs" / "design.md"


def package_layers() -> list[str]:
    text = " ".join(DESIGN.read_text().split())
    found = re.search(r"Package layers, lowest first: ([\w, ]+)\.", text)
    assert found, "docs/design.md states no package layers"
    return [name.strip() for name in found.group(1).split(",")]


def import_graph(tree: SourceTree, packages: list[str]) -> dict[str, dict[str, list[str]]]:
    """node -> imported node -> the module imports behind that edge. A node is a package, the
    command layer (every package's cli.py), or a shared module at the top of cptlab."""

    def node(module: str) -> str:
        parts = module.split(".")
        if len(parts) > 1 and parts[1] in packages:
            return "commands" if parts[2:] == ["cli"] else parts[1]
        return module

    graph: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for module, syntax in tree.trees.items():
        for imported in sorted(tree.imports([syntax], module)):
            if node(imported) != node(module):
                graph[node(module)][node(imported)].append(f"{module} -> {imported}")
    return graph


def cycle(graph: dict[str, dict[str, list[str]]]) -> list[str] | None:
    """One import cycle of `graph` as its nodes, first and last the same, or None."""
    try:
        imports = {node: set(targets) for node, targets in graph.items()}
        graphlib.TopologicalSorter(imports).prepare()
    except graphlib.CycleError as err:
        return list(reversed(err.args[1]))  # graphlib lists a cycle against the edges' direction
    return None


def test_the_layers_name_every_package():
    tree = SourceTree()
    packages = {name.split(".")[1] for name in tree.files if name.count(".") >= 2}
    assert sorted(package_layers()) == sorted(packages)


def test_no_import_cycle():
    graph = import_graph(SourceTree(), package_layers())
    found = cycle(graph)
    edges = [graph[a][b][0] for a, b in zip(found, found[1:], strict=False)] if found else []
    assert found is None, f"import cycle {' -> '.join(found)}: {edges}"


def test_each_package_imports_only_the_packages_below_it():
    layers = package_layers()
    graph = import_graph(SourceTree(), layers)
    upward = [
        edge
        for source in layers
        for target, edges in graph[source].items()
        if target in layers and layers.index(target) > layers.index(source)
        for edge in edges
    ]
    assert upward == []


def test_the_check_sees_a_cycle_and_an_upward_import(tmp_path):
    """The positive control: a package that imports one above it, which imports it back."""
    for name, text in {
        "__init__.py": "",
        "low/__init__.py": "",
        "low/a.py": "def f():\n    from cptlab.high import b\n",
        "high/__init__.py": "",
        "high/b.py": "from cptlab.low import a\n",
        "high/cli.py": "from cptlab.low import a\n",
    }.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    graph = import_graph(SourceTree(tmp_path), ["low", "high"])
    assert cycle(graph) in (["low", "high", "low"], ["high", "low", "high"])
    assert graph["low"]["high"] == ["cptlab.low.a -> cptlab.high", "cptlab.low.a -> cptlab.high.b"]
    assert "commands" in graph and "commands" not in graph["low"]
