"""Failure drills at the command level: a corrupt checkpoint, a truncated JSONL, a full disk and
an unwritable results folder each give one line naming the file (exit 2), and leave nothing
behind that looks complete."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli
from tiny_world import tiny_rows, tiny_world, write_rows

CPTLAB = str(Path(sys.executable).parent / "cptlab")


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict:
    """A tiny random model and 40 `math_id` rows, in a config the `cptlab` command (another
    process, without the tests' registrations) accepts."""
    folder = tmp_path_factory.mktemp("failures")
    _, base, _ = tiny_world(folder)
    rows = tiny_rows(n=40, verifier="math_boxed")
    for row in rows:
        row["benchmark"], row["id"] = "math_id", row["id"].replace("tiny_train", "math_id")
    config = {
        "experiment": "failures",
        "data": {"seed": 0, "domains": {"math": {"id": ["math_id"]}}},
        "base": {"seed": 0},
        "evaluation": {"n": 40, "max_new_tokens": 12},
    }
    (folder / "config.json").write_text(json.dumps(config))
    return {"folder": folder, "base": base, "data": write_rows(folder / "math_id.jsonl", rows)}


def evaluate_argv(world: dict, out: Path, checkpoint: Path | None = None, data=None) -> list:
    return [
        "evaluate", "--config", str(world["folder"] / "config.json"),
        "--checkpoint", str(checkpoint or world["base"]), "--data", str(data or world["data"]),
        "--benchmark", "math_id", "--out", str(out / "math_id.json"),
        "--responses", str(out / "math_id.responses.jsonl"),
    ]  # fmt: skip


def one_line(err: str) -> str:
    progress = ("Writing model shards", "Loading weights")  # transformers' progress bars
    lines = [line for line in err.strip().splitlines() if not line.startswith(progress)]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_a_corrupt_checkpoint_is_named(world, tmp_path, capsys):
    broken = tmp_path / "broken"
    shutil.copytree(world["base"], broken)
    weights = broken / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    code, err = run_cli(evaluate_argv(world, tmp_path / "out", checkpoint=broken), capsys)
    assert code == 2
    assert f"{broken}: not a loadable checkpoint" in one_line(err)
    assert not (tmp_path / "out").exists()


def test_a_truncated_jsonl_is_named_with_its_line(world, tmp_path, capsys):
    text = world["data"].read_text()
    cut = tmp_path / "math_id.jsonl"
    cut.write_text(text[: len(text) - 40])  # the last row loses its end
    code, err = run_cli(evaluate_argv(world, tmp_path / "out", data=cut), capsys)
    assert code == 2
    assert f"{cut}:40: invalid JSON" in one_line(err)


def test_a_truncated_responses_file_stops_the_drift_analysis(tmp_path):
    from cptlab.drift.tables import read_responses

    path = tmp_path / "math_id.responses.jsonl"
    path.write_text('{"id": "a", "completions": ["x"]}\n{"id": "b", "compl')
    with pytest.raises(ValueError, match=f"{path}:2"):
        read_responses(path)


needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="a full disk is a tiny tmpfs in a private mount namespace: needs root and unshare",
)


def in_private_mount(script: str) -> subprocess.CompletedProcess:
    """Run `script` in a new mount namespace (the host's mounts are untouched)."""
    return subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )


@needs_root
def test_a_full_disk_names_the_file_and_leaves_nothing_complete(world, tmp_path):
    out = tmp_path / "full"
    out.mkdir()
    argv = " ".join(f"'{a}'" for a in evaluate_argv(world, out))
    done = in_private_mount(
        f"mount -t tmpfs -o size=8k tmpfs '{out}' && {CPTLAB} {argv}; echo rc=$?; ls -A '{out}'"
    )
    assert "rc=2" in done.stdout, done.stdout + done.stderr
    assert "cannot write" in done.stderr and "No space left on device" in done.stderr
    assert one_line(done.stderr).startswith("cptlab evaluate: error: ")
    left = done.stdout.strip().splitlines()[done.stdout.strip().splitlines().index("rc=2") + 1 :]
    # No EVAL.json (the mark of a finished evaluation) and no half-written temporary file; the
    # responses file, written before it, is whole (and Snakemake removes a failed job's outputs).
    assert left == ["math_id.responses.jsonl"], left


@needs_root
def test_a_read_only_results_folder_names_the_file(world, tmp_path):
    out = tmp_path / "readonly"
    out.mkdir()
    argv = " ".join(f"'{a}'" for a in evaluate_argv(world, out))
    done = in_private_mount(
        f"mount --bind '{out}' '{out}' && mount -o remount,bind,ro '{out}' && {CPTLAB} {argv};"
        f" echo rc=$?"
    )
    assert "rc=2" in done.stdout, done.stdout + done.stderr
    line = one_line(done.stderr)
    assert f"cannot write {out}/math_id.responses.jsonl: Read-only file system" in line
    assert not list(out.iterdir())
