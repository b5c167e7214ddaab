"""The sandbox's warm interpreter: programs forked from the launcher server's interpreter (root)
instead of exec-ing their own.

Each must behave as an exec-ed program does, see nothing of any other program (files, processes,
sockets, memory), and leave nothing behind for the next: the server never runs a program and
never holds a run's data, so each program starts from the same untouched interpreter in
namespaces of its own. The hostile-program tests of test_sandbox.py run in this mode too.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from test_sandbox import _running, assert_no_survivors, survivors

import cptlab
from cptlab.sandbox import (
    RunResult,
    active_protections,
    client,
    interpreter,
    run_python,
    runner,
    switches,
)

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="the warm interpreter is for root (non-root programs exec)"
)


@pytest.fixture(autouse=True)
def namespaces() -> None:
    if not active_protections().get("pid_namespace"):
        pytest.skip("no namespaces here: every program execs its interpreter")


@pytest.fixture
def token() -> Iterator[str]:
    value = "CPTLAB_TEST_" + secrets.token_hex(8)
    yield value
    assert_no_survivors(value)


def run(source: str, mode: str = "warm", **kwargs) -> RunResult:
    """A run in the warm interpreter, or with the exec-ed one it replaces."""
    disabled = frozenset() if mode == "warm" else frozenset({"warm_interpreter"})
    saved, switches.disabled = switches.disabled, disabled
    try:
        result = run_python(source, **kwargs)
    finally:
        switches.disabled = saved
    assert result.status != "sandbox_error", result.stderr
    assert runner._last_run_warm == (mode == "warm"), mode
    return result


def normalized(text: str) -> str:
    """Without what differs between any two runs: work folder, uid, object addresses."""
    text = re.sub(r"cptlab-sbx-\w+", "WORK", text)
    text = re.sub(r"\b1[56]\d{8}\b", "UID", text)
    return re.sub(r"0x[0-9a-f]{6,}", "ADDR", text)


def same_in_both_modes(source: str, **kwargs) -> RunResult:
    warm, execd = run(source, "warm", **kwargs), run(source, "exec", **kwargs)
    assert (warm.status, warm.returncode) == (execd.status, execd.returncode), (warm, execd)
    assert normalized(warm.stdout) == normalized(execd.stdout)
    assert normalized(warm.stderr) == normalized(execd.stderr)
    return warm


# --- the warm program is the exec-ed one -------------------------------------------------------

STATE = r"""
import sys, os, signal, resource, ctypes, time, locale, __main__
print("flags", sys.flags)
print("path", sys.path, sys.argv, sys.orig_argv, sys.executable)
print("main", sorted((k, type(v).__name__) for k, v in vars(__main__).items()), __main__.__loader__)
for name in ("stdin", "stdout", "stderr"):
    f = getattr(sys, name)
    print(name, type(f).__name__, f.name, f.mode, f.encoding, f.errors, f.line_buffering,
          f.write_through, type(f.buffer).__name__, f.buffer.raw.closefd, f.seekable(),
          f.isatty(), f.fileno(), f is getattr(sys, "__%s__" % name))
print("signals", [(int(s), str(signal.getsignal(s))) for s in sorted(signal.valid_signals())
                  if s < 32])
print("mask", signal.pthread_sigmask(signal.SIG_BLOCK, []))
print("environ", sorted(os.environ.items()))
print("proc environ", open("/proc/self/environ", "rb").read().rstrip(b"\0"))
print("proc cmdline", open("/proc/self/cmdline", "rb").read().rstrip(b"\0"))
print("comm", open("/proc/self/comm").read().strip())
umask = os.umask(0); os.umask(umask)
print("cwd", os.getcwd(), umask, os.getresuid(), os.getresgid(), os.getgroups())
print("rlimits", [resource.getrlimit(getattr(resource, r)) for r in sorted(dir(resource))
                  if r.startswith("RLIMIT_")])
print("status", [ln for ln in open("/proc/self/status").read().splitlines()
                 if ln.startswith(("Cap", "NoNewPrivs", "Seccomp"))])
print("dumpable", ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))
print("fds", sorted(int(fd) for fd in os.listdir("/proc/self/fd")))
print("hash", hash("abc"), sys.getrecursionlimit(), time.tzname, locale.setlocale(locale.LC_CTYPE))
print("ids", os.getpid(), os.getppid(), os.getsid(0) == os.getpid())
print("random imported", "random" in sys.modules, "atexit" in sys.modules)
def depth(n=1):
    try:
        return depth(n + 1)
    except RecursionError:
        return n
print("depth", depth())
"""


def test_the_warm_interpreter_is_the_exec_ed_one() -> None:
    """Flags, paths, stdio, signals, environment (also as /proc shows it), credentials,
    capabilities, limits, descriptors, stack depth: what a program can see of its
    interpreter and process is the same as after exec."""
    result = same_in_both_modes(STATE, env={"EXTRA": "1"})
    assert "EXTRA" in result.stdout and "depth" in result.stdout


EXITS = {
    "ok": "print('out', end='')",
    "exception": "def f():\n    raise KeyError('k') from ValueError('v')\nf()\n",
    "exit code": "import sys\nprint('partial', end='')\nsys.exit(300)",
    "exit message": "raise SystemExit('a message')",
    "exit huge": "import sys\nsys.exit(2 ** 70)",
    "exit none": "import sys\nsys.stderr.write('no newline')\nsys.exit(None)",
    "syntax": "x = (\n",
    "interrupt": "raise KeyboardInterrupt",
    "os._exit": "print('lost?')\nimport os\nos._exit(4)",
    "atexit and threads": (
        "import atexit, threading, time, sys\n"
        "atexit.register(lambda: print('atexit ran'))\n"
        "def bye():\n    raise RuntimeError('in atexit')\n"
        "atexit.register(bye)\n"
        "threading.Thread(target=lambda: (time.sleep(0.05), print('thread done'))).start()\n"
        "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
        "sys.stdout.write('no newline')\n"
    ),
    "unflushed files": (
        "import sys\n"
        "class Buffered:\n"
        "    def __init__(self): self.parts = []\n"
        "    def write(self, s): self.parts.append(s)\n"
        "    def flush(self):\n"
        "        sys.__stdout__.write(''.join(self.parts)); self.parts = []\n"
        "        sys.__stdout__.flush()\n"
        "sys.stdout = Buffered()\n"
        "print('through a replaced stdout')\n"
        "out = open(1, 'w')\n"
        "out.write('a file on fd 1, never flushed\\n')\n"
        "raise ValueError('after')\n"
    ),
    "C stdio": "import ctypes\nctypes.CDLL(None).printf(b'printf, unflushed')",
    "custom excepthook": (
        "import sys\nsys.excepthook = lambda *a: print('hook', a[0].__name__)\n1/0"
    ),
    "closed stdout": "import sys\nsys.stdout.close()\nsys.exit(5)",
    "traceback and stack": (
        "import traceback, warnings\nwarnings.warn('careful')\ntraceback.print_stack()\n"
        "print(__name__, __file__, sorted(globals()))\n"
    ),
    "multiprocessing and subprocess": (
        "import multiprocessing as mp, subprocess, sys\n"
        "def sq(x):\n    return x * x\n"
        "if __name__ == '__main__':\n"
        "    with mp.Pool(2) as pool:\n        print(pool.map(sq, range(4)))\n"
        "    print(subprocess.run([sys.executable, '-c', 'print(6 * 7)'],"
        " capture_output=True, text=True).stdout)\n"
    ),
}


@pytest.mark.parametrize("source", list(EXITS.values()), ids=list(EXITS))
def test_programs_end_as_exec_ed_ones(source: str) -> None:
    """Output, exit status and the end of the interpreter (exceptions, SystemExit, atexit,
    threads, files left unflushed, C stdio, signals) as after exec."""
    same_in_both_modes(source, stdin="some input\n")


def test_what_the_interpreter_reads_at_its_start_gets_an_exec_ed_one() -> None:
    """A run whose environment sets what an interpreter reads at its start (PYTHON*, locale,
    TZ, LD_*), or that does not fit the room the server keeps for it, gets its own exec."""
    result = run("import time\nprint(time.tzname)", "exec", env={"TZ": "EST+5"})
    assert result.stdout == "('EST', 'EST')\n"
    saved = switches.disabled
    try:
        switches.disabled = frozenset()
        for env in ({"TZ": "EST+5"}, {"PYTHONPATH": "/x"}, {"LD_PRELOAD": ""}, {"LC_ALL": "C"}):
            result = run_python("import os\nprint(sorted(os.environ))", env=env)
            assert result.status == "ok" and not runner._last_run_warm, env
            assert set(env) <= set(eval(result.stdout)), result  # noqa: S307 - our own output
        big = run_python("import os\nprint(len(os.environ['BIG']))", env={"BIG": "x" * 20000})
        assert big.stdout == "20000\n" and not runner._last_run_warm
        assert run_python("pass", env={"CPTLAB_NONCE": "0" * 32}).status == "ok"
        assert runner._last_run_warm
    finally:
        switches.disabled = saved


def test_a_warm_program_looks_exec_ed_on_the_host(token: str) -> None:
    """Its /proc/<pid>/environ and cmdline are the program's (the survivor checks of the
    hostile-program tests find programs by them)."""
    results: list[RunResult] = []
    thread = threading.Thread(
        target=lambda: results.append(
            run_python("import time\ntime.sleep(2)", env={"CPTLAB_TOKEN": token})
        )
    )
    thread.start()
    try:
        end = time.monotonic() + 10
        while not (found := survivors(token)) and time.monotonic() < end:
            time.sleep(0.02)
        assert found, "the running program is not found by its environment"
        with open(f"/proc/{found[0]}/cmdline", "rb") as f:
            argv = f.read().rstrip(b"\0").split(b"\0")
        assert argv[:5] == [os.fsencode(a) for a in interpreter.PROGRAM_FLAGS]
        assert argv[5] == interpreter.BOOTSTRAP.encode()
    finally:
        thread.join()
    assert results[0].status == "ok" and runner._last_run_warm


# --- programs of one server see nothing of each other ------------------------------------------

HOLDER = r"""
import os, socket, subprocess, sys, time
open("{tag}-in-cwd", "w").write("x")
open("/dev/shm/{tag}", "w").write("x")
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind("\0{tag}")
listener.listen()
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
time.sleep({hold})
"""

LOOKER = r"""
import glob, os
mine = {{os.getpid(), 1}}
others = [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in mine]
print("processes", others)
print("shm", os.listdir("/dev/shm"))
folders = ["/tmp", "/var/tmp", "/dev/shm", os.path.dirname(os.getcwd())]
print("work", [p for f in folders for p in glob.glob(os.path.join(f, "*", "{tag}*"))])
print("sockets", [ln for ln in open("/proc/net/unix").read().splitlines() if "{tag}" in ln])
"""


def looked_clean(result: RunResult) -> None:
    assert result.status == "ok", result.stderr
    assert result.stdout.splitlines() == ["processes []", "shm []", "work []", "sockets []"]


def test_concurrent_warm_programs_see_nothing_of_each_other(token: str) -> None:
    tag = "tag" + secrets.token_hex(6)
    held: list[RunResult] = []
    holder = threading.Thread(
        target=lambda: held.append(
            run_python(HOLDER.format(tag=tag, hold=2.0), env={"CPTLAB_TOKEN": token})
        )
    )
    holder.start()
    try:
        end = time.monotonic() + 10
        while len(survivors(token)) < 2 and time.monotonic() < end:  # the program and its child
            time.sleep(0.02)
        assert len(survivors(token)) >= 2, "the holder did not start"
        looked_clean(run(LOOKER.format(tag=tag)))
    finally:
        holder.join()
    assert held[0].status == "ok", held[0].stderr


def test_a_poisoned_program_leaves_nothing_to_the_next(token: str) -> None:
    """A program that poisons its interpreter (builtins, modules, sys.path, environment, signal
    handlers, atexit, even the bytes of objects it shares with the server), leaves files,
    sockets and a daemon behind: the next program starts clean."""
    tag = "tag" + secrets.token_hex(6)
    poison = HOLDER.format(tag=tag, hold=0) + (
        "import builtins, ctypes, signal, atexit, json, gc\n"
        "if os.fork() == 0:\n    os.setsid()\n    time.sleep(30)\n"
        # ctypes.__doc__ was made by the server: overwrite it where this process shares it
        "doc = ctypes.__doc__\n"
        "ctypes.memmove(id(doc) + sys.getsizeof(doc) - len(doc) - 1, b'pwned', 5)\n"
        "print(ctypes.__doc__[:5], flush=True)\n"
        "builtins.len = lambda x: -1\n"
        "builtins.open = None\n"
        "sys.modules['json'] = 'poisoned'\n"
        "sys.path.insert(0, '/evil')\n"
        "os.environ['POISON'] = '1'\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "atexit.register(print, 'poisoned atexit')\n"
        "gc.unfreeze()\n"
    )
    first = run(poison, env={"CPTLAB_TOKEN": token})
    assert first.status == "ok" and first.stdout.startswith("pwned\n"), first
    clean = (
        "import builtins, gc, json, os, signal, sys\n"
        "print(len('ab'), builtins.open is not None, json.dumps([1]), sys.path[0] == '')\n"
        "import ctypes\n"
        "print(ctypes.__doc__[:5], 'POISON' in os.environ,"
        " signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)\n"
        "import atexit\nprint(atexit._ncallbacks(), gc.get_freeze_count() > 0)\n"
    )
    result = run(clean)
    assert result.stdout.splitlines() == [
        "2 True [1] True",
        "creat False True",
        "1 True",  # our own exit callback (sandbox warm_exit) and the server's frozen objects
    ], result
    looked_clean(run(LOOKER.format(tag=tag)))


def _memory_holds(pid: int, needles: list[bytes]) -> list[bytes]:
    """Which needles the process's readable memory holds (read from the host, as root)."""
    found = set()
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            fields = line.split()
            if "r" not in fields[1] or (len(fields) > 5 and fields[5] in ("[vvar]", "[vsyscall]")):
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            try:
                mem.seek(start)
                data = mem.read(end - start)
            except (OSError, ValueError, OverflowError):
                continue
            found |= {needle for needle in needles if needle in data}
    return sorted(found)


def test_nothing_of_a_run_reaches_the_server_or_a_later_program(token: str) -> None:
    """A run's source, stdin and environment never enter the server, whose memory every later
    program inherits: neither the server's memory nor a later program's holds them."""
    secret = [secrets.token_hex(16).encode() for _ in range(3)]
    source = f"# {secret[0].decode()}\nimport sys\nprint(len(sys.stdin.read()))\n"
    first = run(source, stdin=secret[1].decode(), env={"CPTLAB_SECRET": secret[2].decode()})
    assert first.stdout == "32\n"
    server = client._server
    assert server is not None and server.alive()
    assert _memory_holds(server.proc.pid, secret) == []
    holder: list[RunResult] = []
    later = threading.Thread(
        target=lambda: holder.append(
            run_python("import time\ntime.sleep(1.5)", env={"CPTLAB_TOKEN": token})
        )
    )
    later.start()
    try:
        end = time.monotonic() + 10
        while not (pids := survivors(token)) and time.monotonic() < end:
            time.sleep(0.02)
        assert pids, "the later program did not start"
        assert _memory_holds(pids[0], secret) == []
        assert _memory_holds(pids[0], [token.encode()]) == [token.encode()]  # sanity: it reads
    finally:
        later.join()
    assert holder[0].status == "ok" and runner._last_run_warm


def test_the_prepared_tree_is_the_per_run_one() -> None:
    """The mount tree the server prepares once is the one each run would make itself."""
    source = "print(open('/proc/self/mountinfo').read())"

    def tree(disabled: frozenset[str]) -> list[str]:
        saved, switches.disabled = switches.disabled, disabled
        try:
            text = run_python(source).stdout
        finally:
            switches.disabled = saved
        # mount point, options, fs type, source, super options (no mount ids)
        return [normalized(" ".join(line.split()[3:])) for line in text.splitlines() if line]

    prepared, per_run = tree(frozenset()), tree(frozenset({"prepared_tree"}))
    assert prepared == per_run
    assert any(" / / ro," in " " + line for line in prepared)


# --- the pre-built launcher ----------------------------------------------------------------------

NAMESPACES = (
    "import os, time\n"
    "print(*(os.readlink(f'/proc/self/ns/{kind}') for kind in ('pid', 'net', 'mnt', 'ipc')))\n"
    "time.sleep(1.0)\n"
)


def test_every_run_gets_namespaces_of_its_own() -> None:
    """The server makes the next run's launcher (namespaces, /proc, /dev/shm) while a run
    runs; each is used by one run only, and none shares a namespace with the host. (Runs
    alive at the same time: the kernel reuses a freed namespace's number.)"""
    host = {os.readlink(f"/proc/self/ns/{kind}") for kind in ("pid", "net", "mnt", "ipc")}
    results: list[RunResult] = []
    threads = [
        threading.Thread(target=lambda: results.append(run_python(NAMESPACES))) for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seen = [ns for result in results for ns in result.stdout.split()]
    assert len(seen) == 16 and len(set(seen)) == 16, results
    assert not host & set(seen)


def test_a_pre_built_launcher_that_died_is_replaced() -> None:
    """The server's waiting launcher, killed: the next run gets one of its own, and the one
    after that a pre-built one again."""
    assert run("pass").status == "ok"
    server = client._server
    assert server is not None
    with open(f"/proc/{server.proc.pid}/task/{server.proc.pid}/children") as f:
        waiting = [int(pid) for pid in f.read().split()]
    assert waiting, "no pre-built launcher"
    for pid in waiting:  # the waiting one (the others are runs' launchers not yet reaped)
        os.kill(pid, 9)
    end = time.monotonic() + 5
    while any(_running(pid) for pid in waiting) and time.monotonic() < end:
        time.sleep(0.01)  # dead before the next run (a launcher killed during a run fails it)
    for _ in range(3):
        result = run("print(6 * 7)")
        assert (result.status, result.stdout) == ("ok", "42\n"), result
    assert client._server is server and server.alive()


# A trainer under a W^X policy (as SELinux's deny_execmem or systemd's MemoryDenyWriteExecute
# make it): mmap/mprotect with PROT_WRITE|PROT_EXEC fail, so libffi puts each ctypes callback in
# memory mapped twice from a memfd, MAP_SHARED; such pages made in the server before a fork
# would be common to every program forked from it.
W_X_TRAINER = r"""
import ctypes, struct, sys
from cptlab.sandbox import run_python, runner
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl.argtypes = (ctypes.c_int,) + (ctypes.c_ulong,) * 4
ld, jeq, ret, and_k, allow, eacces = 0x20, 0x15, 0x06, 0x54, 0x7FFF0000, 0x00050000 | 13
rows = [(ld, 0, 0, 0), (jeq, 2, 0, 9), (jeq, 1, 0, 10), (ret, 0, 0, allow),  # mmap, mprotect
        (ld, 0, 0, 32), (and_k, 0, 0, 6), (jeq, 0, 1, 6), (ret, 0, 0, eacces), (ret, 0, 0, allow)]
code = ctypes.create_string_buffer(b"".join(struct.pack("=HBBI", *row) for row in rows))
fprog = ctypes.create_string_buffer(struct.pack("HxxxxxxQ", len(rows), ctypes.addressof(code)))
assert libc.prctl(38, 1, 0, 0, 0) == 0 and libc.prctl(22, 2, ctypes.addressof(fprog), 0, 0) == 0
result = run_python(sys.stdin.read())
print(result.status, runner._last_run_warm, result.stdout, result.stderr, sep="\n")
"""

SHARED_WRITABLE = r"""
import ctypes
def shared_writable():
    with open("/proc/self/smaps") as f:
        return sum({"sh", "mw"} <= set(ln.split()[1:]) for ln in f if ln.startswith("VmFlags:"))
print("inherited", shared_writable())
callback = ctypes.CFUNCTYPE(ctypes.c_int)(lambda: 0)
print("after a callback of its own", shared_writable() > 0)
"""


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the W^X filter is for x86_64")
def test_a_warm_program_shares_no_writable_memory_with_the_server() -> None:
    """No page a program can write is shared with the server, nor so with any other program
    forked from it, even where libffi maps memory shared (the program's own callback, the
    check that the policy holds)."""
    source = os.path.dirname(os.path.dirname(cptlab.__file__))
    done = subprocess.run(
        [sys.executable, "-c", W_X_TRAINER],
        input=SHARED_WRITABLE, env=dict(os.environ, PYTHONPATH=source),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[:4] == [
        "ok",
        "True",
        "inherited 0",
        "after a callback of its own True",
    ], done.stdout
