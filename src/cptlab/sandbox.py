"""Hardened runner for untrusted, model-written Python programs.

Every call of :func:`run_python` runs one program in a fresh, throw-away process tree:

    trainer --(request)--> server Z --fork--> launcher A --fork--> init B (PID 1 of new namespaces)
                                                     --fork--> C: limits, drop uid, run python

* Z is a ``python -S -s -B`` process (root, or the caller's uid) started once per trainer
  process with the program's interpreter flags and interpreter environment, that forks a
  launcher per request (:func:`_launcher_server`); it dies with the trainer. Where it cannot run
  (no pidfd) the trainer starts each launcher itself (vfork+exec).
* A (root, or the caller's uid) unshares new mount, PID, network and IPC namespaces (as root
  directly, from a mount tree Z prepared once: every mount read-only, the interpreter
  re-exposed; otherwise inside a new user namespace). As root Z makes the next run's A (and its
  B, up to its /proc and /dev/shm) while a run runs; that A and B then wait for their run,
  which only they receive, and serve no other.
* B is PID 1 of the new PID namespace. It mounts a size-capped tmpfs on the per-run work folder,
  a fresh ``/proc`` and a private ``/dev/shm`` (and, where Z prepared no tree, first makes every
  mount read-only), then forks C and reaps. When C exits B SIGKILLs everything left in the
  namespace, so daemonised grandchildren (``setsid``, double fork) die with the program; if A or
  B is killed the kernel tears the whole namespace down (B has PDEATHSIG=SIGKILL, and an init's
  death kills its namespace).
* C applies the rlimits, drops to a fresh unprivileged uid (root only), sets no_new_privs,
  installs a seccomp filter (no non-AF_UNIX sockets, no namespace/mount/bpf/io_uring/ptrace
  syscalls) and runs the interpreter on ``main.py`` in the work folder: as root, the warm
  interpreter it was forked from (Z's, which never ran a program), made to look as after an
  exec (:func:`_launcher_main`'s ``warm_program``); otherwise, or when the run's environment
  sets what an interpreter reads at its start, it execs a fresh one.

When namespaces are unavailable (e.g. a container without CAP_SYS_ADMIN, or a laptop with user
namespaces disabled) the runner degrades: A supervises C directly as a child subreaper and kills
left-over processes by uid (root) or by walking its descendants (non-root); see
:func:`active_protections` for what a given machine actually gets, and docs/sandbox.md for the
threat model.

The trainer calls this hundreds of times per RL step, so the launcher avoids every import it can
(its code is shipped pre-compiled through marshal; it imports only ctypes, resource, struct),
the server pays its interpreter start and imports once for every launcher and every warm
program, and the parent uses vfork (no ``preexec_fn``). bench/bench_sandbox_floor.py measures
what is left against the floor.
"""

from __future__ import annotations

import inspect
import marshal
import math
import os
import random
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

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


# Size of the tmpfs that backs the work folder and the private /dev/shm (namespace mode).
_TMPFS_BYTES = 32 << 20
_TMPFS_INODES = 4096
# Per-run sandbox uids are drawn from this range (root only), so RLIMIT_NPROC counts only this
# run's processes and a kill-by-uid can never hit anything else.
_UID_RANGE = (1_500_000_000, 1_600_000_000)
_FALLBACK_UID = 65534  # nobody: used when the uid map is restricted (rootless containers)
# Protections the tests may switch off to exercise the fallback paths. Never set in production.
_disabled: frozenset[str] = frozenset()

_BASE_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "PYTHONHASHSEED": "0",
    "PYTHONIOENCODING": "utf-8",
    "PYTHONUTF8": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
}

# Runs as the program's `__main__` (python -S -c ...). It restores exit()/quit() (which `-S`
# drops but model code uses), makes sys.argv/__file__ look like `python main.py`, and hides its
# own frame (and, in a warm interpreter, the launcher's frame above it) from tracebacks so that
# stderr looks exactly like a plain script run.
_BOOTSTRAP = """\
import sys as _s, builtins as _b
class _Quitter:
    def __init__(self, name):
        self.name = name
    def __repr__(self):
        return f"Use {self.name}() to exit"
    def __call__(self, code=None):
        raise SystemExit(code)
_b.exit, _b.quit = _Quitter("exit"), _Quitter("quit")
def _hook(t, v, tb, _me=_s._getframe().f_code, _orig=_s.excepthook):
    mine = tb
    while mine is not None and mine.tb_frame.f_code is not _me:
        mine = mine.tb_next
    if mine is not None:
        tb = mine.tb_next
        if isinstance(v, BaseException):
            v.__traceback__ = tb
    _orig(t, v, tb)
_s.excepthook = _hook
__file__ = "main.py"
_s.argv[:] = [__file__]
with open(__file__, "rb") as _f:
    _code = compile(_f.read(), __file__, "exec")
del _s, _b, _Quitter, _hook, _f
exec(globals().pop("_code"))
"""

# The program's interpreter: `python -S -s -B -c <bootstrap>` in _BASE_ENV plus the run's env.
_PROGRAM_FLAGS = [sys.executable, "-S", "-s", "-B", "-c"]
_LAUNCHER_STUB = "import marshal,sys;exec(marshal.loads(bytes.fromhex(sys.argv[1])))"
# The server's: a program process forked from the server (a warm interpreter) returns from the
# launcher code with a fresh __main__ namespace and runs the bootstrap right here, at the top
# level and on the same lines as after exec, so that exit codes, uncaught exceptions, the stack
# depth and interpreter shutdown (atexit, threads, flushing) are the interpreter's own.
# Unlike exec-ed programs it records how the program ended, for `warm_exit`. The launcher code
# comes in a file (argv[1] its descriptor), so that the argv a program inherits stays small.
_SERVER_STUB = (
    "import marshal,sys;exec(marshal.loads(open(int(sys.argv[1]),'rb').read()))"
    + ";"
    + _BOOTSTRAP.replace(
        'exec(globals().pop("_code"))\n',
        'try: exec(globals().pop("_code"))\n'
        "except BaseException as _e: _cptlab_exit = _e; raise\n"
        "_cptlab_exit = None\n",
    )
)


def _launcher_main(cfg: dict | None = None) -> bool:  # pragma: no cover - runs in the launcher
    """Body of the launcher process A (and, after forks, of B and C). `cfg` comes from the
    command line when A is started on its own, as an argument when the server forks it (or
    forks the helper that prepares the mount tree, cfg["template"]). Returns (True) only in a
    program process C that runs in the server's warm interpreter (`run_program`).

    Self-contained on purpose: its source is compiled in the parent and shipped via marshal, so
    it may use only what it imports itself. Messages to the parent go over the status pipe as
    lines "P <protection> 0|1", "X <wait status> <cpu seconds>" and "E <sandbox error>".
    """
    import _signal as signal  # the `signal` module imports enum: ~4 ms of startup
    import ctypes
    import marshal
    import os
    import resource
    import struct
    import sys

    if cfg is None:
        cfg = marshal.loads(bytes.fromhex(sys.argv[2]))
    status_fd = cfg["status_fd"]  # -1 in a pre-built launcher, until its run comes
    if status_fd >= 0:
        os.set_inheritable(status_fd, False)
    workdir = cfg["workdir"]
    uid = cfg["uid"]  # the sandbox uid when we are root, else None
    disabled = cfg["disabled"]
    is_root = uid is not None
    os.umask(0o022)

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = (
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_ulong,
        ctypes.c_char_p,
    )
    libc.prctl.argtypes = (ctypes.c_int,) + (ctypes.c_ulong,) * 4
    libc.unshare.argtypes = (ctypes.c_int,)

    pr_set_pdeathsig, pr_set_dumpable, pr_set_seccomp = 1, 4, 22
    pr_set_child_subreaper, pr_set_no_new_privs = 36, 38
    ms_rdonly, ms_nosuid, ms_nodev, ms_noexec = 1, 2, 4, 8
    ms_remount, ms_bind, ms_rec, ms_private = 32, 4096, 16384, 1 << 18
    clone_newns, clone_newipc, clone_newuser = 0x20000, 0x08000000, 0x10000000
    clone_newpid, clone_newnet = 0x20000000, 0x40000000
    tmpfs_opts = f"size={cfg['tmpfs_bytes']},nr_inodes={cfg['tmpfs_inodes']}"

    def say(kind, text):
        os.write(status_fd, f"{kind} {text}\n".encode())

    def protect(**flags):
        say("P", " ".join(f"{k}={int(bool(v))}" for k, v in flags.items()))

    def check(ret, what):
        if ret != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"{what}: {os.strerror(err)}")

    def enc(s):
        return None if s is None else s.encode()

    def mount(src, target, fstype, flags, data=None):
        check(libc.mount(enc(src), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")

    def seccomp_filter():
        """BPF program: deny every socket but an AF_UNIX stream (socket, socketpair), deny
        connect, namespace/mount/bpf/io_uring/ptrace/keyring syscalls and foreign syscall
        ABIs; clone3 gets ENOSYS so libc falls back to clone, whose flags (unlike clone3's)
        the filter can inspect.

        Why connect: a read-only mount does not stop connect() to a host process's socket
        file, and only connect (stream) or a destination address (datagram) reaches one. With
        datagram sockets gone and connect denied, a program can talk to nothing but its own
        socketpairs (multiprocessing, asyncio's self-pipe)."""
        machine = os.uname().machine
        if machine == "x86_64":
            arch, socket_nr, socketpair_nr, clone_nr = 0xC000003E, 41, 53, 56
            denied = [272, 308, 165, 166, 155, 161, 101, 321, 298, 323, 250, 248, 249, 246]
            denied += [175, 313, 310, 311, 42]  # ..., connect
        elif machine == "aarch64":
            arch, socket_nr, socketpair_nr, clone_nr = 0xC00000B7, 198, 199, 220
            denied = [97, 268, 40, 39, 41, 51, 117, 280, 241, 282, 219, 217, 218, 104]
            denied += [105, 273, 270, 271, 203]  # ..., connect
        else:
            return None
        denied += [425, 426, 427, 428, 429, 430, 431, 432, 433, 442]  # io_uring, new mount API
        ld, jeq, jge, jset, ret, and_k = 0x20, 0x15, 0x35, 0x45, 0x06, 0x54
        allow, eperm, enosys = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38
        prog = [(ld, 0, 0, 4), (jeq, 0, "deny", arch), (ld, 0, 0, 0)]
        if machine == "x86_64":
            prog.append((jge, "deny", 0, 0x40000000))  # x32 ABI
        prog += [(jeq, "deny", 0, nr) for nr in denied]
        prog += [
            (jeq, "enosys", 0, 435),
            (jeq, "socket", 0, socket_nr),
            (jeq, "socket", 0, socketpair_nr),
            (jeq, "clone", 0, clone_nr),
            (ret, 0, 0, allow),
            ("socket", ld, 0, 0, 16),
            (jeq, 0, "deny", 1),  # AF_UNIX
            (ld, 0, 0, 24),
            (and_k, 0, 0, 0xF),  # the type without SOCK_NONBLOCK / SOCK_CLOEXEC
            (jeq, "allow", "deny", 1),  # SOCK_STREAM
            ("clone", ld, 0, 0, 16),
            (jset, "deny", "allow", 0x7E020000),  # CLONE_NEW{NS,CGROUP,UTS,IPC,USER,PID,NET}
            ("allow", ret, 0, 0, allow),
            ("deny", ret, 0, 0, eperm),
            ("enosys", ret, 0, 0, enosys),
        ]
        labels, rows = {}, []
        for ins in prog:
            if isinstance(ins[0], str):
                labels[ins[0]] = len(rows)
                ins = ins[1:]
            rows.append(ins)
        blob = b""
        for i, (code, jt, jf, k) in enumerate(rows):
            jt = labels[jt] - i - 1 if isinstance(jt, str) else jt
            jf = labels[jf] - i - 1 if isinstance(jf, str) else jf
            blob += struct.pack("=HBBI", code, jt, jf, k)
        return blob

    def remount_all_readonly():
        """Read-only bind-remount of every mount in our private mount namespace. Keeps the
        nosuid/nodev/noexec flags, which a user namespace is not allowed to clear."""
        pseudo = {"proc", "sysfs", "cgroup", "cgroup2", "devpts", "mqueue", "securityfs"}
        pseudo |= {"debugfs", "tracefs", "pstore", "bpf", "fusectl", "configfs", "hugetlbfs"}
        pseudo |= {"binfmt_misc", "autofs", "nsfs", "efivarfs", "rpc_pipefs"}
        ok = True
        with open("/proc/self/mountinfo", "rb") as f:
            lines = f.read().decode("latin-1").splitlines()
        for line in lines:
            fields = line.split(" ")
            point = fields[4]
            if "\\" in point:  # mountinfo escapes space, tab, newline and backslash as octal
                raw = point.encode("latin-1").decode("unicode_escape").encode("latin-1")
                point = os.fsdecode(raw)
            fstype = fields[fields.index("-") + 1]
            try:
                st = os.statvfs(point).f_flag
                keep = st & (ms_nosuid | ms_nodev | ms_noexec)
                mount(None, point, None, ms_remount | ms_bind | ms_rdonly | keep)
            except (OSError, ValueError):
                if fstype not in pseudo:
                    ok = False
        return ok

    def prepare_tree():
        """The mount tree every run starts from: private, every mount read-only, and (root) the
        interpreter's trees re-exposed where the sandbox uid could not reach them (pyenv in
        /root, mode 0700) on a read-only 0755 tmpfs. Returns whether all is read-only."""
        mount(None, "/", None, ms_rec | ms_private)
        readonly = "readonly" not in disabled and remount_all_readonly()
        for blocked, needed in cfg["remap"]:
            held = [os.open(path, os.O_PATH | os.O_DIRECTORY) for path in needed]
            mount("tmpfs", blocked, "tmpfs", ms_nosuid | ms_nodev, "size=65536,mode=0755")
            for fd, path in zip(held, needed, strict=True):  # the hidden trees, by descriptor
                os.makedirs(path, exist_ok=True)
                mount(f"/proc/self/fd/{fd}", path, None, ms_bind | ms_rec)
                os.close(fd)
                mount(None, path, None, ms_remount | ms_bind | ms_rdonly | ms_nosuid | ms_nodev)
            mount(None, blocked, None, ms_remount | ms_bind | ms_rdonly | ms_nosuid | ms_nodev)
        return readonly

    def run_mounts():
        """This run's own /proc and private /dev/shm, on top of the prepared tree. Returns
        whether each was mounted."""
        try:
            mount("proc", "/proc", "proc", ms_rdonly | ms_nosuid | ms_nodev | ms_noexec)
            private_proc = True
        except OSError:
            private_proc = False
        private_shm = True
        if os.path.isdir("/dev/shm"):  # private: multiprocessing's semaphores live there
            try:
                mount("tmpfs", "/dev/shm", "tmpfs", ms_nosuid | ms_nodev, tmpfs_opts + ",mode=1777")
            except OSError:
                private_shm = False
        return private_proc, private_shm

    def work_mount(source, readonly, private_proc, private_shm):
        """The size-capped work folder holding main.py; then the mount protections' report."""
        os.makedirs(workdir, exist_ok=True)  # hidden if it lived in /dev/shm: recreate it
        owner = f",uid={uid},gid={uid}" if is_root else ""
        mount("tmpfs", workdir, "tmpfs", ms_nosuid | ms_nodev, tmpfs_opts + ",mode=0700" + owner)
        with open(os.path.join(workdir, "main.py"), "wb") as f:
            f.write(source)
        readonly = readonly and private_shm
        protect(mount_namespace=True, readonly_filesystem=readonly, private_proc=private_proc)
        protect(private_workdir=True)

    def report_namespaces(in_ns):
        protect(
            separate_process=True,
            pid_namespace=in_ns,
            network_namespace=in_ns,
            ipc_namespace=in_ns,
            user_namespace=in_ns and not is_root,
            kill_descendants=in_ns or cfg["fresh_uid"],
        )

    def receive_run():
        """A pre-built B (cfg["prebuilt"]): wait on descriptor 3 for the run the server hands
        over (its stdin, stdout, stderr, status and cfg, as the server receives them), put
        them at 0..3 and return the run's cfg."""
        import _socket

        request = _socket.socket(fileno=3)
        message, ancillary, _, _ = request.recvmsg(16, _socket.CMSG_LEN(5 * 4))
        fds = []
        for level, kind, data in ancillary:
            if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
                fds += struct.unpack(f"{len(data) // 4}i", data[: len(data) // 4 * 4])
        request.close()
        if message != b"R" or len(fds) != 5:
            os._exit(1)
        size, chunks = os.fstat(fds[4]).st_size, []
        while size > 0 and (chunk := os.pread(fds[4], size, sum(map(len, chunks)))):
            chunks.append(chunk)
            size -= len(chunk)
        run = marshal.loads(b"".join(chunks))
        for target, fd in enumerate(fds[:4]):  # every received fd is above 3
            os.dup2(fd, target)
        for fd in fds:
            os.close(fd)
        os.set_inheritable(3, False)
        return run

    def count_my_tasks():
        me, total = str(os.getuid()), 0
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/status") as f:
                        text = f.read()
                except OSError:
                    continue
                fields = dict(ln.split(":", 1) for ln in text.splitlines() if ":" in ln)
                if fields.get("Uid", "").split()[:1] == [me]:
                    total += int(fields.get("Threads", "1"))
        return total

    def show_as_program():
        """/proc/<pid>/cmdline and environ of a warm program: those an exec would give it (the
        server's argv holds the launcher code, its environment is not the program's), so that
        the program and its children look on the host as after exec. Both show the blocks the
        kernel placed at the server's start, which we overwrite in place (as setproctitle
        does); the server's environment carries room for the program's (`_SERVER_ENV`)."""
        libc.clearenv()  # no environ entry may point into the block we overwrite
        os.environ.clear()
        os.environ.update(cfg["env"])
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        arg_start, arg_end, env_start, env_end = (int(x) for x in fields[45:49])
        for start, end, items in (
            (arg_start, arg_end, cfg["argv"]),
            (env_start, env_end, [f"{k}={v}" for k, v in cfg["env"].items()]),
        ):
            block = b"".join(os.fsencode(item) + b"\0" for item in items)
            if len(block) > end - start:
                raise OSError("no room for the program's argv or environment")
            ctypes.memmove(start, block + bytes(end - start - len(block)), end - start)

    def warm_program():
        """The rest of what exec would do, in this forked interpreter (started with the program's
        flags and interpreter environment, which never ran another program): the program's
        environment, stdio objects, signal dispositions, sys.path/argv and a fresh __main__;
        then every other descriptor closed. Returns True, up to the server's top level."""
        import builtins
        import io

        show_as_program()
        streams = []
        for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
            old = getattr(sys, name)  # made by this interpreter's start: same encoding/errors
            mode = "r" if fd == 0 else "w"
            buf = open(fd, mode + "b", -1, closefd=False)
            buf.raw.name = f"<{name}>"
            line = fd == 2 or buf.raw.isatty()  # as the interpreter's create_stdio
            text = io.TextIOWrapper(buf, old.encoding, old.errors, "\n", line, False)
            text.mode = mode
            streams.append(text)
        sys.stdin, sys.stdout, sys.stderr = streams
        sys.__stdin__, sys.__stdout__, sys.__stderr__ = streams
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sys.path.insert(0, "")  # `python -c`: the working folder first
        sys.orig_argv = list(cfg["argv"])
        # __main__ as `python -c` makes it. Its namespace is also that of the launcher code and
        # of the server's top level, which runs the bootstrap once we have returned.
        namespace = vars(sys.modules["__main__"])
        fresh = {k: namespace[k] for k in ("__name__", "__doc__", "__package__", "__loader__")}
        fresh.update(__spec__=None, __annotations__={}, __builtins__=builtins)
        namespace.clear()
        namespace.update(fresh)
        had_atexit = "atexit" in sys.modules
        import atexit

        atexit.register(warm_exit, namespace)  # the first registered runs last
        if not had_atexit:
            del sys.modules["atexit"]  # as after exec; the registration stays
        # the status pipe last: nothing can be reported after it
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        return True

    def warm_exit(namespace):
        """The end of a warm program's interpreter, registered with atexit before the program.

        Called by the interpreter's own shutdown, after the non-daemon threads were joined and
        every other atexit callback ran, it does what remains of that shutdown that a program's
        output can show: flush sys.stdout and sys.stderr, then every file object the program
        left open (as their finalizers would: a file on fd 1 left unflushed still writes), then
        C stdio; and it exits with the status the interpreter would (`_SERVER_STUB` records how
        the program ended). What it skips, tearing down every object of the interpreter, would
        copy each page of them that the fork shares with the server: most of a warm program's
        cost. (Also skipped: __del__ of objects still alive at exit, which Python does not
        promise to call.) Anything unusual, such as a flush that fails, or no record (main.py
        did not compile, so the program never ran): return, and the interpreter finishes on its
        own, as it would after exec."""
        import _io as io
        import gc

        try:
            if "_cptlab_exit" not in namespace:
                return
            ended = namespace.pop("_cptlab_exit")
            code = 0
            if isinstance(ended, SystemExit):  # as the interpreter's handle_system_exit
                value = ended.code
                if isinstance(value, int):
                    code = value & 0xFF if -(1 << 63) <= value < 1 << 63 else 255
                elif value is not None:
                    code = 1  # the interpreter printed it
            elif ended is not None:
                code = 1  # the interpreter printed the traceback
            streams = [getattr(sys, "stdout", None), getattr(sys, "stderr", None)]
            # the program's objects only: the server froze its own (gc.freeze)
            streams += [obj for obj in gc.get_objects() if isinstance(obj, io._IOBase)]
            for stream in streams:
                try:
                    closed = stream is None or stream.closed
                except Exception:  # noqa: BLE001 - as the interpreter's file_is_closed
                    closed = False
                if not closed:
                    stream.flush()
            libc.fflush(None)
        except BaseException:  # noqa: BLE001 - the interpreter's own shutdown takes over
            return
        if isinstance(ended, KeyboardInterrupt):  # the interpreter exits by SIGINT then
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
            code = 130
        os._exit(code)

    def run_program(in_ns, nproc):
        """Process C: limits, privilege drop, no_new_privs, seccomp, exec. Never returns, but in
        a warm interpreter (root, namespaces), where instead of exec-ing it returns True all the
        way up to the server's top level, which runs the program (`warm_program`)."""
        warm = in_ns and is_root and cfg.get("warm", False)
        try:
            for signum in (signal.SIGINT, signal.SIGTERM):
                signal.signal(signum, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, set())
            os.chdir(workdir)
            cpu = cfg["cpu_seconds"]
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
            resource.setrlimit(resource.RLIMIT_AS, (cfg["memory_bytes"],) * 2)
            resource.setrlimit(resource.RLIMIT_FSIZE, (cfg["max_file_bytes"],) * 2)
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
            if is_root:
                os.setgroups([])
                os.setresgid(uid, uid, uid)
                os.setresuid(uid, uid, uid)
                if os.getuid() != uid or os.geteuid() != uid or os.getgroups():
                    raise OSError("privilege drop did not take effect")
            if warm:  # as exec would: a changed uid made us non-dumpable
                check(libc.prctl(pr_set_dumpable, 1, 0, 0, 0), "dumpable")
            check(libc.prctl(pr_set_no_new_privs, 1, 0, 0, 0), "no_new_privs")
            seccomp = False
            if blob is not None and "seccomp" not in disabled:
                buf = ctypes.create_string_buffer(blob)
                fprog = struct.pack("HxxxxxxQ", len(blob) // 8, ctypes.addressof(buf))
                fbuf = ctypes.create_string_buffer(fprog)
                seccomp = libc.prctl(pr_set_seccomp, 2, ctypes.addressof(fbuf), 0, 0) == 0
            protect(rlimits=True, process_limit=True, privilege_drop=is_root)
            protect(no_new_privs=True, seccomp=seccomp, warm_interpreter=warm)
            if warm:
                return warm_program()
            os.execve(cfg["python"], cfg["argv"], cfg["env"])
        except PermissionError as exc:
            hint = "interpreter not accessible to the sandbox uid; without a mount namespace it"
            hint += " must live in a world-readable location (e.g. /usr, /usr/local, /opt)"
            say("E", f"program setup failed: {exc!r}: {hint}")
        except BaseException as exc:  # noqa: BLE001 - report anything, then die
            try:
                say("E", f"program setup failed: {exc!r}".replace("\n", " "))
            except OSError:
                pass
        os._exit(127)

    def kill_by_uid():
        """Root fallback: a helper with the sandbox uid kill(-1)s every process of that uid."""
        helper = os.fork()
        if helper == 0:
            try:
                os.setgroups([])
                os.setresgid(uid, uid, uid)
                os.setresuid(uid, uid, uid)
                for _ in range(1000):
                    os.kill(-1, signal.SIGKILL)
            except OSError:
                pass  # ESRCH: nothing left to kill
            os._exit(0)
        os.waitpid(helper, 0)

    def kill_descendants():
        """Non-root fallback: we are a child subreaper, so every orphan is re-parented to us;
        kill our children until none are left."""
        me = os.getpid()
        for _ in range(2000):
            try:
                with open(f"/proc/{me}/task/{me}/children") as f:
                    kids = [int(p) for p in f.read().split()]
            except OSError:
                kids = []
            if not kids:
                return
            for kid in kids:
                try:
                    os.kill(kid, signal.SIGKILL)
                except OSError:
                    pass
            reap(block=False)

    def reap(block):
        while True:
            try:
                pid, _ = os.waitpid(-1, 0 if block else os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return

    def kill_rest(in_ns):
        if in_ns:  # we are PID 1 of the namespace: kill(-1) reaches everything in it
            try:
                os.kill(-1, signal.SIGKILL)
            except OSError:
                pass
        elif cfg["fresh_uid"]:
            kill_by_uid()
        else:
            kill_descendants()
        reap(block=True)

    def supervise(child, in_ns):
        status, cpu = None, 0.0
        while True:
            try:
                pid, st, ru = os.wait4(-1, 0)
            except ChildProcessError:
                break
            if pid == child:
                status, cpu = st, ru.ru_utime + ru.ru_stime
                break
        if status is not None:
            say("X", f"{status} {cpu:.3f}")
        kill_rest(in_ns)
        os._exit(0)

    try:
        check(libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0), "pdeathsig")
        if os.getppid() != cfg["parent_pid"]:
            os._exit(1)  # the trainer died before we set PDEATHSIG
        if cfg.get("template"):  # the server's helper that prepares the tree (root only)
            flags = clone_newns | clone_newpid | clone_newnet | clone_newipc
            check(libc.unshare(flags), "unshare")  # what every launcher will need
            readonly = prepare_tree()
            blob = seccomp_filter()
            say("T", f"{int(readonly)} {blob.hex() if blob else '-'}")
            while True:
                signal.pause()  # until the server has our mount namespace and kills us
        blob = cfg["seccomp_blob"] if "seccomp_blob" in cfg else seccomp_filter()
        prebuilt = cfg.get("prebuilt", False)  # made before its run, which B then receives
        nproc = cfg.get("max_processes", 0)
        in_ns = False
        if "namespaces" not in disabled:
            flags = clone_newns | clone_newpid | clone_newnet | clone_newipc
            if is_root:
                in_ns = libc.unshare(flags) == 0
            elif libc.unshare(flags | clone_newuser) == 0:
                # A launcher forked by the server inherits its non-dumpable flag, and a
                # non-dumpable process cannot write its own uid_map (its /proc/self files then
                # belong to root). Dumpable only until the maps are written (below).
                check(libc.prctl(pr_set_dumpable, 1, 0, 0, 0), "dumpable")
                real_uid, real_gid = os.getuid(), os.getgid()
                for name, text in (
                    ("setgroups", "deny"),
                    ("uid_map", f"{real_uid} {real_uid} 1"),
                    ("gid_map", f"{real_gid} {real_gid} 1"),
                ):
                    with open(f"/proc/self/{name}", "w") as f:
                        f.write(text)
                in_ns = True
        # Without a uid drop (user namespace) the program has our uid. Non-dumpable keeps it out
        # of our /proc/<pid>/{mem,fd} (the status pipe!) and ignoring SIGINT leaves it nothing to
        # throw at the init; other signals to a namespace init are dropped by the kernel. Both
        # are inherited by B and undone for C (exec resets dumpable; run_program resets SIGINT).
        # (Not earlier: a non-dumpable process cannot write its own uid_map.)
        check(libc.prctl(pr_set_dumpable, 0, 0, 0, 0), "dumpable")
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if prebuilt and not in_ns:
            os._exit(1)  # the server falls back to a launcher per run
        if not prebuilt:
            report_namespaces(in_ns)
        kids = []

        def on_term(signum, frame):
            """The parent's timeout/kill request: take the whole tree down before exiting."""
            for kid in kids:
                try:
                    os.kill(kid, signal.SIGKILL)
                except OSError:
                    pass
            if in_ns:
                reap(block=True)  # init B is reaped only after its namespace is empty
            else:
                kill_rest(False)
            os._exit(0)

        def fork_child():
            """fork() with SIGTERM blocked, so that on_term always knows every child."""
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
            pid = os.fork()
            if pid == 0:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
            else:
                kids.append(pid)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
            return pid

        signal.signal(signal.SIGTERM, on_term)
        if in_ns:
            source = cfg.pop("source", None)  # else in main.py, before B hides the host's copy
            if source is None and not prebuilt:
                with open(os.path.join(workdir, "main.py"), "rb") as f:
                    source = f.read()
            lifeline_r, lifeline_w = os.pipe()
            if fork_child() == 0:  # B: PID 1 of the new namespaces
                os.close(lifeline_w)
                check(libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0), "pdeathsig")
                os.set_blocking(lifeline_r, False)
                try:
                    if os.read(lifeline_r, 1) == b"":
                        os._exit(1)  # A died before PDEATHSIG was armed
                except BlockingIOError:
                    pass
                os.close(lifeline_r)
                readonly = cfg.get("template_readonly")  # in the server's prepared tree
                if readonly is None:
                    readonly = prepare_tree()
                private_proc, private_shm = run_mounts()
                if prebuilt:  # now the run: its settings, then what A would have reported
                    cfg = dict(receive_run(), seccomp_blob=blob, parent_pid=cfg["parent_pid"])
                    status_fd, workdir, uid = 3, cfg["workdir"], cfg["uid"]
                    disabled, is_root = cfg["disabled"], uid is not None
                    nproc = cfg["max_processes"]
                    report_namespaces(True)
                    source = cfg.pop("source")
                work_mount(source, readonly, private_proc, private_shm)
                child = os.fork()
                if child == 0:
                    return run_program(True, nproc)
                supervise(child, True)
            os.close(lifeline_r)
            if prebuilt:
                os.close(3)  # the run goes to B: only B may hold the request socket
            reap(block=True)
            os._exit(0)
        # Fallback: no namespaces. A supervises C directly as a child subreaper.
        check(libc.prctl(pr_set_child_subreaper, 1, 0, 0, 0), "subreaper")
        if is_root:
            os.chown(workdir, uid, uid)
        else:
            nproc += count_my_tasks()  # RLIMIT_NPROC counts all of our uid's tasks
        protect(mount_namespace=False, readonly_filesystem=False, private_proc=False)
        protect(private_workdir=False)
        child = fork_child()
        if child == 0:
            return run_program(False, nproc)
        supervise(child, False)
    except BaseException as exc:  # noqa: BLE001 - report anything, then die
        try:
            say("E", f"launcher failed: {exc!r}".replace("\n", " "))
        except OSError:
            pass
        os._exit(1)


def _launcher_server() -> None:  # pragma: no cover - runs in the launcher server process
    """Body of the launcher server Z, which forks a launcher A for each run.

    Starting a launcher costs an interpreter start and the ctypes import (about 25 ms of CPU);
    forking one from a server that has paid them once costs about 1 ms. Z is started once per
    parent process and serves its requests one at a time over a SOCK_SEQPACKET socket (fd
    argv[2]):

        b"R", with fds (stdin, stdout, stderr, status, cfg)  ->  b"P<pid>"
        b"W<pid>"  ->  waits for that launcher; b"S<wait status>"

    The run's cfg (marshal) comes in a file that only the launcher reads: nothing of a run ever
    enters Z's memory, which every later launcher (and, in a warm interpreter, every later
    program) inherits. b"U" is the same request where the run may take the launcher that Z has
    pre-built for it (`prebuild`): Z then passes the five descriptors on, unread, to that
    launcher's B, and answers with that launcher's pid.

    Z runs with the program's interpreter flags and interpreter environment (`_SERVER_STUB`,
    `_SERVER_ENV`), so that the program process C, forked from it through A and B, can skip its
    exec and the interpreter start (`warm_program`): Z never runs a program itself, so every
    program starts from the same untouched interpreter, in namespaces of its own. As root, Z
    also prepares once the mount tree that every run starts from (`prepare`).

    A launcher is reaped only when the parent asks, so its pid cannot be reused while the parent
    may still signal it. Z dies with the parent (PDEATHSIG, then a parent-pid check), and every
    launcher with Z (the launcher's own PDEATHSIG). Returns only in a warm program process C,
    whose program the top level then runs.
    """
    import sys

    if sys.path[:1] == [""]:  # `-c` put the working folder first: only programs get it back
        del sys.path[0]
    import _signal as signal
    import _socket  # not `socket`: its imports would be in every fork's memory
    import ctypes
    import gc
    import marshal
    import os
    import resource  # noqa: F401 - imported once here for every launcher
    import struct

    sock = _socket.socket(fileno=int(sys.argv[2]))
    setup = marshal.loads(bytes.fromhex(sys.argv[4]))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = (ctypes.c_int,) + (ctypes.c_ulong,) * 4
    libc.setns.argtypes = (ctypes.c_int, ctypes.c_int)
    if libc.prctl(1, signal.SIGKILL, 0, 0, 0) != 0 or os.getppid() != int(sys.argv[3]):
        os._exit(1)  # PR_SET_PDEATHSIG failed, or the parent died before it was armed
    # Non-dumpable, as the launcher is: a program that kept our uid (no uid drop) cannot reach
    # our socket through /proc/<pid>/fd.
    if libc.prctl(4, 0, 0, 0, 0) != 0:
        os._exit(1)
    max_fd = os.sysconf("SC_OPEN_MAX")

    def prepare():
        """Root: the mount tree of every run, made once (`prepare_tree`) by a helper that
        stays in it until we hold its mount namespace; launchers enter that namespace before
        they unshare their own, and B then only adds the run's own mounts. Also the seccomp
        filter, built once. Empty where the helper failed: each run prepares its own tree."""
        status_r, status_w = os.pipe()
        helper = os.fork()
        if helper == 0:
            try:
                os.close(status_r)
                cfg = dict(setup, template=True, status_fd=status_w, parent_pid=os.getppid())
                _launcher_main(cfg)
            finally:
                os._exit(1)
        os.close(status_w)
        report = b""
        while not report.endswith(b"\n") and (chunk := os.read(status_r, 1 << 16)):
            report += chunk
        os.close(status_r)
        try:
            kind, readonly, blob = report.decode().split()
            if kind != "T":
                return {}
            return {
                "template_fd": os.open(f"/proc/{helper}/ns/mnt", os.O_RDONLY),
                "template_readonly": readonly == "1",
                "seccomp_blob": None if blob == "-" else bytes.fromhex(blob),
            }
        except (OSError, ValueError):
            return {}
        finally:
            os.kill(helper, signal.SIGKILL)
            os.waitpid(helper, 0)

    prepared = prepare() if setup["prepare"] else {}

    def prebuild():
        """The launcher A for the next run, made before that run exists (root, prepared tree):
        it enters the tree, unshares the namespaces and forks B, which mounts its /proc and
        /dev/shm; then B waits for the run on a socket of its own (`receive_run`), used once.
        So that all this overlaps the previous run instead of delaying the next. Returns (pid,
        our end of its socket), or None where runs get a launcher each."""
        if "template_fd" not in prepared or "prebuilt" in setup["disabled"]:
            return None
        ours, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            program = None
            try:
                os.setsid()
                sock.detach()  # closed below; their objects must not close those numbers later
                ours.detach()
                if libc.setns(prepared["template_fd"], 0x20000) != 0:  # CLONE_NEWNS
                    os._exit(1)
                os.dup2(theirs.detach(), 3)
                os.closerange(4, max_fd)
                os.chdir("/")
                cfg = dict(setup, prebuilt=True, status_fd=-1, parent_pid=os.getppid())
                cfg.update(fresh_uid=False, template_readonly=prepared["template_readonly"])
                cfg["seccomp_blob"] = prepared["seccomp_blob"]
                program = _launcher_main(cfg)
            except BaseException:  # noqa: BLE001 - whatever failed, this process ends
                pass
            if program is None:
                os._exit(1)
            return program  # a warm program process: True, up to the caller's caller
        theirs.close()
        return pid, ours

    ready = prebuild()
    if ready is True:
        return True  # a warm program process: on to the bootstrap (_SERVER_STUB)
    # Everything so far is the interpreter's and ours, never garbage: a warm program's
    # collections skip it (and leave its memory shared), and its exit finds its own objects.
    gc.freeze()
    while True:
        try:
            message, ancillary, _, _ = sock.recvmsg(64, _socket.CMSG_LEN(5 * 4))
        except OSError:
            os._exit(1)
        fds = []  # as socket.recv_fds
        for level, kind, data in ancillary:
            if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
                fds += struct.unpack(f"{len(data) // 4}i", data[: len(data) // 4 * 4])
        if not message:
            os._exit(0)  # the parent closed its end
        pid = None
        if message == b"U" and len(fds) == 5 and ready is not None:  # a run for a pre-built one
            pid, to_ready = ready
            ready = None
            try:
                if os.waitpid(pid, os.WNOHANG)[0] != 0:
                    raise ChildProcessError("the pre-built launcher died")
                rights = [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, struct.pack("5i", *fds))]
                to_ready.sendmsg([b"R"], rights)
            except OSError:  # it died: this run gets a launcher of its own
                try:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                except OSError:
                    pass
                pid = None
            to_ready.close()
        if pid is not None:
            reply = b"P%d" % pid
        elif message in (b"R", b"U") and len(fds) == 5:
            pid = os.fork()
            if pid == 0:
                program = None
                try:
                    os.setsid()
                    sock.detach()  # closed below; its object must not close that number later
                    if ready is not None:
                        ready[1].detach()  # likewise
                    size, chunks = os.fstat(fds[4]).st_size, []
                    while size > 0 and (chunk := os.pread(fds[4], size, sum(map(len, chunks)))):
                        chunks.append(chunk)
                        size -= len(chunk)
                    cfg = marshal.loads(b"".join(chunks))
                    os.close(fds[4])
                    if "seccomp_blob" in prepared:
                        cfg["seccomp_blob"] = prepared["seccomp_blob"]
                    if (
                        "template_fd" in prepared
                        and cfg["uid"] is not None
                        and not {"namespaces", "readonly", "prepared_tree"} & set(cfg["disabled"])
                        and libc.setns(prepared["template_fd"], 0x20000) == 0  # CLONE_NEWNS
                    ):
                        if os.path.isdir(cfg["workdir"]):
                            cfg["template_readonly"] = prepared["template_readonly"]
                        else:  # made on a mount that came after the template: ours then
                            with open(f"/proc/{os.getppid()}/ns/mnt", "rb") as ns:
                                if libc.setns(ns.fileno(), 0x20000) != 0:
                                    os._exit(1)
                    # stdin, stdout, stderr, status -> 0..3. Z's own 0-2 are /dev/null, so no
                    # received fd is below 3 and only the last dup2 can replace an fd (3).
                    for target, fd in enumerate(fds[:4]):
                        os.dup2(fd, target)
                    os.closerange(4, max_fd)  # the socket and other runs' fds stay out
                    cfg["status_fd"], cfg["parent_pid"] = 3, os.getppid()
                    os.chdir(cfg["workdir"])
                    program = _launcher_main(cfg)
                except BaseException:  # noqa: BLE001 - whatever failed, this process ends
                    pass
                if program is None:
                    os._exit(1)
                return program  # a warm program process: on to the bootstrap (_SERVER_STUB)
            reply = b"P%d" % pid
        elif message[:1] == b"W":
            reply = b"S%d" % os.waitpid(int(message[1:]), 0)[1]
        else:
            reply = b"E"
        for fd in fds:
            os.close(fd)
        sock.send(reply)
        if ready is None and message == b"U":  # after the reply: while that run runs
            ready = prebuild()
            if ready is True:
                return True  # a warm program process: on to the bootstrap (_SERVER_STUB)


_compiled: dict[str, str] = {}
_launcher_lock = threading.Lock()
_protections: dict[str, bool] | None = None
_last_run_warm = False  # whether the latest run's program ran in a warm interpreter
_remap_cache: list[tuple[str, list[str]]] | None = None
_server: _LauncherServer | None = None
_server_lock = threading.Lock()


def _launcher_code_hex(entry: str = "_launcher_main") -> str:
    """The launcher (or its server) compiled once per parent process: the child skips parsing
    ~300 lines."""
    if entry not in _compiled:
        with _launcher_lock:
            if entry not in _compiled:
                bodies = [_launcher_main] + (
                    [_launcher_server] if entry != "_launcher_main" else []
                )
                src = "\n".join(inspect.getsource(f) for f in bodies) + f"\n{entry}()\n"
                code = compile(src, "<cptlab-sandbox-launcher>", "exec", dont_inherit=True)
                _compiled[entry] = marshal.dumps(code).hex()
    return _compiled[entry]


class _LauncherServer:
    """The parent's side of the launcher server Z (`_launcher_server`)."""

    def __init__(self) -> None:
        code_fd = os.memfd_create("cptlab-launcher")
        data = memoryview(bytes.fromhex(_launcher_code_hex("_launcher_server")))
        while data:
            data = data[os.write(code_fd, data) :]
        os.lseek(code_fd, 0, os.SEEK_SET)
        is_root = os.geteuid() == 0
        setup = {  # see `prepare` and `prebuild` in _launcher_server
            "prepare": is_root and not {"namespaces", "prepared_tree"} & _disabled,
            "remap": _interpreter_remap() if is_root else [],
            "disabled": tuple(sorted({"prebuilt"} & _disabled)),
            "uid": 0,
            "workdir": "/",
            "tmpfs_bytes": _TMPFS_BYTES,
            "tmpfs_inodes": _TMPFS_INODES,
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
                    _PROGRAM_FLAGS + [_SERVER_STUB, str(code_fd), str(theirs.fileno()),
                                      str(os.getpid()), marshal.dumps(setup).hex()],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    pass_fds=(theirs.fileno(), code_fd),
                    env=_SERVER_ENV,
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


class _ServedLauncher:
    """A launcher forked by the server, with the part of Popen's interface that `_run` and
    `_kill_tree` use. Its pidfd signals it without a pid-reuse race."""

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
    if "launcher_server" in _disabled or not hasattr(os, "pidfd_open"):
        return None
    with _server_lock:
        if _server is None or not _server.alive():
            _server = _LauncherServer()
        return _server


# The server's environment: what the program's interpreter reads at its start, and room for
# each warm program's environment (`show_as_program`).
_ENV_ROOM = 8192
_SERVER_ENV = dict(_BASE_ENV, CPTLAB_SANDBOX_ENV_ROOM="." * _ENV_ROOM)
# Environment variables that an interpreter (or the C library under it) reads at its start: a
# run whose env sets one gets its own exec-ed interpreter, not a warm one started without it.
_STARTUP_ENV_PREFIXES = ("PYTHON", "LC_", "LD_", "MALLOC_", "GLIBC_")
_STARTUP_ENV_NAMES = frozenset({"LANG", "LANGUAGE", "TZ"})


def _may_run_warm(cfg: dict) -> bool:
    """Whether the program may run in an interpreter forked from the server's instead of an
    exec-ed one: its interpreter start would see what the server's saw, and its environment
    fits the room in the server's. Root only: without root the program keeps our uid in a user
    namespace, where it holds every capability until an exec drops them."""
    if "warm_interpreter" in _disabled or cfg["uid"] is None:
        return False
    if cfg["argv"][:-1] != _PROGRAM_FLAGS or cfg["python"] != sys.executable:
        return False
    if sum(len(os.fsencode(f"{k}={v}")) + 1 for k, v in cfg["env"].items()) > _ENV_ROOM:
        return False
    return all(cfg["env"].get(k) == v for k, v in _BASE_ENV.items()) and not any(
        k in _STARTUP_ENV_NAMES or k.startswith(_STARTUP_ENV_PREFIXES)
        for k in cfg["env"]
        if k not in _BASE_ENV
    )


# Switches (tests, benchmarks) under which a run does not take the server's pre-built launcher.
_PREBUILT_OFF = frozenset({"namespaces", "readonly", "prepared_tree", "prebuilt"})


def _start_launcher(
    cfg: dict, stdin_fd: int, out_w: int, err_w: int, status_w: int
) -> subprocess.Popen[bytes] | _ServedLauncher:
    """Launcher A for one run, forked by the server, or started on its own where there is none
    (and when the server dies between runs, restarted once)."""
    for _ in range(2):
        server = _launcher_server_for_run()
        if server is None:
            break
        cfg_fd = os.memfd_create("cptlab-cfg")
        try:
            data = memoryview(marshal.dumps(dict(cfg, warm=_may_run_warm(cfg))))
            while data:
                data = data[os.write(cfg_fd, data) :]
            fds = (stdin_fd, out_w, err_w, status_w, cfg_fd)
            ready_made = cfg["uid"] is not None and not _PREBUILT_OFF & _disabled
            pid = int(server.request(b"U" if ready_made else b"R", fds)[1:])
        except OSError:
            continue
        finally:
            os.close(cfg_fd)
        return _ServedLauncher(server, pid)
    argv = [sys.executable, "-I", "-S", "-c", _LAUNCHER_STUB, _launcher_code_hex()]
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
        env={"PATH": _BASE_ENV["PATH"], "LANG": "C.UTF-8"},
        cwd=cfg["workdir"],
        start_new_session=True,
        close_fds=True,
    )


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


def _workdir_base() -> str | None:
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


def _interpreter_remap() -> list[tuple[str, list[str]]]:
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


def _sandbox_uid() -> int:
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


def _is_fresh_uid(uid: int | None) -> bool:
    """Only a per-run uid may be swept (processes killed, files removed) wholesale; never
    `nobody`, which other software on the host may use."""
    return uid is not None and _UID_RANGE[0] <= uid < _UID_RANGE[1]


def _kill_uid_processes(uid: int) -> None:
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


def _remove_files_of(uid: int) -> None:
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
                    _rmtree(entry.path)
                else:
                    os.unlink(entry.path)
            except OSError:
                continue


def _rmtree(path: str) -> None:
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
    uid = _sandbox_uid() if is_root else None
    cap = limits.max_output_bytes
    workdir = tempfile.mkdtemp(prefix="cptlab-sbx-", dir=_workdir_base())
    proc: subprocess.Popen[bytes] | _ServedLauncher | None = None
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
        program_env = dict(_BASE_ENV, HOME=workdir, TMPDIR=workdir)
        program_env.update(env)
        cfg = {
            "workdir": workdir,
            "uid": uid,
            "fresh_uid": _is_fresh_uid(uid),
            "disabled": tuple(sorted(_disabled)),
            "python": sys.executable,
            "argv": _PROGRAM_FLAGS + [_BOOTSTRAP],
            "source": source.encode("utf-8", errors="surrogatepass"),
            "env": program_env,
            "cpu_seconds": max(1, math.ceil(limits.cpu_seconds)),
            "memory_bytes": int(limits.memory_mb) << 20,
            "max_file_bytes": int(limits.max_file_bytes),
            "max_processes": int(limits.max_processes),
            "tmpfs_bytes": _TMPFS_BYTES,
            "tmpfs_inodes": _TMPFS_INODES,
            "remap": _interpreter_remap() if is_root else [],
        }
        proc = _start_launcher(cfg, stdin_fd, out_w, err_w, status_w)
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
        messages = _parse_status(bufs[status_r])
        if reason is not None or open_fds:  # over a limit, or escapees still hold our pipes
            _kill_tree(proc, messages["protections"], uid)
        proc.wait()
        wall = time.monotonic() - start
        _last_run_warm = messages["protections"].pop("warm_interpreter", False)
        if messages["protections"]:
            _protections = dict(messages["protections"])
        if _is_fresh_uid(uid) and not messages["protections"].get("mount_namespace", False):
            _remove_files_of(uid)
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
            _kill_tree(proc, {}, uid)
            proc.wait()
        _rmtree(workdir)


def _parse_status(buf: bytes | bytearray) -> dict:
    """Parse the launcher's status lines (see `_launcher_main`)."""
    result: dict = {"protections": {}, "exit": None, "error": ""}
    for line in bytes(buf).decode("utf-8", "replace").splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "P":
            for item in rest.split():
                name, _, value = item.partition("=")
                result["protections"][name] = value == "1"
        elif kind == "X":
            raw, cpu = rest.split()
            result["exit"] = (int(raw), float(cpu))
        elif kind == "E":
            result["error"] += f"sandbox error: {rest}\n"
    return result


def _kill_tree(
    proc: subprocess.Popen[bytes] | _ServedLauncher, protections: dict[str, bool], uid: int | None
) -> None:
    """Kill the launcher and everything below it, and return once that is done.

    SIGTERM asks the launcher to do it: with a PID namespace it SIGKILLs the init, whose death
    the kernel completes only once the namespace is empty; without one it kills by uid (root)
    or as child subreaper. If the launcher does not finish in time we SIGKILL its process group
    (the init then dies by PDEATHSIG and the kernel still empties the namespace) and, as root
    without a PID namespace, sweep the sandbox uid ourselves.
    """
    if proc.poll() is None:
        try:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=2.0)
        except (OSError, subprocess.TimeoutExpired):
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    if _is_fresh_uid(uid) and not protections.get("pid_namespace"):
        _kill_uid_processes(uid)


def active_protections() -> dict[str, bool]:
    """Which protections the sandbox actually got on this machine, as reported by the launcher
    of the latest run (runs a trivial probe program the first time). See docs/sandbox.md."""
    if _protections is None:
        run_python("pass")
    return dict(_protections or {})
