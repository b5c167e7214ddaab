"""Housekeeping around a run, in the trainer: where work folders go, which uid a program gets,
which of the interpreter's folders the sandbox uid must be shown, and what is swept up after a
run without namespaces (the uid's processes, its files in the shared folders, the work folder).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import stat
import sys
import tempfile
import time

# Size of the tmpfs that backs the work folder and the private /dev/shm (namespace mode).
TMPFS_BYTES = 32 << 20
TMPFS_INODES = 4096
# Per-run sandbox uids are drawn from this range (root only), so RLIMIT_NPROC counts only this
# run's processes and a kill-by-uid can never hit anything else.
_UID_RANGE = (1_500_000_000, 1_600_000_000)
_FALLBACK_UID = 65534  # nobody: used when the uid map is restricted (rootless containers)


def _traversable_by_others(path: str) -> bool:
    """Whether an unrelated uid can reach `path` (every component has o+x)."""
    parts = os.path.realpath(path).strip("/").split("/")
    try:
        return all(
            os.stat("/" + "/".join(parts[:depth])).st_mode & 0o001
            for depth in range(len(parts) + 1)
        )
    except OSError:
        return False


_workdir_base_cache: list[str | None] = []


def workdir_base() -> str | None:
    """Where per-run folders go. As root the program runs as another uid, which must reach its
    folder by absolute path too (TMPDIR, __file__ of subprocesses); some hosts have /tmp 0700."""
    if not _workdir_base_cache:
        base = None
        if os.geteuid() == 0:
            for candidate in (tempfile.gettempdir(), "/var/tmp", "/dev/shm"):
                if os.path.isdir(candidate) and _traversable_by_others(candidate):
                    base = candidate
                    break
        _workdir_base_cache.append(base)
    return _workdir_base_cache[0]


_remap_cache: list[tuple[str, list[str]]] | None = None


def interpreter_remap() -> list[tuple[str, list[str]]]:
    """Directories the sandbox uid cannot traverse (mode without o+x) that sit above the
    interpreter's trees, each with the trees to re-expose below it. Root only."""
    global _remap_cache
    if _remap_cache is None:
        needed = {
            os.path.realpath(p)
            for p in (sys.base_prefix, sys.base_exec_prefix, sys.prefix, sys.exec_prefix)
        }
        needed.add(os.path.dirname(os.path.dirname(os.path.abspath(sys.executable))))
        needed.add(os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))))
        groups: dict[str, list[str]] = {}
        for path in sorted(needed):
            parts = path.strip("/").split("/")
            for depth in range(1, len(parts)):
                ancestor = "/" + "/".join(parts[:depth])
                if not os.stat(ancestor).st_mode & 0o001:
                    groups.setdefault(ancestor, []).append(path)
                    break
        # A tree nested in another re-exposed tree comes along with it.
        _remap_cache = [
            (blocked, [p for p in paths if not any(p.startswith(q + "/") for q in paths)])
            for blocked, paths in groups.items()
        ]
    return _remap_cache


_full_uid_map: bool | None = None


def sandbox_uid() -> int:
    """A fresh uid per run when the uid map is the full identity (a normal root), so that
    RLIMIT_NPROC and kill-by-uid concern only this run; else nobody."""
    global _full_uid_map
    if _full_uid_map is None:
        try:
            with open("/proc/self/uid_map") as f:
                _full_uid_map = f.read().split() == ["0", "0", "4294967295"]
        except OSError:
            _full_uid_map = False
    return random.randrange(*_UID_RANGE) if _full_uid_map else _FALLBACK_UID


def is_fresh_uid(uid: int | None) -> bool:
    """Only a per-run uid may be swept (processes killed, files removed) wholesale; never
    `nobody`, which other software on the host may use."""
    return uid is not None and _UID_RANGE[0] <= uid < _UID_RANGE[1]


def kill_uid_processes(uid: int) -> None:
    """Last resort (root, no PID namespace): SIGKILL every process whose real uid is `uid`."""
    for _ in range(50):
        found = False
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/status") as f:
                    line = next(ln for ln in f if ln.startswith("Uid:"))
                if int(line.split()[1]) == uid:
                    found = True
                    os.kill(int(entry), signal.SIGKILL)
            except (OSError, StopIteration, ValueError):
                continue
        if not found:
            return
        time.sleep(0.01)


_SHARED_WRITABLE = ("/tmp", "/var/tmp", "/dev/shm")


def remove_files_of(uid: int) -> None:
    """Root without a mount namespace: the sandbox uid could write to the world-writable
    directories. The uid is fresh for this run, so whatever it owns there is this run's."""
    for folder in _SHARED_WRITABLE:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    rmtree(entry.path)
                else:
                    os.unlink(entry.path)
            except OSError:
                continue


def rmtree(path: str) -> None:
    """Remove the work folder, even if a (non-root) program chmod-ed folders in it to 000.

    Repairs permissions only on real directories at or below `path` (never its parent, never
    through a symlink); by now no process of the program is alive to race with us.
    """
    root = os.path.abspath(path)
    if not os.path.lexists(root):
        return
    if os.geteuid() != 0:  # root ignores permission bits anyway
        stack = [root]
        while stack:
            folder = stack.pop()
            try:
                if not stat.S_ISDIR(os.lstat(folder).st_mode):
                    continue
                os.chmod(folder, 0o700)
                with os.scandir(folder) as entries:
                    stack.extend(e.path for e in entries if e.is_dir(follow_symlinks=False))
            except OSError:
                continue
    shutil.rmtree(root, ignore_errors=True)
