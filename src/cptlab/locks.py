"""A Snakemake run killed with -9 keeps its lock (`.snakemake/locks/`), and the next run then
stops with a LockException until someone types `snakemake --unlock`. The workflow records which
process holds the lock (`record_lock_owner`, Snakemake's `onstart`), and when it parses it frees
a lock whose owner is gone (`release_stale_lock`): a process on this machine, started since the
last boot, that no longer exists. A lock of a live process, of another machine (a shared file
system) or without an owner record is left to Snakemake, which refuses to run; the workflow
refuses first, in one line (`lock_holder`), when that lock covers its results folder."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

LOCKS = Path(".snakemake") / "locks"
OWNER = "cptlab-owner.json"


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    return True


def record_lock_owner(locks: Path = LOCKS) -> None:
    """Record this process as the holder of the workflow's lock (call it from `onstart`)."""
    locks.mkdir(parents=True, exist_ok=True)
    owner = {"pid": os.getpid(), "host": socket.gethostname(), "boot": _boot_id()}
    (locks / OWNER).write_text(json.dumps(owner) + "\n")


def lock_holder(results: str | Path, locks: Path = LOCKS) -> str | None:
    """Why a run on `results` cannot start: another run holds a lock on a file inside it. The
    line to print (naming the lock file and, when recorded, its owner), or None."""
    folder = os.path.abspath(results)
    held = sorted(locks.glob("*.lock")) if locks.is_dir() else []
    for lock in held:
        try:
            files = lock.read_text().splitlines()
        except OSError:  # released while we read it
            continue
        if any(os.path.commonpath([folder, os.path.abspath(f)]) == folder for f in files if f):
            return f"{results} is in use by another snakemake run{_owner(locks)} (lock {lock})"
    return None


def _owner(locks: Path) -> str:
    try:
        owner = json.loads((locks / OWNER).read_text())
        return f", process {int(owner['pid'])} on {owner['host']}"
    except (OSError, ValueError, KeyError, TypeError):
        return ""


def release_stale_lock(locks: Path = LOCKS) -> str | None:
    """Remove the lock files of a run whose recorded owner is dead; the message to print, or
    None when there was nothing to free."""
    held = sorted(locks.glob("*.lock")) if locks.is_dir() else []
    record = locks / OWNER
    if not held or not record.is_file():
        return None
    try:
        owner = json.loads(record.read_text())
        pid, host, boot = int(owner["pid"]), owner["host"], owner["boot"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if host != socket.gethostname() or (boot == _boot_id() and _alive(pid)):
        return None
    for path in [*held, record]:
        path.unlink(missing_ok=True)
    return f"cptlab: freed the lock of a run that was killed (process {pid} on {host})"
