"""The `cptlab` command line: one registry, one error path (bad input: exit 2, one line; a bug:
exit 1 with its traceback)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from conftest import run_cli

from cptlab.cli import COMMANDS, parser


def test_every_registered_command_parses_and_has_help():
    top = parser()
    assert {"prepare-data", "build-base", "train-stage", "evaluate", "aggregate", "figures",
            "drift-chain", "dataset-distance", "drift-figures"} <= set(COMMANDS)  # fmt: skip
    for command in COMMANDS.values():
        assert command.help and callable(command.run)
    assert top.parse_args(["aggregate", "--config", "c", "--results-dir", "r"]).run


def bad_config(tmp_path, name, edit) -> str:
    config = yaml.safe_load(open("config/config.yaml"))
    edit(config)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path)


@pytest.mark.parametrize(
    "case, named",
    [
        ("missing config file", "nowhere.yaml"),
        ("unknown key", "evaluation.samplez"),
        ("unknown benchmark", "math_idd"),
        ("bad data row", "math_id.jsonl:1"),
    ],
)
def test_bad_input_exits_2_with_one_line_naming_it(tmp_path, capsys, case, named):
    data = tmp_path / "math_id.jsonl"
    data.write_text('{"id": "x"}\n')
    config = {
        "missing config file": str(tmp_path / "nowhere.yaml"),
        "unknown key": bad_config(tmp_path, "a", lambda c: c["evaluation"].update(samplez=2)),
        "unknown benchmark": bad_config(
            tmp_path, "b", lambda c: c["data"]["domains"]["math"].update(id=["math_idd"])
        ),
        "bad data row": "config/config.yaml",
    }[case]
    argv = ["evaluate", "--config", config, "--checkpoint", str(tmp_path), "--data", str(data),
            "--benchmark", "math_id", "--out", str(tmp_path / "o.json"),
            "--responses", str(tmp_path / "o.jsonl")]  # fmt: skip
    code, err = run_cli(argv, capsys)
    lines = err.strip().splitlines()
    assert code == 2, err
    assert lines[0].startswith("cptlab evaluate: error: ") and named in err, err
    assert "Traceback" not in err and not (tmp_path / "o.json").exists()
    assert len([line for line in lines if not line.startswith("  ")]) == 1  # details indented


def test_aggregate_of_a_missing_tree_names_the_files(tmp_path, capsys):
    config = tmp_path / "c.json"
    config.write_text(json.dumps(yaml.safe_load(open("config/smoke.yaml"))))
    code, err = run_cli(
        ["aggregate", "--config", str(config), "--results-dir", str(tmp_path)], capsys
    )
    assert code == 2 and "missing evaluation file(s)" in err and "eval/base" in err


def test_bad_input_under_verbose_adds_the_traceback(tmp_path, capsys):
    argv = ["-v", "evaluate", "--config", str(tmp_path / "nowhere.yaml"), "--checkpoint", "c",
            "--data", "d", "--benchmark", "math_id", "--out", "o", "--responses", "r"]  # fmt: skip
    code, err = run_cli(argv, capsys)
    assert code == 2 and "Traceback" in err and "nowhere.yaml" in err


@pytest.mark.parametrize("bug", [KeyError("steps"), ValueError("bad shape"), TypeError("x")])
def test_an_internal_error_is_not_reported_as_bad_input(capsys, monkeypatch, bug):
    def broken(args):
        raise bug

    parser()  # registers the commands
    monkeypatch.setitem(COMMANDS, "aggregate", replace(COMMANDS["aggregate"], run=broken))
    code, err = run_cli(["aggregate", "--config", "c", "--results-dir", "r"], capsys)
    assert code == 1, err
    assert "Traceback" in err and "cptlab aggregate: internal error" in err
    assert f"{type(bug).__name__}: " in err.splitlines()[-1]


ENDING = """
import multiprocessing, sys, time
import cptlab.cli

def main(argv=None):
    child = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(600,))
    child.start()
    print(child.pid)  # buffered: the exit must flush it
    print("to stderr", file=sys.stderr)
    return 2

if __name__ == "__main__":
    cptlab.cli.main = main
    cptlab.cli.entry_point()
"""


def test_the_command_ends_with_mains_code_its_output_flushed_and_no_child_left(tmp_path):
    """`entry_point` (the `cptlab` command, `python -m cptlab`) ends the process at once: with
    the code `main` returns, its buffered output written (to a file, as a job's log), and no
    process it started through multiprocessing still running."""
    script = tmp_path / "ending.py"
    script.write_text(ENDING)
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    with out.open("w") as stdout, err.open("w") as stderr:
        done = subprocess.run([sys.executable, str(script)], stdout=stdout, stderr=stderr)
    assert done.returncode == 2
    assert err.read_text() == "to stderr\n"
    child = int(out.read_text())
    for _ in range(50):  # terminated by the parent: gone once its exit is reaped (by init)
        if not Path(f"/proc/{child}").exists() or "Z" in _state(child):
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"process {child} outlived the command")


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"
