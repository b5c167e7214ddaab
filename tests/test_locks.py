"""Which run holds a results folder (cptlab.locks.lock_holder), and freeing the lock of a run
killed with -9 (release_stale_lock), on lock folders laid out as Snakemake writes them."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

from cptlab.locks import OWNER, lock_holder, record_lock_owner, release_stale_lock


def locked(locks, *files, pid=None):
    """A lock folder as Snakemake leaves it while it runs: one path per line."""
    locks.mkdir(parents=True, exist_ok=True)
    (locks / "0.input.lock").write_text("\n".join(files) + "\n")
    (locks / "0.output.lock").write_text("results/exp/scores.csv\n")
    owner = {"pid": pid or os.getpid(), "host": socket.gethostname(), "boot": ""}
    (locks / OWNER).write_text(json.dumps(owner))


def test_a_lock_on_a_file_inside_the_folder_names_the_lock_and_its_owner(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    locks = tmp_path / ".snakemake" / "locks"
    assert lock_holder("results/exp", locks) is None
    locked(locks, "results/exp/data/a.jsonl", "config/x.yaml")
    holder = lock_holder("results/exp", locks)
    assert holder == (
        f"results/exp is in use by another snakemake run, process {os.getpid()} on "
        f"{socket.gethostname()} (lock {locks / '0.input.lock'})"
    )
    assert lock_holder(str(tmp_path / "results" / "exp"), locks) is not None  # absolute too


def test_another_experiments_lock_is_not_ours(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    locks = tmp_path / ".snakemake" / "locks"
    locked(locks, "results/expanded/data/a.jsonl")
    (locks / "0.output.lock").write_text("results/expanded/scores.csv\n")
    assert lock_holder("results/exp", locks) is None


def test_a_dead_owners_lock_is_freed_and_a_live_ones_kept(tmp_path):
    locks = tmp_path / "locks"
    record_lock_owner(locks)  # this process: alive
    (locks / "0.input.lock").write_text("results/exp/a\n")
    assert release_stale_lock(locks) is None and (locks / "0.input.lock").exists()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    owner = json.loads((locks / OWNER).read_text())
    (locks / OWNER).write_text(json.dumps({**owner, "pid": int(dead.stdout)}))
    assert "freed the lock" in release_stale_lock(locks)
    assert not list(locks.iterdir())
