"""Code hashes from the import graph (cptlab.provenance.SourceTree) on a constructed package;
staged records dated by whether the committed one holds them, and committed by the job."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path
from urllib.parse import quote

import pytest

from cptlab.cli import COMMAND_MODULES
from cptlab.provenance import (
    ACCEPTED,
    DATA_FILES,
    SETTLED,
    SourceTree,
    accept,
    commit,
    committed_path,
    stage,
    staged_job,
    staged_path,
    write_if_changed,
)


def package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


@pytest.fixture
def tree(tmp_path) -> SourceTree:
    """cli.py (the registry), two command modules, and modules reached in every import form."""
    root = package(
        tmp_path / "cptlab",
        {
            "__init__.py": "",
            "cli.py": "def command(*args):\n    return lambda f: f\n",
            "config.py": "import yaml\n",
            "a/__init__.py": "from . import shared\n",
            "a/shared.py": "",
            "a/cli.py": """
                from cptlab.cli import command

                @command("first", "help")
                def first(args):
                    from cptlab.a.work import run
                    run()

                @command("second", "help")
                def second(args):
                    import cptlab.b.deep
            """,
            "a/work.py": """
                from typing import TYPE_CHECKING
                from cptlab import config
                if TYPE_CHECKING:  # annotations only: never runs
                    from cptlab.b import unused
                def run():
                    from .lazy import x  # lazy and relative: still a dependency
            """,
            "a/lazy.py": "x = 1\n",
            "b/__init__.py": "",
            "b/deep.py": "from cptlab.b import leaf\n",
            "b/leaf.py": "",
            "b/unused.py": "",
            "c/__init__.py": "",
            "c/cli.py": """
                from cptlab.cli import command
                from cptlab.c import setup

                @command("other", "help")
                def other(args):
                    pass

                @command("helped", "help")
                def helped(args):
                    return _read(args)

                def _read(args):
                    from cptlab.c import reader
                    return reader
            """,
            "c/setup.py": "",
            "c/reader.py": "",
            "schemas/config.schema.yaml": "{}\n",
        },
    )
    return SourceTree(root)


def names(tree: SourceTree, command: str) -> set[str]:
    return {str(p.relative_to(tree.root)) for p in tree.command_sources(command)}


def test_a_commands_sources_follow_every_import_form(tree):
    first = names(tree, "first")
    assert {"a/work.py", "a/lazy.py", "config.py", "schemas/config.schema.yaml"} <= first
    assert {"__init__.py", "a/__init__.py", "a/shared.py", "cli.py", "a/cli.py"} <= first
    # another handler's imports, and an import only type checkers run
    assert not {"b/deep.py", "b/leaf.py", "b/unused.py"} & first
    second = names(tree, "second")
    assert {"b/__init__.py", "b/deep.py", "b/leaf.py"} <= second
    assert not {"a/work.py", "a/lazy.py", "b/unused.py"} & second
    # a handler's helper in its own module: the helper's lazy imports run with the handler
    assert "c/reader.py" in names(tree, "helped") and "c/reader.py" not in names(tree, "other")


def test_the_hash_changes_with_content_only(tree):
    before = tree.code_hash("first")
    lazy = tree.root / "a" / "lazy.py"
    os.utime(lazy, (1e9, 1e9))
    assert SourceTree(tree.root).code_hash("first") == before  # a touch is no change
    lazy.write_text("x = 2\n")
    assert SourceTree(tree.root).code_hash("first") != before
    assert SourceTree(tree.root).code_hash("second") == tree.code_hash("second")


def edited(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1))


def test_the_hash_reads_what_the_code_computes_not_how_it_is_written(tree):
    """Docstrings, comments, blank lines and layout change nothing; a statement does, even in a
    function whose body was only its docstring."""
    before = tree.code_hash("first")
    work = tree.root / "a" / "work.py"
    work.write_text(
        '"""The work module: a map for readers."""\n\n\n'
        + work.read_text().replace("def run():", 'def run(  ):  # the entry point\n    """Run."""')
        + "\n# a closing comment\n"
    )
    edited(tree.root / "a" / "__init__.py", "from . import shared", "from . import (shared)")
    assert SourceTree(tree.root).code_hash("first") == before
    edited(work, "from .lazy import x", "from .lazy import x\n    x += 1")
    assert SourceTree(tree.root).code_hash("first") != before
    # A docstring that is a function's whole body: removing it leaves `pass`, not an error.
    docstring_only = tree.root / "a" / "shared.py"
    docstring_only.write_text('def f():\n    """Only a docstring."""\n')
    once = SourceTree(tree.root).code_hash("first")
    docstring_only.write_text("def f():\n    pass\n")
    assert SourceTree(tree.root).code_hash("first") == once


def test_the_schemas_descriptions_are_text_its_keywords_are_code(tree):
    """A config key called `description` is a name, not an annotation: it stays in the hash."""
    schema = tree.root / "schemas" / "config.schema.yaml"
    schema.write_text(
        "description: a config\ntype: object\nproperties:\n"
        "  description: {type: string, description: what it is}\n"
        "  n: {type: integer, default: 1, title: rows}\n"
    )
    before = SourceTree(tree.root).code_hash("first")
    edited(schema, "description: a config", "description: one experiment")
    edited(schema, "description: what it is", "description: what the run is")
    edited(schema, "title: rows", "title: row count")
    assert SourceTree(tree.root).code_hash("first") == before
    for old, new in [("default: 1", "default: 2"), ("  description: {type", "  text: {type")]:
        edited(schema, old, new)
        changed = SourceTree(tree.root).code_hash("first")
        assert changed != before, new
        before = changed


def test_another_command_modules_text_is_not_a_dependency(tree):
    """Every job imports every command module (the parser does), so their top-level imports
    count; another module's handlers never run, so adding a subcommand reruns nothing else."""
    first = names(tree, "first")
    assert "c/setup.py" in first and "c/cli.py" not in first
    before, other = tree.code_hash("first"), tree.code_hash("other")
    handler = tree.root / "c" / "cli.py"
    handler.write_text(
        handler.read_text() + "\n@command('more', 'help')\ndef more(args):\n    pass\n"
    )
    assert SourceTree(tree.root).code_hash("first") == before
    assert SourceTree(tree.root).code_hash("other") != other


def test_an_unknown_command_is_named(tree):
    with pytest.raises(KeyError, match="no cptlab subcommand 'third'"):
        tree.command_sources("third")


def test_the_package_registers_exactly_its_command_modules():
    """cptlab.cli imports COMMAND_MODULES at run time; the hashes read the @command decorators:
    both must name the same modules, and every package data file must be claimed."""
    tree = SourceTree()
    assert {module for module, _ in tree.commands.values()} == set(COMMAND_MODULES)
    data = {
        str(p.relative_to(tree.root))
        for p in tree.root.rglob("*")
        if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts
    }
    assert data == {f for files in DATA_FILES.values() for f in files}


def test_write_if_changed_keeps_the_modification_time(tmp_path):
    path = write_if_changed(tmp_path / "job.json", {"a": 1, "b": [2]})
    os.utime(path, (1e9, 1e9))
    write_if_changed(path, {"b": [2], "a": 1})  # the same content, keys in another order
    assert path.stat().st_mtime == 1e9
    write_if_changed(path, {"a": 2, "b": [2]})
    assert path.stat().st_mtime > 1e9 and '"a": 2' in path.read_text()


RECORD = {"command": "evaluate-checkpoint", "code": "0123", "settings": {"n": 4}}


@pytest.mark.parametrize("root", ["results/exp", "/shared/lab/results/exp", "../lab/results/exp"])
def test_a_staged_record_is_named_by_its_content_and_leads_back_to_its_job(tmp_path, root):
    """The staged file's first folder is the experiment's folder in one name (relative or
    absolute, CPTLAB_RESULTS), the rest the job id: the job finds its folder, claim and
    committed file from it alone."""
    job = "evaluate/base"
    first = staged_path(root, job, "a", tmp_path)
    assert first.parent.parent.parent == tmp_path / quote(root, safe="")
    assert first.name == "base.json"
    assert first.parent.name.startswith("base.")
    assert staged_path(root, job, "b", tmp_path) != first
    assert staged_job(first, tmp_path) == (Path(root), job)
    assert committed_path(first, tmp_path) == Path(root) / "provenance" / "evaluate" / "base.json"
    dotted = staged_path(root, "data/math.v2", "a", tmp_path)  # a benchmark name with a dot
    assert staged_job(dotted, tmp_path) == (Path(root), "data/math.v2")


def test_staged_is_stale_until_the_job_commits_and_nothing_goes_to_results(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    root, committed = Path("results/exp"), Path("results/exp/provenance/job.json")
    staged = stage(root, "job", RECORD, staging=tmp_path / "staged")
    assert not Path("results").exists()  # staging never writes under results/
    assert staged.stat().st_mtime > SETTLED  # no record committed: stale, dated now
    assert commit(staged, tmp_path / "staged") == committed
    assert committed.read_text() == staged.read_text()
    assert stage(root, "job", RECORD, staging=tmp_path / "staged").stat().st_mtime == SETTLED
    other = stage(root, "job", {**RECORD, "settings": {"n": 5}}, staging=tmp_path / "staged")
    assert other != staged and other.stat().st_mtime > SETTLED
    before = committed.stat().st_mtime_ns
    assert stage(root, "job", RECORD, staging=tmp_path / "staged") == staged  # settled again
    assert staged.stat().st_mtime == SETTLED and committed.stat().st_mtime_ns == before
    # A job that a dead run's claim marks suspect (cptlab.claims) is stale whatever it holds.
    suspect = stage(root, "job", RECORD, stale=True, staging=tmp_path / "staged")
    assert suspect == staged and staged.stat().st_mtime > SETTLED


def test_a_stale_record_is_dated_now_even_if_staged_long_before(tmp_path, monkeypatch):
    """Staged by an earlier preview, then the job ran with another record: the staged file
    must be newer than those outputs, not keep its first date."""
    monkeypatch.chdir(tmp_path)
    staged = stage("results/exp", "job", RECORD, staging=tmp_path / "staged")
    os.utime(staged, (1e9, 1e9))
    assert stage("results/exp", "job", RECORD, staging=tmp_path / "staged").stat().st_mtime > 1e9


def test_touch_accepts_a_record_and_keeps_the_code_that_made_the_outputs(tmp_path, monkeypatch):
    """`snakemake --touch` commits the wanted record (so nothing reruns) and lists what it
    replaced; a real run's commit then clears that list."""
    monkeypatch.chdir(tmp_path)
    root, job = Path("results/exp"), "runs/grpo/seed0/stage1_math/train"
    made = {"command": "train-stage", "code": "aaaa", "settings": {"lr": 1}}
    commit(stage(root, job, made))
    refactored = {**made, "code": "bbbb"}
    assert os.stat(stage(root, job, refactored)).st_mtime != SETTLED  # would rerun
    committed = accept(root, job, refactored)
    assert json.loads(committed.read_text())[ACCEPTED] == [{"code": "aaaa"}]
    assert os.stat(stage(root, job, refactored)).st_mtime == SETTLED  # accepted: no rerun
    accept(root, job, refactored)  # again: nothing new to record
    retuned = {**refactored, "code": "cccc", "settings": {"lr": 2}}
    accept(root, job, retuned)
    assert json.loads(committed.read_text())[ACCEPTED] == [
        {"code": "aaaa"},
        {"code": "bbbb", "settings": {"lr": 1}},
    ]
    assert os.stat(stage(root, job, retuned)).st_mtime == SETTLED
    commit(stage(root, job, made))  # a run of the first code: its outputs are its own again
    assert ACCEPTED not in json.loads(committed.read_text())
