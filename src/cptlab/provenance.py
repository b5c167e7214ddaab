"""What a workflow job's outputs depend on, kept with the outputs so that reruns are decided from
`results/` alone, and changed only by a job that ran.

Each job has a provenance record: the settings it reads and the hash of the code it runs. The
record a finished job ran with is *committed* in `results/<experiment>/provenance/<job>.json`
(`Layout.provenance_file`), so a results folder copied to another clone (`cp -a`, without
`.snakemake/`) keeps its reruns exact.

Parsing the Snakefile never writes there: a dry run, a lint, a report or a preview of another
config leaves the results folder as it was. Instead each invocation *stages* the record it wants
(`stage`): a content-addressed copy under `.snakemake/cptlab/`, which the job declares as an
input. The staged file is dated long ago when the committed record already says the same, and
now when it does not, so Snakemake reruns exactly the jobs whose settings or code changed (and
what reads their outputs). The job's last step, after its command succeeded, commits the staged
record (`commit`, run by `cptlab claimed`, which starts every job: cptlab.claims); a job that
fails or is killed leaves the old record, and the next invocation reruns it.

The code hash of a subcommand is computed, not listed: every cptlab module its handler imports,
followed through the import graph (imports inside functions count, since a lazy import is still
a dependency), plus the package data those modules read (DATA_FILES). It hashes what that code
computes, not how it is written (`normalized_code`): a comment, a docstring, a module map or a
reformatting reruns nothing; any other edit of a module reruns the jobs that reach it. A user who
knows that a code change leaves the results as they are accepts it with `snakemake --touch`: the
committed record then says which code made the outputs (ACCEPTED).
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import yaml

from cptlab.artifacts import atomic_write_text
from cptlab.errors import InputError
from cptlab.layout import Layout

PACKAGE = "cptlab"
PACKAGE_ROOT = Path(__file__).resolve().parent
# Package files other than Python sources, by the module that reads them.
DATA_FILES = {"cptlab.config": ("schemas/config.schema.yaml",)}
# JSON-schema keywords that describe and validate nothing: a schema's text for its readers.
SCHEMA_ANNOTATIONS = frozenset({"title", "description", "$comment", "examples"})
# Schema keywords whose value maps names (config keys, definitions) to schemas.
SCHEMA_NAME_MAPS = frozenset({"properties", "patternProperties", "$defs", "dependentSchemas"})


# The statements that can hold a class or function, whose body may start with a docstring.
_DEFINITIONS = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


def _strip_docstrings(tree: ast.Module) -> ast.Module:
    """`tree` without the docstrings of its module, classes and functions (changed in place;
    only statements are visited, since no expression holds a docstring)."""
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        first = node.body[0] if isinstance(node, _DEFINITIONS) and node.body else None
        if isinstance(first, ast.Expr) and isinstance(getattr(first.value, "value", None), str):
            # A body cannot be empty: a function that is only its docstring runs `pass`.
            node.body = node.body[1:] or [ast.Pass()]
        for block in _BLOCKS:
            todo.extend(getattr(node, block, ()))
    return tree


def _is_type_checking(node: ast.AST) -> bool:
    """`if TYPE_CHECKING:`: a block that only type checkers run."""
    test = node.test if isinstance(node, ast.If) else None
    return "TYPE_CHECKING" in (getattr(test, "id", None), getattr(test, "attr", None))


def _walk_run(tree: ast.AST):
    """ast.walk without the bodies of `if TYPE_CHECKING:` (their imports never run; an `else:`
    does)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if _is_type_checking(node):
            todo.extend(node.orelse)
        else:
            todo.extend(ast.iter_child_nodes(node))


def _schema_logic(spec: Any, names: bool = False) -> Any:
    """A JSON schema without its annotations; `names`: `spec` maps names to schemas, so its keys
    are names (a config key called `description` stays)."""
    if isinstance(spec, dict):
        return {
            key: _schema_logic(value, names=not names and key in SCHEMA_NAME_MAPS)
            for key, value in spec.items()
            if names or key not in SCHEMA_ANNOTATIONS
        }
    if isinstance(spec, list):
        return [_schema_logic(item) for item in spec]
    return spec


def sha256_file(path: str | Path) -> str:
    """The sha256 of a file's bytes, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def normalized_code(path: Path, tree: ast.Module | None = None) -> str:
    """What the code in `path` computes, as text: a Python module's syntax tree (`ast.dump`)
    without docstrings (comments and layout are not in the tree; `tree`, its parse, is changed
    in place), the config schema without its annotations; another data file as it is."""
    if path.suffix == ".py":
        tree = tree if tree is not None else ast.parse(path.read_bytes(), filename=str(path))
        return ast.dump(_strip_docstrings(tree))
    if path.name.endswith(".schema.yaml"):
        return json.dumps(_schema_logic(yaml.safe_load(path.read_text())), sort_keys=True)
    return path.read_text()


class SourceTree:
    """The parsed sources of one copy of the package (the workflow hashes the copy beside its
    Snakefile, which need not be the installed one)."""

    def __init__(self, root: Path = PACKAGE_ROOT) -> None:
        self.root = Path(root)
        self.files: dict[str, Path] = {}
        self.trees: dict[str, ast.Module] = {}
        for path in sorted(self.root.rglob("*.py")):
            parts = list(path.relative_to(self.root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join([PACKAGE, *parts])
            self.files[name] = path
            self.trees[name] = ast.parse(path.read_bytes(), filename=str(path))
        self.modules = {path: name for name, path in self.files.items()}
        self.commands = self._commands()
        self._module_imports: dict[str, set[str]] = {}
        # A workflow hashes each command for each of its jobs, and most files for every command.
        self._hashes: dict[str, str] = {}
        self._normalized: dict[Path, bytes] = {}

    def module_of(self, path: Path) -> str | None:
        """The module name of a source file (None for package data)."""
        return self.modules.get(Path(path))

    def _commands(self) -> dict[str, tuple[str, ast.FunctionDef]]:
        """subcommand name -> (its module, its handler), from the `@command("name", ...)`
        decorators."""
        found = {}
        for module, tree in self.trees.items():
            for node in tree.body:
                if isinstance(node, ast.FunctionDef):
                    for decorator in node.decorator_list:
                        if (
                            isinstance(decorator, ast.Call)
                            and getattr(decorator.func, "id", None) == "command"
                            and decorator.args
                            and isinstance(decorator.args[0], ast.Constant)
                        ):
                            found[decorator.args[0].value] = (module, node)
        return found

    def imports(self, nodes: list[ast.AST], current: str) -> set[str]:
        """The cptlab modules imported anywhere in `nodes` (of module `current`), with the
        packages whose __init__ runs first."""
        is_package = self.files[current].name == "__init__.py"
        named: set[str] = set()
        for node in (n for top in nodes for n in _walk_run(top)):
            if isinstance(node, ast.Import):
                named.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                target = node.module or ""
                if node.level:
                    base = current.split(".")
                    base = base[: len(base) - node.level + (1 if is_package else 0)]
                    target = ".".join(base + ([node.module] if node.module else []))
                # `from package import name`: name may be a submodule
                named.update([target, *(f"{target}.{alias.name}" for alias in node.names)])
        found = set()
        for name in named:
            parts = name.split(".")
            found.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
        return {name for name in found if name in self.files}

    def called_functions(self, module: str, handler: ast.FunctionDef) -> list[ast.FunctionDef]:
        """`handler` and the functions of its module it calls, directly or through each other:
        their lazy imports run when it does."""
        functions = {
            node.name: node for node in self.trees[module].body if isinstance(node, ast.FunctionDef)
        }
        reached = {handler.name: handler}
        todo = [handler]
        while todo:
            for node in ast.walk(todo.pop()):
                if isinstance(node, ast.Name) and node.id in functions and node.id not in reached:
                    reached[node.id] = functions[node.id]
                    todo.append(functions[node.id])
        return list(reached.values())

    def closure(self, start: set[str]) -> set[str]:
        """Every cptlab module that importing `start` can load, lazily or not."""
        seen: set[str] = set()
        todo = list(start)
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                if name not in self._module_imports:
                    self._module_imports[name] = self.imports([self.trees[name]], name)
                todo += self._module_imports[name]
        return seen

    def command_sources(self, command: str) -> list[Path]:
        """The files subcommand `command` runs: its command module, what every command module
        imports at its top level, what its handler and the module's functions it calls import,
        everything those import in turn, and the package data they read."""
        if command not in self.commands:
            raise KeyError(f"no cptlab subcommand {command!r} in {self.root}")
        # `cptlab.cli.parser()` imports every command module, so each one's top-level imports
        # run in every job; of the handlers, only this command's runs. Another command module's
        # own text only declares its arguments, so adding or editing a subcommand reruns only
        # the jobs of that subcommand.
        command_modules = {m for m, _ in self.commands.values()}
        start: set[str] = set()
        for name in command_modules:
            tree = self.trees[name]
            top = [n for n in tree.body if not isinstance(n, ast.FunctionDef | ast.ClassDef)]
            parents = {name.rsplit(".", i)[0] for i in range(1, name.count(".") + 1)}
            start |= (self.imports(top, name) | parents) - command_modules
        module, handler = self.commands[command]
        start |= self.imports(self.called_functions(module, handler), module) - command_modules
        return self._sources(self.closure(start) | {module})

    def _sources(self, modules: set[str]) -> list[Path]:
        """The files of `modules`, with the package data they read."""
        files = {self.files[m] for m in modules}
        for name in modules:
            files.update(self.root / data for data in DATA_FILES.get(name, ()))
        return sorted(files)

    def code_hash(self, command: str) -> str:
        """sha256 of the sources `command` runs, by relative path and normalized code."""
        if command not in self._hashes:
            self._hashes[command] = self._hash(self.command_sources(command))
        return self._hashes[command]

    def module_hash(self, module: str) -> str:
        """sha256 of the sources that importing `module` can run (its import closure), as
        `code_hash` hashes a command's."""
        return self._hash(self._sources(self.closure({module})))

    def _hash(self, paths: list[Path]) -> str:
        digest = hashlib.sha256()
        for path in paths:
            digest.update(str(path.relative_to(self.root)).encode() + b"\0")
            digest.update(self._normalized_code(path) + b"\0")
        return digest.hexdigest()[:16]

    def _normalized_code(self, path: Path) -> bytes:
        """`normalized_code` of a file, once per file: it reuses the module's parse (docstrings
        mean nothing to the import graph)."""
        if path not in self._normalized:
            module = self.module_of(path)
            tree = self.trees[module] if module else None
            self._normalized[path] = normalized_code(path, tree).encode()
        return self._normalized[path]


# The key of a committed record that lists the code and settings its outputs were made with, where
# `snakemake --touch` accepted them for another (`accept`); the other keys are the accepted ones.
ACCEPTED = "accepted"

# Where invocations stage the records they want, beside Snakemake's own state and outside results/.
STAGED = Path(".snakemake") / "cptlab"
# The date of a staged record that the committed one already holds: older than any output.
SETTLED = 86400.0


def render(record: Mapping[str, Any], sort_keys: bool = True) -> str:
    """The text of a record as it is staged and committed (so equal records are equal files)."""
    return json.dumps(record, indent=2, sort_keys=sort_keys, default=str) + "\n"


def staged_path(root: str | Path, job: str, text: str, staging: Path = STAGED) -> Path:
    """Where the record `text` of job `job` of the experiment folder `root` is staged: named by
    its content, so invocations that want different records never share a file. Its first
    folder is `root`, quoted into one name (a relative or absolute path: `CPTLAB_RESULTS` may
    put the results elsewhere), the rest is the job id, so the job's command finds its results
    folder, its claim and its committed file from the staged file alone (`staged_job`).

    Each staged file has a folder of its own, made with it. Snakemake caches the listing of the
    folders it has scanned while it builds the DAG, and staging runs during that build: a record
    staged into a folder scanned moments before would be reported missing. A folder that holds
    one record exists only once that record does, so no scan can have missed it."""
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    job_path = Path(job)
    folder = staging / quote(str(root), safe="") / job_path.parent
    return folder / f"{job_path.name}.{digest}" / f"{job_path.name}.json"


def staged_job(staged: str | Path, staging: Path = STAGED) -> tuple[Path, str]:
    """(the experiment folder, the job id) of a staged record (the inverse of `staged_path`)."""
    try:
        parts = Path(staged).relative_to(staging).parts
    except ValueError:
        raise InputError(f"{staged}: not a staged provenance record (under {staging})") from None
    if len(parts) < 3 or not parts[-1].endswith(".json"):
        raise InputError(f"{staged}: not a staged provenance record (under {staging})")
    return Path(unquote(parts[0])), "/".join([*parts[1:-2], parts[-1].removesuffix(".json")])


def committed_path(staged: str | Path, staging: Path = STAGED) -> Path:
    """The committed file a staged record belongs to."""
    root, job = staged_job(staged, staging)
    return Layout(root).provenance_file(job)


def stage(
    root: str | Path,
    job: str,
    record: Mapping[str, Any],
    stale: bool = False,
    staging: Path = STAGED,
) -> Path:
    """Stage `record`, the provenance this invocation wants job `job` of the experiment folder
    `root` to have committed, and return the staged file. Its date tells Snakemake whether the
    job is stale: long ago (SETTLED) when the committed file already holds the record (and
    `stale` does not say its outputs are suspect: cptlab.claims), now otherwise, so it is newer
    than the job's outputs. Nothing under results/ is written."""
    text = render(record)
    staged = staged_path(root, job, text, staging)
    if not staged.is_file():
        atomic_write_text(staged, text)
    committed = Layout(root).provenance_file(job)
    current = not stale and committed.is_file() and _accepted_part(committed.read_text()) == text
    os.utime(staged, (SETTLED, SETTLED) if current else None)
    return staged


def _accepted_part(text: str) -> str:
    """A committed record's text without its ACCEPTED history: what a staged record must equal."""
    if f'"{ACCEPTED}"' not in text:
        return text
    record = json.loads(text)
    record.pop(ACCEPTED, None)
    return render(record)


def accept(root: str | Path, job: str, record: Mapping[str, Any]) -> Path:
    """Commit `record` for job `job` without running it (`snakemake --touch`): its outputs are
    declared to be what `record`'s code and settings would make. Where the committed record said
    otherwise, its differing values are appended to the record's ACCEPTED list, so the
    provenance still names the code that made the outputs."""
    committed = Layout(root).provenance_file(job)
    previous = json.loads(committed.read_text()) if committed.is_file() else None
    history = list(previous.pop(ACCEPTED, [])) if previous else []
    if previous is not None and render(previous) != render(record):
        history.append({k: v for k, v in previous.items() if record.get(k) != v})
    return write_if_changed(committed, {**record, ACCEPTED: history} if history else record)


def commit(staged: str | Path, staging: Path = STAGED) -> Path:
    """Record that the job of `staged` ran with that provenance: copy it, atomically, to its
    committed file. The job's last step, after its command succeeded (cptlab.claims)."""
    committed = committed_path(staged, staging)
    atomic_write_text(committed, Path(staged).read_text())
    return committed


def write_if_changed(path: str | Path, record: Mapping[str, Any], sort_keys: bool = True) -> Path:
    """Write `record` as JSON to `path` unless the file already holds exactly it, so that the
    file's date changes only with its content."""
    path = Path(path)
    text = render(record, sort_keys)
    if not path.is_file() or path.read_text() != text:
        atomic_write_text(path, text)
    return path
