"""The public API: `run_python` runs one program and returns a `RunResult` within `Limits`;
`active_protections` says what the sandbox gets on this machine.
"""

from __future__ import annotations

import math
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from cptlab.sandbox import switches
from cptlab.sandbox.client import ServedLauncher, start_launcher
from cptlab.sandbox.housekeeping import (
    TMPFS_BYTES,
    TMPFS_INODES,
    interpreter_remap,
    is_fresh_uid,
    remove_files_of,
    rmtree,
    sandbox_uid,
    workdir_base,
)
from cptlab.sandbox.interpreter import BASE_ENV, BOOTSTRAP, PROGRAM_FLAGS
from cptlab.sandbox.status import kill_tree, parse_status

__all__ = ["Limits", "RunResult", "active_protections", "run_python"]


@dataclass(frozen=True)
class Limits:
    """Resource limits for one run. Defaults suit a short competitive-programming solution."""

    cpu_seconds: float = 1.0  # RLIMIT_CPU (rounded up to whole seconds; SIGXCPU -> "timeout")
    wall_seconds: float = 3.0  # wall clock; then kill the whole process tree
    memory_mb: int = 256  # address-space limit (RLIMIT_AS)
    max_processes: int = 32  # process/thread count limit (RLIMIT_NPROC of a per-run uid)
    max_output_bytes: int = 65536  # stdout and stderr cap each; beyond it: kill, "output_limit"
    max_file_bytes: int = 1 << 20  # RLIMIT_FSIZE


@dataclass(frozen=True)
class RunResult:
    """What happened. ``status`` is one of: "ok" (exit 0), "error" (nonzero exit/exception),
    "timeout" (wall clock or CPU limit), "memory" (MemoryError), "output_limit", "killed"
    (died by a signal) or "sandbox_error" (the sandbox itself failed; not the program's fault)."""

    status: str
    returncode: int | None
    stdout: str
    stderr: str
    wall_seconds: float


_protections: dict[str, bool] | None = None
_last_run_warm = False  # whether the latest run's program ran in a warm interpreter


def _decode(data: bytes | bytearray, cap: int) -> str:
    return bytes(data[:cap]).decode("utf-8", errors="replace")


def _is_memory_error(stderr: bytes | bytearray) -> bool:
    lines = bytes(stderr[-4096:]).strip().splitlines()
    return bool(lines) and b"MemoryError" in lines[-1]


def run_python(
    source: str, stdin: str = "", env: dict[str, str] | None = None, limits: Limits = Limits()
) -> RunResult:
    """Run `source` as ``python main.py`` in a fresh sandbox and return what happened.

    Never raises for anything the program does: failures of the sandbox itself come back as
    status "sandbox_error". `env` is added to a minimal clean environment; the caller's own
    environment never reaches the program. Thread-safe.
    """
    start = time.monotonic()
    try:
        return _run(source, stdin, env or {}, limits, start)
    except Exception as exc:  # noqa: BLE001 - the contract is: never raise
        return RunResult(
            "sandbox_error", None, "", f"sandbox error: {exc!r}", time.monotonic() - start
        )


def _run(source: str, stdin: str, env: dict[str, str], limits: Limits, start: float) -> RunResult:
    global _protections, _last_run_warm
    is_root = os.geteuid() == 0
    uid = sandbox_uid() if is_root else None
    cap = limits.max_output_bytes
    workdir = tempfile.mkdtemp(prefix="cptlab-sbx-", dir=workdir_base())
    proc: subprocess.Popen[bytes] | ServedLauncher | None = None
    status_r = status_w = stdin_fd = out_fd = out_w = err_fd = err_w = -1
    try:
        with open(os.path.join(workdir, "main.py"), "wb") as f:
            f.write(source.encode("utf-8", errors="surrogatepass"))
        os.chmod(os.path.join(workdir, "main.py"), 0o644)
        if hasattr(os, "memfd_create"):
            stdin_fd = os.memfd_create("cptlab-stdin")
        else:  # pragma: no cover - non-Linux
            stdin_fd = os.open(workdir, os.O_TMPFILE | os.O_RDWR, 0o600)
        data = stdin.encode("utf-8", errors="surrogatepass")
        view = memoryview(data)
        while view:
            view = view[os.write(stdin_fd, view) :]
        os.lseek(stdin_fd, 0, os.SEEK_SET)
        status_r, status_w = os.pipe()
        out_fd, out_w = os.pipe()
        err_fd, err_w = os.pipe()
        program_env = dict(BASE_ENV, HOME=workdir, TMPDIR=workdir)
        program_env.update(env)
        cfg = {
            "workdir": workdir,
            "uid": uid,
            "fresh_uid": is_fresh_uid(uid),
            "disabled": tuple(sorted(switches.disabled)),
            "python": sys.executable,
            "argv": PROGRAM_FLAGS + [BOOTSTRAP],
            "source": source.encode("utf-8", errors="surrogatepass"),
            "env": program_env,
            "cpu_seconds": max(1, math.ceil(limits.cpu_seconds)),
            "memory_bytes": int(limits.memory_mb) << 20,
            "max_file_bytes": int(limits.max_file_bytes),
            "max_processes": int(limits.max_processes),
            "tmpfs_bytes": TMPFS_BYTES,
            "tmpfs_inodes": TMPFS_INODES,
            "remap": interpreter_remap() if is_root else [],
        }
        proc = start_launcher(cfg, stdin_fd, out_w, err_w, status_w)
        # The launcher holds the write ends now: ours must go for end of file to arrive.
        for fd in (status_w, out_w, err_w, stdin_fd):
            os.close(fd)
        status_w = out_w = err_w = stdin_fd = -1
        bufs = {out_fd: bytearray(), err_fd: bytearray(), status_r: bytearray()}
        poller = select.poll()
        for fd in bufs:
            poller.register(fd, select.POLLIN)
        open_fds = set(bufs)
        deadline = start + limits.wall_seconds
        grace: float | None = None  # set once the launcher is gone
        reason = None
        while open_fds and reason is None:
            now = time.monotonic()
            if now >= deadline:
                reason = "timeout"
                break
            if status_r not in open_fds:
                # The launcher has exited; only escaped processes (possible in the non-root
                # fallback) can still hold the output pipes. Give in-flight data a moment.
                grace = grace if grace is not None else now + 0.1
                if now >= grace:
                    break
            wait_until = deadline if grace is None else min(deadline, grace)
            for fd, _ in poller.poll(max(1, int((wait_until - now) * 1000) + 1)):
                chunk = os.read(fd, 65536)
                if not chunk:
                    poller.unregister(fd)
                    open_fds.discard(fd)
                    continue
                buf = bufs[fd]
                if fd == status_r:
                    buf += chunk
                elif len(buf) + len(chunk) > cap:
                    buf += chunk[: cap + 1 - len(buf)]
                    reason = "output_limit"
                else:
                    buf += chunk
        messages = parse_status(bufs[status_r])
        if reason is not None or open_fds:  # over a limit, or escapees still hold our pipes
            kill_tree(proc, messages["protections"], uid)
        proc.wait()
        wall = time.monotonic() - start
        _last_run_warm = messages["protections"].pop("warm_interpreter", False)
        if messages["protections"]:
            _protections = dict(messages["protections"])
        if is_fresh_uid(uid) and not messages["protections"].get("mount_namespace", False):
            remove_files_of(uid)
        stdout, stderr = _decode(bufs[out_fd], cap), _decode(bufs[err_fd], cap)
        if reason is not None:
            return RunResult(reason, None, stdout, stderr, wall)
        if messages["error"]:
            return RunResult("sandbox_error", None, stdout, stderr + messages["error"], wall)
        if messages["exit"] is None:
            note = f"sandbox error: launcher exited with {proc.returncode} without a verdict"
            return RunResult("sandbox_error", None, stdout, stderr + note, wall)
        raw, cpu = messages["exit"]
        if os.WIFSIGNALED(raw):
            sig = os.WTERMSIG(raw)
            hit_cpu = sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu >= limits.cpu_seconds)
            return RunResult("timeout" if hit_cpu else "killed", -sig, stdout, stderr, wall)
        code = os.WEXITSTATUS(raw)
        if code == 0:
            return RunResult("ok", 0, stdout, stderr, wall)
        status = "memory" if _is_memory_error(bufs[err_fd]) else "error"
        return RunResult(status, code, stdout, stderr, wall)
    finally:
        for fd in (status_w, stdin_fd, status_r, out_w, out_fd, err_w, err_fd):
            if fd >= 0:
                os.close(fd)
        if proc is not None and proc.poll() is None:  # only on an exception above
            kill_tree(proc, {}, uid)
            proc.wait()
        rmtree(workdir)


def active_protections() -> dict[str, bool]:
    """Which protections the sandbox actually got on this machine, as reported by the launcher
    of the latest run (runs a trivial probe program the first time). See docs/sandbox.md."""
    if _protections is None:
        run_python("pass")
    return dict(_protections or {})
