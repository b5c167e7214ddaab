"""The trainer's side of the launchers: the launcher code compiled once, the launcher server
(started, restarted, asked for a launcher, asked to reap one) and `start_launcher`, which gets a
run its launcher A from the server, or starts one of its own where there is no server.
"""

from __future__ import annotations

import inspect
import marshal
import os
import select
import signal
import socket
import subprocess
import sys
import threading

from cptlab.sandbox import switches
from cptlab.sandbox.housekeeping import TMPFS_BYTES, TMPFS_INODES, interpreter_remap
from cptlab.sandbox.interpreter import (
    BASE_ENV,
    LAUNCHER_STUB,
    PROGRAM_FLAGS,
    SERVER_ENV,
    SERVER_STUB,
    may_run_warm,
)

_compiled: dict[str, str] = {}
_launcher_lock = threading.Lock()


_server: _LauncherServer | None = None
_server_lock = threading.Lock()


def _launcher_code_hex(entry: str = "launcher_main") -> str:
    """The code shipped to a launcher (or to the launcher server), compiled once per parent
    process, so that the child skips parsing it: launcher.py's whole source (and, for the
    server, server.py's after it), then the call of `entry`. The child runs it in a namespace
    of its own (`LAUNCHER_STUB`, `SERVER_STUB`)."""
    if entry not in _compiled:
        with _launcher_lock:
            if entry not in _compiled:
                from cptlab.sandbox import launcher, server  # read here, run there

                modules = [launcher] + ([server] if entry == "launcher_server" else [])
                src = "\n".join(inspect.getsource(m) for m in modules) + f"\n{entry}()\n"
                code = compile(src, "<cptlab-sandbox-launcher>", "exec", dont_inherit=True)
                _compiled[entry] = marshal.dumps(code).hex()
    return _compiled[entry]


class _LauncherServer:
    """The parent's side of the launcher server Z (`launcher_server`)."""

    def __init__(self) -> None:
        code_fd = os.memfd_create("cptlab-launcher")
        data = memoryview(bytes.fromhex(_launcher_code_hex("launcher_server")))
        while data:
            data = data[os.write(code_fd, data) :]
        os.lseek(code_fd, 0, os.SEEK_SET)
        is_root = os.geteuid() == 0
        setup = {  # see `prepare` and `prebuild` in launcher_server
            "prepare": is_root and not {"namespaces", "prepared_tree"} & switches.disabled,
            "remap": interpreter_remap() if is_root else [],
            "disabled": tuple(sorted({"prebuilt"} & switches.disabled)),
            "uid": 0,
            "workdir": "/",
            "tmpfs_bytes": TMPFS_BYTES,
            "tmpfs_inodes": TMPFS_INODES,
        }
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        started = threading.Event()
        box: dict = {}

        def start_and_hold() -> None:
            # PDEATHSIG fires when the thread that started Z exits, not the process: Z is
            # started from this thread, which lives as long as Z (a reward pool's threads end
            # with every step).
            try:
                box["proc"] = subprocess.Popen(
                    PROGRAM_FLAGS + [SERVER_STUB, str(code_fd), str(theirs.fileno()),
                                      str(os.getpid()), marshal.dumps(setup).hex()],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    pass_fds=(theirs.fileno(), code_fd),
                    env=SERVER_ENV,
                    cwd="/",
                    start_new_session=True,
                    close_fds=True,
                )  # fmt: skip
            except BaseException as exc:  # noqa: BLE001 - handed to the starting thread
                box["error"] = exc
            started.set()
            if "proc" in box:
                box["proc"].wait()

        threading.Thread(target=start_and_hold, name="cptlab-sandbox-server", daemon=True).start()
        started.wait()
        theirs.close()
        os.close(code_fd)
        if "error" in box:
            ours.close()
            raise box["error"]
        self.proc: subprocess.Popen[bytes] = box["proc"]
        self.sock = ours
        self.lock = threading.Lock()
        self.owner = os.getpid()

    def alive(self) -> bool:
        """Running, and ours: a forked child of the parent must not share the parent's socket
        (their requests and replies would interleave); it starts a server of its own."""
        return self.owner == os.getpid() and self.proc.poll() is None

    def request(self, message: bytes, fds: tuple[int, ...] = ()) -> bytes:
        with self.lock:
            socket.send_fds(self.sock, [message], list(fds))
            reply = self.sock.recv(64)
        if not reply or reply == b"E":
            raise OSError(f"the sandbox launcher server did not answer {message[:1]!r}")
        return reply


class ServedLauncher:
    """A launcher forked by the server, with the part of Popen's interface that the runner and
    `kill_tree` use. Its pidfd signals it without a pid-reuse race."""

    def __init__(self, server: _LauncherServer, pid: int) -> None:
        self.server, self.pid, self.returncode = server, pid, None
        self._pidfd = os.pidfd_open(pid)

    def poll(self) -> int | None:
        if self.returncode is None and _readable(self._pidfd, 0.0):
            self._reap()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not _readable(self._pidfd, timeout):
                raise subprocess.TimeoutExpired("sandbox launcher", timeout or 0.0)
            self._reap()
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            signal.pidfd_send_signal(self._pidfd, signum)

    def _reap(self) -> None:
        try:
            status = int(self.server.request(b"W%d" % self.pid)[1:])
        except OSError:  # the server died, and its launchers with it (PDEATHSIG)
            status = signal.SIGKILL
        os.close(self._pidfd)
        self.returncode = os.waitstatus_to_exitcode(status)


def _readable(fd: int, timeout: float | None) -> bool:
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(None if timeout is None else max(0, int(timeout * 1000))))


def _launcher_server_for_run() -> _LauncherServer | None:
    """This process's launcher server, (re)started when needed; None where it cannot run (no
    pidfd: Linux before 5.3) or the tests switch it off."""
    global _server
    if "launcher_server" in switches.disabled or not hasattr(os, "pidfd_open"):
        return None
    with _server_lock:
        if _server is None or not _server.alive():
            _server = _LauncherServer()
        return _server


# Switches (tests, benchmarks) under which a run does not take the server's pre-built launcher.
_PREBUILT_OFF = frozenset({"namespaces", "readonly", "prepared_tree", "prebuilt"})


def start_launcher(
    cfg: dict, stdin_fd: int, out_w: int, err_w: int, status_w: int
) -> subprocess.Popen[bytes] | ServedLauncher:
    """Launcher A for one run, forked by the server, or started on its own where there is none
    (and when the server dies between runs, restarted once)."""
    for _ in range(2):
        server = _launcher_server_for_run()
        if server is None:
            break
        cfg_fd = os.memfd_create("cptlab-cfg")
        try:
            data = memoryview(marshal.dumps(dict(cfg, warm=may_run_warm(cfg))))
            while data:
                data = data[os.write(cfg_fd, data) :]
            fds = (stdin_fd, out_w, err_w, status_w, cfg_fd)
            ready_made = cfg["uid"] is not None and not _PREBUILT_OFF & switches.disabled
            pid = int(server.request(b"U" if ready_made else b"R", fds)[1:])
        except OSError:
            continue
        finally:
            os.close(cfg_fd)
        return ServedLauncher(server, pid)
    argv = [sys.executable, "-I", "-S", "-c", LAUNCHER_STUB, _launcher_code_hex()]
    cfg = {k: v for k, v in cfg.items() if k != "source"}  # in main.py
    argv.append(
        marshal.dumps(dict(cfg, status_fd=status_w, parent_pid=os.getpid(), warm=False)).hex()
    )
    return subprocess.Popen(
        argv,
        stdin=stdin_fd,
        stdout=out_w,
        stderr=err_w,
        pass_fds=(status_w,),
        env={"PATH": BASE_ENV["PATH"], "LANG": "C.UTF-8"},
        cwd=cfg["workdir"],
        start_new_session=True,
        close_fds=True,
    )
