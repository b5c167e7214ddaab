"""The sandbox against ordinary and hostile programs.

Every hostile program carries a per-test token in its environment (which all its descendants
inherit), so that afterwards we can check from the host that no process of it survived. Hostile
programs run only after the containment they rely on has been checked on a harmless program
(e.g. the process limit with sleeping children before the fork bomb): an escaped fork bomb
would take the shared machine down.
"""

from __future__ import annotations

import ast
import inspect
import os
import secrets
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator

import pytest

import cptlab
from cptlab.sandbox import (
    Limits,
    RunResult,
    active_protections,
    client,
    housekeeping,
    launcher,
    run_python,
    server,
    switches,
)

IS_ROOT = os.geteuid() == 0


def survivors(token: str) -> list[int]:
    """Host pids whose initial environment carries `token` (i.e. the program's processes)."""
    needle = token.encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if needle in f.read():
                        found.append(int(entry))
            except OSError:
                continue
    return found


def assert_no_survivors(token: str, within: float = 2.0) -> None:
    """Killed processes need a moment to be reaped; anything left after `within` escaped."""
    end = time.monotonic() + within
    while (left := survivors(token)) and time.monotonic() < end:
        time.sleep(0.05)
    assert not left, f"processes outlived the sandbox: {left}"


SHARED_FOLDERS = ["/tmp", "/var/tmp", "/dev/shm", tempfile.gettempdir()]


@pytest.fixture(autouse=True, scope="module")
def shared_folders_unchanged() -> Iterator[None]:
    """Cleanup code runs as root: it must never touch the host's shared folders."""
    before = {p: os.stat(p) for p in SHARED_FOLDERS if os.path.isdir(p)}
    yield
    for path, st in before.items():
        now = os.stat(path)
        assert (now.st_mode, now.st_uid, now.st_gid) == (st.st_mode, st.st_uid, st.st_gid), path


@pytest.fixture
def token() -> Iterator[str]:
    value = "CPTLAB_TEST_" + secrets.token_hex(8)
    yield value
    assert_no_survivors(value)


def hostile(source: str, token: str, **limits: float) -> RunResult:
    result = run_python(source, env={"CPTLAB_TOKEN": token}, limits=Limits(**limits))
    assert result.status != "sandbox_error", result.stderr
    return result


# --- ordinary programs ------------------------------------------------------------------------


def test_ok_program_reads_stdin_and_writes_stdout() -> None:
    src = "import sys\nnums = [int(x) for x in sys.stdin.read().split()]\nprint(sum(nums))\n"
    result = run_python(src, stdin="1 2 3\n4\n")
    assert (result.status, result.returncode, result.stdout, result.stderr) == ("ok", 0, "10\n", "")
    assert 0 < result.wall_seconds < 3


def test_exception_is_error_with_a_plain_traceback() -> None:
    result = run_python("def f():\n    raise ValueError('boom')\nf()\n")
    assert (result.status, result.returncode) == ("error", 1)
    assert result.stderr.startswith('Traceback (most recent call last):\n  File "main.py"')
    assert result.stderr.rstrip().endswith("ValueError: boom")
    assert "<string>" not in result.stderr  # the bootstrap frame is hidden


def test_syntax_error_and_exit_codes() -> None:
    assert run_python("x = (\n").status == "error"
    assert (run_python("exit(3)").status, run_python("exit(3)").returncode) == ("error", 3)
    assert run_python("import sys\nsys.exit(0)").status == "ok"
    assert run_python("quit()").status == "ok"  # exit/quit exist even though site is off


def test_unicode_output_and_stdin() -> None:
    text = "héllo ✓ 日本語 🙂"
    result = run_python("import sys\nprint(sys.stdin.read()[::-1])", stdin=text)
    assert result.status == "ok"
    assert result.stdout == text[::-1] + "\n"


def test_invalid_utf8_output_is_replaced() -> None:
    result = run_python(
        "import sys\n"
        "sys.stdout.buffer.write(b'ok\\xff\\xfe\\x80end')\n"
        "sys.stderr.buffer.write(b'\\xc3')\n"
    )
    assert result.status == "ok"
    assert result.stdout == "ok\ufffd\ufffd\ufffdend"
    assert result.stderr == "\ufffd"


def test_stdlib_features_still_work() -> None:
    src = (
        "import multiprocessing as mp, threading, subprocess, sys, tempfile, socket, os\n"
        "def sq(x):\n    return x * x\n"
        "if __name__ == '__main__':\n"
        "    with mp.Pool(2) as pool:\n        print(pool.map(sq, range(4)))\n"
        "    t = threading.Thread(target=print, args=('thread',)); t.start(); t.join()\n"
        "    print(subprocess.run([sys.executable, '-c', 'print(6*7)'], capture_output=True,"
        " text=True).stdout.strip())\n"
        "    with tempfile.NamedTemporaryFile('w') as f:\n        f.write('x'); f.flush()\n"
        "    assert tempfile.gettempdir() == os.getcwd(), tempfile.gettempdir()\n"
        "    assert os.path.exists(os.path.join(os.getcwd(), 'main.py'))\n"
        "    a, b = socket.socketpair(); a.send(b'unix'); print(b.recv(4).decode())\n"
        "    open('scratch.txt', 'w').write('cwd is writable')\n"
        "    print(hash('abc') == hash('abc'), sys.argv)\n"
    )
    result = run_python(src)
    assert result.status == "ok", result.stderr
    assert result.stdout.split("\n")[:5] == [
        "[0, 1, 4, 9]",
        "thread",
        "42",
        "unix",
        "True ['main.py']",
    ]


def test_hash_seed_is_fixed() -> None:
    runs = {run_python("print(hash('cptlab'))").stdout for _ in range(2)}
    assert len(runs) == 1


def test_env_adds_variables(token: str) -> None:
    result = run_python("import os\nprint(os.environ['CPTLAB_TOKEN'])", env={"CPTLAB_TOKEN": token})
    assert result.stdout == token + "\n"


def test_surrogates_and_unread_large_stdin_do_not_raise() -> None:
    assert run_python("print('\\ud800' == chr(0xD800))").stdout == "True\n"
    assert run_python("x = '\ud800'").status in {"ok", "error"}
    assert run_python("print(1)", stdin="x" * (2 << 20)).status == "ok"


def test_concurrent_runs_are_independent() -> None:
    results: list[RunResult] = []

    def work(i: int) -> None:
        results.append(run_python(f"import os\nprint({i}, os.getpid())"))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r.stdout.split()[0] for r in results) == ["0", "1", "2", "3"]
    assert all(r.status == "ok" for r in results)


def test_active_protections() -> None:
    prot = active_protections()
    assert prot["separate_process"] and prot["rlimits"] and prot["no_new_privs"]
    if IS_ROOT:
        for name in (
            "privilege_drop",
            "pid_namespace",
            "network_namespace",
            "mount_namespace",
            "readonly_filesystem",
            "private_workdir",
            "seccomp",
            "kill_descendants",
            "process_limit",
        ):
            assert prot[name], name


# --- hostile programs -------------------------------------------------------------------------

SLEEPERS = """
import os, time
n = 0
try:
    for _ in range({count}):
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        n += 1
except OSError as e:
    print("fork refused:", e.errno)
print("children", n, flush=True)
"""


def test_process_limit_then_fork_bomb(token: str) -> None:
    # Containment first, with harmless sleeping children.
    few = hostile(SLEEPERS.format(count=5), token)
    assert (few.status, few.stdout) == ("ok", "children 5\n")
    assert_no_survivors(token)
    many = hostile(SLEEPERS.format(count=40), token)
    assert many.status == "ok" and "fork refused: 11" in many.stdout, many.stdout
    assert int(many.stdout.split()[-1]) < 32
    assert_no_survivors(token)
    # Only now the real thing.
    bomb = (
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    )
    started = time.monotonic()
    result = hostile(bomb, token, wall_seconds=2.0)
    assert result.status == "timeout"
    assert time.monotonic() - started < 4.5
    assert subprocess.run(["true"]).returncode == 0  # the host can still fork


def test_memory_bomb(token: str) -> None:
    big = hostile("x = bytearray(1 << 30)", token)
    assert big.status == "memory" and "MemoryError" in big.stderr
    creep = hostile("chunks = []\nwhile True:\n    chunks.append(bytearray(10 ** 7))\n", token)
    assert creep.status == "memory"
    assert creep.wall_seconds < 3


def test_infinite_loop_hits_cpu_limit(token: str) -> None:
    result = hostile("while True:\n    pass\n", token, cpu_seconds=1.0, wall_seconds=5.0)
    assert result.status == "timeout" and result.returncode is not None  # SIGXCPU, not wall
    assert result.wall_seconds < 3


def test_sleeping_program_hits_wall_clock(token: str) -> None:
    result = hostile("import time\ntime.sleep(60)", token, wall_seconds=1.0)
    assert (result.status, result.returncode) == ("timeout", None)
    assert 1.0 <= result.wall_seconds < 2.5


def test_ignoring_sigterm_does_not_help(token: str) -> None:
    src = (
        "import signal, time\n"
        "for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGXCPU):\n"
        "    signal.signal(s, signal.SIG_IGN)\n"
        "print('ignoring', flush=True)\n"
        "while True:\n    time.sleep(0.01)\n"
    )
    result = hostile(src, token, wall_seconds=1.0)
    assert result.status == "timeout" and result.stdout == "ignoring\n"
    assert result.wall_seconds < 2.5


DAEMON = """
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:            # double fork: re-parented, own session, busy forever
        while True:
            pass
    os._exit(0)
time.sleep(0.2)
print("parent done", flush=True)
{tail}
"""


def test_daemonized_busy_child_dies_with_the_program(token: str) -> None:
    # The program itself succeeds; what matters is that its escapee does not survive.
    result = hostile(DAEMON.format(tail=""), token)
    assert (result.status, result.stdout) == ("ok", "parent done\n")
    assert_no_survivors(token, within=1.0)


def test_daemonized_child_of_a_hanging_program(token: str) -> None:
    result = hostile(DAEMON.format(tail="time.sleep(60)"), token, wall_seconds=1.0)
    assert result.status == "timeout"


def test_signal_death_is_killed(token: str) -> None:
    result = hostile("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)", token)
    assert (result.status, result.returncode) == ("killed", -11)


def test_output_flood(token: str) -> None:
    cap = 65536
    started = time.monotonic()
    result = hostile("while True:\n    print('x' * 999)\n", token, wall_seconds=3.0)
    assert result.status == "output_limit" and len(result.stdout) == cap
    assert time.monotonic() - started < 2
    result = hostile("import sys\nwhile True:\n    sys.stderr.write('y' * 4096)\n", token)
    assert result.status == "output_limit" and len(result.stderr) == cap
    small = hostile("print('z' * 5000)", token, max_output_bytes=1000)
    assert small.status == "output_limit" and small.stdout == "z" * 1000


def test_secrets_in_host_environment_do_not_leak(
    token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "hunter2-" + secrets.token_hex(8)
    monkeypatch.setenv("CPTLAB_FAKE_API_KEY", secret)
    src = (
        "import os\n"
        "print(dict(os.environ))\n"
        "for pid in os.listdir('/proc'):\n"
        "    if pid.isdigit():\n"
        "        try:\n"
        "            print(open(f'/proc/{pid}/environ', 'rb').read())\n"
        "        except OSError as e:\n"
        "            print(pid, e)\n"
    )
    result = hostile(src, token)
    assert result.status == "ok"
    assert secret not in result.stdout and "CPTLAB_FAKE_API_KEY" not in result.stdout
    assert token in result.stdout  # sanity: we did print the environment


@pytest.fixture
def protected_file() -> Iterator[str]:
    """A 0644 file in a 0755 directory outside the sandbox, both owned by us (root in CI)."""
    if not IS_ROOT and not active_protections()["readonly_filesystem"]:
        pytest.skip("non-root without user namespaces: the program runs as us and may write")
    folder = tempfile.mkdtemp(prefix="cptlab-victim-")
    os.chmod(folder, 0o755)
    path = os.path.join(folder, "precious.txt")
    with open(path, "w") as f:
        f.write("precious")
    os.chmod(path, 0o644)
    yield path
    for name in os.listdir(folder):
        os.remove(os.path.join(folder, name))
    os.rmdir(folder)


@pytest.mark.parametrize(
    "attack",
    [
        "os.remove(P)",
        "open(P, 'w').write('pwned')",
        "open(P, 'a').write('pwned')",
        "os.rename(P, P + '.moved')",
        "os.chmod(P, 0o777)",
        "os.truncate(P, 0)",
        "open(os.path.join(os.path.dirname(P), 'new.txt'), 'w').write('x')",
        "os.symlink('/etc/passwd', P + '.link')",
    ],
)
def test_files_outside_the_sandbox_are_untouchable(
    token: str, protected_file: str, attack: str
) -> None:
    result = hostile(f"import os\nP = {protected_file!r}\n{attack}\n", token)
    assert result.status == "error"
    assert "Error" in result.stderr.strip().splitlines()[-1]
    with open(protected_file) as f:
        assert f.read() == "precious"
    st = os.stat(protected_file)
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (os.geteuid(), 0o644)
    assert os.listdir(os.path.dirname(protected_file)) == ["precious.txt"]


@pytest.mark.parametrize("target", ["/tmp", "/var/tmp", "/dev/shm", os.path.expanduser("~")])
def test_no_writes_to_shared_locations(token: str, target: str) -> None:
    if not os.path.isdir(target):
        pytest.skip(f"{target} does not exist here")
    if not IS_ROOT and not active_protections()["readonly_filesystem"]:
        pytest.skip("non-root without user namespaces: writes as the caller cannot be blocked")
    name = os.path.join(target, token + ".txt")
    result = hostile(f"open({name!r}, 'w').write('escaped')", token)
    assert not os.path.exists(name), "the program wrote outside its folder"
    # /dev/shm is a private tmpfs: writable, but thrown away. Root without a mount namespace
    # cannot stop writes to world-writable folders, only remove them after the run.
    if target != "/dev/shm" and active_protections()["readonly_filesystem"]:
        assert result.status == "error"


def test_work_folder_is_private_and_deleted(token: str) -> None:
    src = "import os\nopen('data.bin', 'wb').write(b'x' * 1000)\nprint(os.getcwd())\n"
    result = hostile(src, token)
    assert result.status == "ok"
    assert not os.path.exists(result.stdout.strip())
    too_big = hostile("open('big.bin', 'wb').write(b'x' * (2 << 20))", token)
    assert too_big.status == "error" and "File too large" in too_big.stderr


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    srv.setblocking(False)
    yield srv
    srv.close()


NETWORK_LAYERS = [
    pytest.param(frozenset(), id="all-layers"),
    pytest.param(frozenset({"seccomp"}), id="network-namespace-only"),
]


@pytest.mark.parametrize("disabled", NETWORK_LAYERS)
def test_network_is_unreachable(
    token: str, listener: socket.socket, disabled: frozenset[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    if disabled and not active_protections()["network_namespace"]:
        pytest.skip("no network namespace on this machine: seccomp is the only network layer")
    monkeypatch.setattr(switches, "disabled", disabled)
    port = listener.getsockname()[1]
    attempts = [
        f"socket.create_connection(('127.0.0.1', {port}), timeout=1)",
        f"socket.create_connection(('::1', {port}), timeout=1)",
        "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); print(s.getsockname())",
        "s = socket.socket(); s.bind(('0.0.0.0', 0)); s.listen(); print(s.getsockname())",
        f"socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', {port}))",
    ]
    for attempt in attempts:
        result = hostile(f"import socket\n{attempt}\n", token)
        if disabled and "bind" in attempt:
            # Without seccomp, a program may listen inside its own empty network namespace:
            # nothing outside can reach that (the host's listener below stays untouched).
            continue
        assert result.status == "error", (attempt, result)
    with pytest.raises(BlockingIOError):
        listener.accept()  # nothing ever connected


@pytest.fixture
def host_unix_sockets() -> Iterator[tuple[socket.socket, socket.socket]]:
    """A world-writable stream listener and datagram socket in a shared temporary folder, as a
    colocated service (an inference engine's IPC, a bus) would leave them."""
    folder = tempfile.mkdtemp(prefix="cptlab-host-sockets-")
    os.chmod(folder, 0o777)
    stream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stream.bind(os.path.join(folder, "stream"))
    stream.listen()
    datagram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    datagram.bind(os.path.join(folder, "datagram"))
    for sock in (stream, datagram):
        os.chmod(sock.getsockname(), 0o777)
        sock.setblocking(False)
    yield stream, datagram
    stream.close()
    datagram.close()
    for name in ("stream", "datagram"):
        os.unlink(os.path.join(folder, name))
    os.rmdir(folder)


def test_host_socket_files_are_unreachable(token: str, host_unix_sockets) -> None:
    run_python("pass")  # active_protections reports the latest run's layers
    if not active_protections()["seccomp"]:
        pytest.skip("no seccomp here: a read-only mount does not stop connect() to a socket file")
    stream, datagram = host_unix_sockets
    to_stream, to_datagram = stream.getsockname(), datagram.getsockname()
    attempts = [
        f"s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect({to_stream!r})",
        f"s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); s.connect({to_stream!r})",
        f"socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b'x', {to_datagram!r})",
        "a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
        f"a.sendto(b'x', {to_datagram!r})",
        f"a, b = socket.socketpair(); a.sendto(b'x', {to_datagram!r})",
        "s = socket.socket(socket.AF_UNIX); s.connect('\\0' + 'abstract')",
    ]
    for attempt in attempts:
        result = hostile(f"import socket\n{attempt}\n", token)
        assert result.status == "error", (attempt, result)
    with pytest.raises(BlockingIOError):
        stream.accept()  # nothing ever connected
    with pytest.raises(BlockingIOError):
        datagram.recv(16)  # nothing ever arrived
    # What programs use sockets for inside the sandbox keeps working.
    inside = (
        "import asyncio, multiprocessing as mp, socket\n"
        "def sq(x):\n    return x * x\n"
        "async def main():\n    await asyncio.sleep(0)\n    return 'asyncio'\n"
        "if __name__ == '__main__':\n"
        "    a, b = socket.socketpair(); a.sendall(b'pair'); print(b.recv(4).decode())\n"
        "    left, right = mp.Pipe(); left.send('pipe'); print(right.recv())\n"
        "    with mp.Pool(2) as pool:\n        print(pool.map(sq, range(3)))\n"
        "    print(asyncio.run(main()))\n"
    )
    result = hostile(inside, token)
    assert result.status == "ok", result.stderr
    assert result.stdout.split() == ["pair", "pipe", "[0,", "1,", "4]", "asyncio"]


def test_no_extra_file_descriptors_are_inherited(token: str) -> None:
    result = hostile("import os\nprint(sorted(int(x) for x in os.listdir('/proc/self/fd')))", token)
    assert result.stdout.strip() in {"[0, 1, 2]", "[0, 1, 2, 3]"}  # 3: listdir's own fd


def test_cannot_regain_privileges_or_create_namespaces(token: str) -> None:
    attempts = [
        "os.setuid(0)",
        "os.setgid(0)",
        "ctypes.CDLL(None, use_errno=True).unshare(0x10000000) == 0 or os.abort()",
        "open('/proc/sysrq-trigger', 'w').write('h')",
    ]
    for attempt in attempts:
        result = hostile(f"import os, ctypes\n{attempt}\n", token)
        assert result.status in {"error", "killed"}, (attempt, result)


def test_fallback_without_namespaces(token: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where namespaces are unavailable the runner must still contain or fail closed."""
    monkeypatch.setattr(switches, "disabled", frozenset({"namespaces"}))
    first = run_python("print(1)", env={"CPTLAB_TOKEN": token})
    if IS_ROOT and housekeeping.interpreter_remap():
        # The interpreter lives where the sandbox uid cannot read it (pyenv under /root) and
        # only a mount namespace could re-expose it: refuse rather than run as root.
        assert first.status == "sandbox_error"
        assert "interpreter not accessible" in first.stderr
        return
    assert first.status == "ok", first.stderr
    result = hostile(DAEMON.format(tail="time.sleep(60)"), token, wall_seconds=1.0)
    assert result.status == "timeout"
    result = hostile(DAEMON.format(tail=""), token)
    assert result.status == "ok"


def test_cleanup_stays_inside_the_work_folder() -> None:
    parent = tempfile.mkdtemp(prefix="cptlab-parent-")
    outside = tempfile.mkdtemp(prefix="cptlab-outside-")
    try:
        os.chmod(parent, 0o751)
        os.chmod(outside, 0o751)
        work = os.path.join(parent, "work")
        housekeeping.rmtree(work)  # already gone (a sweep removed it): a no-op
        os.makedirs(os.path.join(work, "locked", "deeper"))
        open(os.path.join(work, "locked", "deeper", "f"), "w").close()
        os.symlink(outside, os.path.join(work, "link"))
        os.chmod(os.path.join(work, "locked"), 0)
        housekeeping.rmtree(work)
        assert not os.path.exists(work)
        assert stat.S_IMODE(os.stat(parent).st_mode) == 0o751
        assert stat.S_IMODE(os.stat(outside).st_mode) == 0o751
    finally:
        os.rmdir(parent)
        os.rmdir(outside)


def test_cannot_tamper_with_the_supervisor(token: str) -> None:
    """The init (PID 1) holds the pipe that carries the verdict: the program must neither kill
    it (which would turn its failure into a sandbox_error) nor write a forged verdict into it."""
    src = (
        "import os, signal, time\n"
        "for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL, signal.SIGSEGV):\n"
        "    try:\n        os.kill(1, sig)\n    except OSError:\n        pass\n"
        "for fd in range(3, 10):\n"
        "    try:\n"
        "        os.write(os.open(f'/proc/1/fd/{fd}', os.O_WRONLY), b'X 0 0.0\\n')\n"
        "        print('forged', fd)\n"
        "    except OSError:\n        pass\n"
        "time.sleep(0.1)\n"
        "raise SystemExit(7)\n"
    )
    result = hostile(src, token)
    assert (result.status, result.returncode, result.stdout) == ("error", 7, "")


# --- the launcher server ------------------------------------------------------------------------


def top_level_names(tree: ast.Module) -> tuple[dict[str, str], set[str]]:
    """What a module binds at its top level outside an `if`: {name: module} by its imports, and
    the other names (functions, assignments)."""
    imported, other = {}, set()
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                source = (
                    alias.name if isinstance(node, ast.Import) else f"{node.module}.{alias.name}"
                )
                imported[alias.asname or alias.name] = source
        elif isinstance(node, ast.FunctionDef):
            other.add(node.name)
        elif isinstance(node, ast.Assign):
            other |= {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return imported, other


def test_the_shipped_code_is_self_contained() -> None:
    """launcher.py and server.py, shipped (client.py `_launcher_code_hex`), run in one namespace
    of their own where nothing of cptlab exists: they import only the standard library (the
    server imports the launcher, behind its guard, only where it is imported: in the parent),
    and the server binds no name of the launcher's but a module that both import."""
    trees = {module: ast.parse(inspect.getsource(module)) for module in (launcher, server)}
    guard = next(node for node in trees[server].body if isinstance(node, ast.If))
    assert ast.unparse(guard.test) == "'launcher_main' not in globals()"
    guarded = set(ast.walk(guard))
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom) and node not in guarded:
                names = [node.module] if isinstance(node, ast.ImportFrom) else []
                names += [alias.name for alias in node.names]
                assert not any(name and name.startswith("cptlab") for name in names), names
    launcher_imports, launcher_names = top_level_names(trees[launcher])
    server_imports, server_names = top_level_names(trees[server])
    assert not (launcher_names | set(launcher_imports)) & server_names
    shared = set(launcher_imports) & set(server_imports)
    assert all(launcher_imports[name] == server_imports[name] for name in shared)
    assert {alias.name for node in ast.walk(guard) for alias in getattr(node, "names", [])} <= (
        launcher_names
    )


def test_without_the_launcher_server_runs_are_the_same(
    token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the server cannot run (no pidfd), each launcher is started on its own."""
    served = active_protections()
    monkeypatch.setattr(switches, "disabled", frozenset({"launcher_server"}))
    assert run_python("print(6 * 7)").stdout == "42\n"
    assert active_protections() == served
    result = hostile(DAEMON.format(tail="time.sleep(60)"), token, wall_seconds=1.0)
    assert result.status == "timeout"


def test_the_launcher_server_is_restarted_when_it_died() -> None:
    assert run_python("pass").status == "ok"
    first = client._server
    assert first is not None
    first.proc.kill()
    first.proc.wait()
    assert run_python("print(1)").stdout == "1\n"
    assert client._server is not first and client._server.alive()


def test_a_run_ends_and_leaves_nothing_when_its_server_dies(token: str) -> None:
    """The launcher dies with the server (PDEATHSIG), and the namespace with the launcher."""
    assert run_python("pass").status == "ok"
    server = client._server
    assert server is not None
    results: list[RunResult] = []
    source = DAEMON.format(tail="time.sleep(60)")
    run = threading.Thread(
        target=lambda: results.append(run_python(source, env={"CPTLAB_TOKEN": token}))
    )
    run.start()
    time.sleep(1.0)
    server.proc.kill()
    run.join(timeout=10)
    assert not run.is_alive(), "the run outlived its server"
    # the sandbox failed, not the program: a sandbox error, with the launcher's death in it
    assert results[0].status == "sandbox_error", results[0]
    assert "without a verdict" in results[0].stderr


def test_the_launcher_server_dies_with_its_parent() -> None:
    code = (
        "import os\nfrom cptlab.sandbox import client, run_python\nrun_python('pass')\n"
        "print(client._server.proc.pid, flush=True)\nos._exit(0)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    pid = int(out.stdout.split()[-1])
    end = time.monotonic() + 5
    while time.monotonic() < end and _running(pid):
        time.sleep(0.05)
    assert not _running(pid), f"the launcher server {pid} outlived its parent"


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_forked_child_starts_a_launcher_server_of_its_own() -> None:
    assert run_python("pass").status == "ok"
    parent_server = client._server
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        try:
            ok = run_python("print(5)").stdout == "5\n" and client._server is not parent_server
            os.write(write, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write)
    answer = os.read(read, 1)
    os.close(read)
    os.waitpid(pid, 0)
    assert answer == b"1"
    assert client._server is parent_server and parent_server.alive()
    assert run_python("print(6)").stdout == "6\n"


# An interpreter a user without root can run (the suite's own may live under /root, mode 0700).
SYSTEM_PYTHON = "/usr/bin/python3"
NOBODY = 65534


def as_nobody(code: str) -> subprocess.CompletedProcess:
    """`code` in SYSTEM_PYTHON as uid and gid 65534, with this checkout's cptlab importable."""
    source = os.path.dirname(os.path.dirname(cptlab.__file__))
    prefix = f"import sys; sys.path.insert(0, {source!r}); "
    return subprocess.run(
        [SYSTEM_PYTHON, "-I", "-c", prefix + code],
        user=NOBODY, group=NOBODY, extra_groups=[], cwd="/", env={"PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.skipif(not IS_ROOT, reason="starts a process as another user")
def test_a_user_without_root_runs_programs_through_the_launcher_server():
    """The server's launchers inherit its non-dumpable flag, and a non-dumpable process cannot
    write its own uid_map: every run of a user without root was a sandbox error, once user
    namespaces were available. The program runs, in its namespaces where the host has them."""
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip(f"no {SYSTEM_PYTHON}")
    importable = as_nobody("import cptlab.sandbox")
    if importable.returncode != 0:
        pytest.skip(f"uid {NOBODY} cannot import this checkout: {importable.stderr[-300:]}")
    done = as_nobody(
        "from cptlab.sandbox import client, run_python; r = run_python('print(6 * 7)');"
        " print(r.status, r.stdout.strip(), r.stderr.strip() or '-', client._server is not None)"
    )
    assert done.returncode == 0, done.stderr[-2000:]
    status, out, err, through_server = done.stdout.split(maxsplit=3)
    assert (status, out, err) == ("ok", "42", "-"), done.stdout
    assert through_server.strip() == "True"  # the launcher server's path, where the bug was
