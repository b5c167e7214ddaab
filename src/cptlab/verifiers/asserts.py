"""Assert-style unit tests, split so that the program under test never sees what it is
compared against.

A test such as `assert add(1, 2) == 3` is cut in two:

    probe  `add(1, 2)`        evaluated in the sandbox, after the solution, and sent back as
                              plain data (encode_value / decode_value)
    check  `__probe_0__ == 3` evaluated here, on the decoded value

The sandboxed process holds the solution and the probes only: no expected value, no comparison,
no verdict. Whatever it prints, patches or forges, it can only choose the values its probes
return, which is what solving the task means; an object with a rigged `__eq__` is not plain
data and fails its test.

A probe is the largest expression around a name the solution defines that is a call, an
attribute or a subscript of it (`Solution().two_sum(nums, 9)[0]`), or the only argument of a
pure builtin such as `list` or `sorted` (so that a returned generator is materialised in the
sandbox). Names the test binds itself (imports, assignments, a HumanEval `check(candidate)`,
which is inlined with `candidate` replaced by the function it is called with) are evaluated here.
A test whose solution calls depend on the test's own variables (a loop over inputs, a
comprehension) cannot be split; `split_tests` raises UnsupportedTest and the verifier scores 0
with that reason rather than running expected values next to the program.
"""

from __future__ import annotations

import ast
import builtins
import copy
import functools
import importlib
import math
from dataclasses import dataclass
from types import CodeType
from typing import Any

# Modules a test may import or use by name; they are imported here, in the trainer.
TEST_MODULES = frozenset(
    {
        "math", "cmath", "re", "string", "collections", "itertools", "functools", "heapq",
        "bisect", "operator", "statistics", "fractions", "decimal", "copy", "json", "typing",
    }
)  # fmt: skip
# Builtins whose only argument may be a probe: they turn a returned iterator into data.
PURE_WRAPPERS = frozenset(
    {"list", "tuple", "set", "frozenset", "sorted", "dict", "str", "len", "sum", "min", "max"}
)
BUILTIN_NAMES = frozenset(dir(builtins))
MAX_DEPTH = 64  # nesting of an encoded value


class UnsupportedTest(ValueError):
    """A test whose solution calls cannot be separated from its expected values."""


@dataclass(frozen=True)
class SplitTest:
    """One test: its text (for feedback), the probes it needs (indices into the run's probe
    list) and the check, compiled, that runs here with `__probe_<i>__` bound."""

    source: str
    probes: tuple[int, ...]
    check: CodeType


def split_tests(tests: list[str]) -> tuple[list[str], list[SplitTest]]:
    """(probe expressions in evaluation order, one SplitTest per test). A row's tests are split
    once: every rollout of the row reuses the result."""
    probes, split = _split(tuple(tests))
    return list(probes), list(split)


@functools.lru_cache(maxsize=4096)
def _split(tests: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[SplitTest, ...]]:
    probes: list[str] = []
    split = []
    for test in tests:
        try:
            module = ast.parse(test)
        except SyntaxError as err:
            raise UnsupportedTest(f"the test does not parse: {err.msg}") from None
        module = _inline_check(module)
        names = _solution_names(module)
        found = _probe_nodes(module, names)
        first = len(probes)
        replaced = _Replace({id(node): first + i for i, node in enumerate(found)}).visit(module)
        for node in found:
            probes.append(ast.unparse(node))
        ast.fix_missing_locations(replaced)
        code = compile(replaced, "<test>", "exec")
        split.append(SplitTest(test, tuple(range(first, len(probes))), code))
    return tuple(probes), tuple(split)


def _inline_check(module: ast.Module) -> ast.Module:
    """HumanEval's `def check(candidate): ...` + `check(fn)`: the body, with fn for the
    argument (its asserts then name the solution's function directly)."""
    defs = {
        node.name: node
        for node in module.body
        if isinstance(node, ast.FunctionDef) and len(node.args.args) == 1
    }

    def check_call(node: ast.stmt) -> ast.Call | None:
        call = node.value if isinstance(node, ast.Expr) else None
        if (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name)
            and call.func.id in defs
            and len(call.args) == 1
            and isinstance(call.args[0], ast.Name)
            and not call.keywords
        ):
            return call
        return None

    inlined = {call.func.id for node in module.body if (call := check_call(node))}
    body = []
    for node in module.body:
        if (call := check_call(node)) is not None:
            function = defs[call.func.id]
            param, target = function.args.args[0].arg, call.args[0].id
            body += [_Rename(param, target).visit(copy.deepcopy(s)) for s in function.body]
        elif not (isinstance(node, ast.FunctionDef) and node.name in inlined):
            body.append(node)  # a helper the test defines stays, and runs here
    return ast.Module(body=body, type_ignores=[])


def _bound_names(tree: ast.AST) -> set[str]:
    """Names the test binds itself, anywhere (assignments, imports, loops, functions,
    parameters, comprehension variables)."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            bound.add(node.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                if not isinstance(node, ast.ImportFrom):
                    _check_module(alias.name)
                bound.add((alias.asname or alias.name).split(".")[0])
            if isinstance(node, ast.ImportFrom):
                _check_module(node.module or "")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return bound


def _check_module(name: str) -> None:
    if name.split(".")[0] not in TEST_MODULES:
        raise UnsupportedTest(f"the test imports {name!r}, not among {sorted(TEST_MODULES)}")


def _solution_names(module: ast.Module) -> set[str]:
    """Free names of the test that only the solution can define."""
    bound = _bound_names(module)
    free = {n.id for n in ast.walk(module) if isinstance(n, ast.Name)}
    return free - bound - BUILTIN_NAMES - TEST_MODULES


def _probe_nodes(module: ast.Module, names: set[str]) -> list[ast.expr]:
    """The outermost probe around each use of a solution name, in source order."""
    parents = {id(child): node for node in ast.walk(module) for child in ast.iter_child_nodes(node)}
    local = _bound_names(module)
    found: dict[int, ast.expr] = {}
    for node in ast.walk(module):
        if not (isinstance(node, ast.Name) and node.id in names):
            continue
        top: ast.expr = node
        while (parent := parents.get(id(top))) is not None and _extends(parent, top):
            top = parent
        found[id(top)] = top
    outer = [n for n in found.values() if not any(_inside(n, o) for o in found.values())]
    for node in outer:
        used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        depends = (used - _bound_names(node)) & local  # a comprehension inside is its own
        if depends:
            raise UnsupportedTest(
                f"`{ast.unparse(node)[:80]}` depends on the test's own {sorted(depends)}"
            )
    return sorted(outer, key=lambda n: (n.lineno, n.col_offset))


def _extends(parent: ast.AST, child: ast.expr) -> bool:
    """Whether the probe grows from `child` to `parent`."""
    if isinstance(parent, ast.Call):
        if parent.func is child:
            return True
        return (
            isinstance(parent.func, ast.Name)
            and parent.func.id in PURE_WRAPPERS
            and parent.args == [child]
            and not parent.keywords
        )
    return isinstance(parent, ast.Attribute | ast.Subscript) and parent.value is child


def _inside(node: ast.AST, other: ast.AST) -> bool:
    return node is not other and any(n is node for n in ast.walk(other))


class _Replace(ast.NodeTransformer):
    """Probes become `__probe_<i>__`; asserts become explicit raises (they must hold under
    `python -O` too)."""

    def __init__(self, index: dict[int, int]) -> None:
        self.index = index

    def visit(self, node: ast.AST) -> ast.AST:
        if id(node) in self.index:
            name = ast.Name(f"__probe_{self.index[id(node)]}__", ast.Load())
            return ast.copy_location(name, node)
        return super().visit(node)

    def visit_Assert(self, node: ast.Assert) -> ast.If:
        node = self.generic_visit(node)
        failure = ast.Call(
            ast.Name("AssertionError", ast.Load()), [node.msg] if node.msg else [], []
        )
        raise_it = ast.Raise(exc=failure, cause=None)
        return ast.copy_location(ast.If(ast.UnaryOp(ast.Not(), node.test), [raise_it], []), node)


class _Rename(ast.NodeTransformer):
    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new

    def visit_Name(self, node: ast.Name) -> ast.Name:
        return (
            ast.copy_location(ast.Name(self.new, node.ctx), node) if node.id == self.old else node
        )


# ----- values across the sandbox boundary ------------------------------------------------------

# The sandbox side of the codec, as source for the harness (cptlab.verifiers.code): only exact
# built-in types are data; anything else (a subclass, an object with its own __eq__) becomes
# ["?", type name], which equals nothing here.
ENCODER = """
def _encoder():
    kinds = {type(None): "N", bool: "b", int: "i", float: "f", complex: "c", str: "s",
             bytes: "y", list: "l", tuple: "t", set: "S", frozenset: "F", dict: "d"}
    typ, rep, text, items = type, repr, str, dict.items

    def encode(value, depth=0):
        kind = kinds.get(typ(value))
        if kind is None or depth > MAX_DEPTH:
            return ["?", text(typ(value).__name__)[:60]]
        if kind == "N":
            return ["N"]
        if kind in "bi":
            return [kind, rep(int.__int__(value))]
        if kind == "f":
            return ["f", rep(float.__float__(value))]
        if kind == "c":
            return ["c", rep(value.real), rep(value.imag)]
        if kind in "sy":
            return [kind, value if kind == "s" else bytes.hex(value)]
        if kind == "d":
            return ["d", [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in items(value)]]
        return [kind, [encode(v, depth + 1) for v in value]]

    return encode
""".replace("MAX_DEPTH", str(MAX_DEPTH))


class Unserializable:
    """A value that was not plain data in the sandbox: it equals nothing and has no truth."""

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name

    def __eq__(self, other: object) -> bool:
        return False

    def __ne__(self, other: object) -> bool:
        return True

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        raise TypeError(f"a {self.type_name} is not plain data")

    def __repr__(self) -> str:
        return f"<{self.type_name}, not plain data>"


def decode_value(data: Any, depth: int = 0) -> Any:
    """The value of an encoded probe result; ValueError when it is not an encoding."""
    if not isinstance(data, list) or not data or not isinstance(data[0], str) or depth > MAX_DEPTH:
        raise ValueError("not an encoded value")
    kind, rest = data[0], data[1:]
    if kind == "N":
        return None
    if kind == "?":
        return Unserializable(str(rest[0]) if rest else "object")
    if kind == "b":
        return bool(int(rest[0]))
    if kind == "i":
        return int(rest[0])
    if kind == "f":
        return float(rest[0])
    if kind == "c":
        return complex(float(rest[0]), float(rest[1]))
    if kind == "s" and isinstance(rest[0], str):
        return rest[0]
    if kind == "y":
        return bytes.fromhex(rest[0])
    if kind == "d":
        return {decode_value(k, depth + 1): decode_value(v, depth + 1) for k, v in rest[0]}
    containers = {"l": list, "t": tuple, "S": set, "F": frozenset}
    if kind in containers and isinstance(rest[0], list):
        return containers[kind](decode_value(v, depth + 1) for v in rest[0])
    raise ValueError(f"unknown encoding {kind!r}")


def check_namespace(probe_values: dict[int, Any]) -> dict[str, Any]:
    """The globals a check runs with: builtins, the test modules it may name, the probes."""
    namespace: dict[str, Any] = {"__builtins__": builtins, "math": math}
    for name in TEST_MODULES:
        namespace.setdefault(name, importlib.import_module(name))
    namespace.update({f"__probe_{i}__": value for i, value in probe_values.items()})
    return namespace
