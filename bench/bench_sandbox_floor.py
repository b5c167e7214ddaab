"""The code sandbox's cost per program against its floor, and what each protection costs alone.

    nice -n 19 .venv/bin/python bench/bench_sandbox_floor.py [--data code_train.jsonl]
        [--rows 16] [--rounds 5] [--compare-with REV]

Every variant runs the same programs: the verifier's harness (`cptlab.verifiers.code.harness`)
around the reference answers of code_train rows (generated when no --data is given), as a code
reward runs them. The variants, measured round-robin in one run so that they share the load:

* sandbox ...           `run_python`, every protection on, in each of its modes: the default (a
                        warm interpreter forked per program, the mount tree prepared once, the
                        launcher pre-built while the previous program runs), the interpreter
                        exec-ed per program, the mount tree made per program, no pre-built
                        launcher, a launcher started per program; and, with --compare-with REV,
                        the sandbox as it was at that git revision (e.g. before a change).
* floor: fork+exec      a warm helper forks and execs the program's interpreter exactly as the
                        sandbox's last process does (`python -S -s -B -c <bootstrap>` on main.py),
                        no protection at all.
* floor: fork           the same helper forks and runs the program in the forked child, without
                        exec (what a pre-started interpreter makes possible), no protection at
                        all.
* components            each protection on its own, as the difference between the helper doing
                        "fork, <protection>, <rest>" and "fork, <rest>": the namespaces one kind at
                        a time (unshare in a forked child, which for a PID namespace forks its
                        init), the mounts (private tree, everything read-only, the interpreter
                        re-exposed, proc, a private /dev/shm and the work folder's tmpfs), the
                        privilege drop, the rlimits, seccomp (installed before exec-ing the
                        program, so that its per-syscall cost is counted) and the interpreter
                        start itself (`-I -S`, `-S -s -B`, and with site).

It prints a table: per program, the median over rounds of the wall time and of the CPU time
(every process involved, but not the kernel's workers: a network namespace is torn down by one,
asynchronously), and the share of the default sandbox's wall time. Run it under `nice -n 19`
with OMP_NUM_THREADS=1 on a shared machine; timings are noisy under load, ratios less so.
"""

from __future__ import annotations

import argparse
import importlib.util
import marshal
import os
import resource
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

from cptlab import sandbox
from cptlab.sandbox import client, housekeeping, interpreter, launcher, switches
from cptlab.verifiers.asserts import split_tests
from cptlab.verifiers.code import extract_code, harness

TICKS = os.sysconf("SC_CLK_TCK")
CLONE = {"user": 0x10000000, "pid": 0x20000000, "net": 0x40000000, "mount": 0x20000}
CLONE |= {"ipc": 0x08000000, "uts": 0x04000000}
SANDBOX_NS = CLONE["mount"] | CLONE["pid"] | CLONE["net"] | CLONE["ipc"]

# The helper: a small warm interpreter (started once, like the sandbox's launcher server) that
# for each request forks a child doing one variant. Requests are marshal-ed tuples on stdin:
# (steps, argv or None, workdir, source); the reply is the CPU time of its reaped children.
HELPER = r'''
import ctypes, marshal, os, resource, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = (ctypes.c_char_p,) * 3 + (ctypes.c_ulong, ctypes.c_char_p)
libc.prctl.argtypes = (ctypes.c_int,) + (ctypes.c_ulong,) * 4
cfg = marshal.loads(bytes.fromhex(sys.argv[1]))
null = os.open(os.devnull, os.O_RDWR)

def check(ret, what):
    if ret != 0:
        raise OSError(ctypes.get_errno(), what)

def mount(src, target, fstype, flags, data=None):
    enc = lambda s: None if s is None else s.encode()
    check(libc.mount(enc(src), enc(target), enc(fstype), flags, enc(data)), "mount " + target)

def mounts(workdir):
    """The sandbox's mount set-up (setup_mounts), in a fresh mount namespace."""
    mount(None, "/", None, 16384 | (1 << 18))
    for line in open("/proc/self/mountinfo", "rb").read().decode("latin-1").splitlines():
        point = line.split(" ")[4]
        try:
            keep = os.statvfs(point).f_flag & 14
            mount(None, point, None, 32 | 4096 | 1 | keep)
        except OSError:
            pass
    mount("proc", "/proc", "proc", 1 | 2 | 4 | 8)
    opts = "size=%d,nr_inodes=4096" % (32 << 20)
    mount("tmpfs", "/dev/shm", "tmpfs", 2 | 4, opts + ",mode=1777")
    mount("tmpfs", workdir, "tmpfs", 2 | 4, opts + ",mode=0700")
    with open(os.path.join(workdir, "main.py"), "wb") as f:
        f.write(SOURCE)
    for blocked, needed in cfg["remap"]:
        staged = []
        for i, path in enumerate(needed):
            stage = os.path.join(workdir, ".stage%d" % i)
            os.mkdir(stage)
            mount(path, stage, None, 4096 | 16384)
            staged.append((stage, path))
        mount("tmpfs", blocked, "tmpfs", 2 | 4, "size=65536,mode=0755")
        for stage, path in staged:
            os.makedirs(path, exist_ok=True)
            mount(stage, path, None, 8192)
            os.rmdir(stage)
            mount(None, path, None, 32 | 4096 | 1 | 2 | 4)
        mount(None, blocked, None, 32 | 4096 | 1 | 2 | 4)

def seccomp():
    buf = ctypes.create_string_buffer(cfg["seccomp"])
    prog = struct.pack("HxxxxxxQ", len(cfg["seccomp"]) // 8, ctypes.addressof(buf))
    fbuf = ctypes.create_string_buffer(prog)
    check(libc.prctl(38, 1, 0, 0, 0), "no_new_privs")
    check(libc.prctl(22, 2, ctypes.addressof(fbuf), 0, 0), "seccomp")

def rlimits():
    resource.setrlimit(resource.RLIMIT_CPU, (1, 2))
    resource.setrlimit(resource.RLIMIT_AS, (256 << 20,) * 2)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20,) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NPROC, (32, 32))

def drop():
    os.setgroups([])
    os.setresgid(1500000001, 1500000001, 1500000001)
    os.setresuid(1500000001, 1500000001, 1500000001)

def child(steps, argv, workdir):
    """Runs the steps in order; "fork" forks a child that runs the remaining ones."""
    for i, step in enumerate(steps):
        if step.startswith("unshare:"):
            check(libc.unshare(int(step[8:])), "unshare")
        elif step == "fork":
            pid = os.fork()
            if pid == 0:
                return child(steps[i + 1:], argv, workdir)
            os.waitpid(pid, 0)
            os._exit(0)
        elif step == "mounts":
            mounts(workdir)
        elif step == "seccomp":
            seccomp()
        elif step == "rlimits":
            rlimits()
        elif step == "drop":
            drop()
        elif step == "run":  # the program in this process: no exec
            os.chdir(workdir)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            import builtins
            os.environ.clear()
            os.environ.update(cfg["env"])
            main = {"__name__": "__main__", "__builtins__": builtins, "__file__": "main.py"}
            exec(compile(SOURCE, "main.py", "exec"), main)
            sys.stdout.flush()
            os._exit(0)
    if argv is not None:
        os.chdir(workdir)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.execve(argv[0], argv, cfg["env"])
    os._exit(0)

inp = os.fdopen(0, "rb", buffering=0)
out = os.fdopen(int(sys.argv[2]), "wb", buffering=0)
while True:
    size = inp.read(4)
    if not size:
        break
    n = struct.unpack("I", size)[0]
    data = b""
    while len(data) < n:
        data += inp.read(n - len(data))
    steps, argv, workdir, SOURCE = marshal.loads(data)
    pid = os.fork()
    if pid == 0:
        try:
            child(steps, argv, workdir)
        finally:
            os._exit(1)
    st = os.waitpid(pid, 0)[1]
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    out.write(marshal.dumps((st, ru.ru_utime + ru.ru_stime)))
'''


def sandbox_seccomp_blob() -> bytes:
    """The sandbox's own seccomp filter, built by its builder."""
    return launcher.seccomp_filter()


class Helper:
    def __init__(self, env: dict[str, str]) -> None:
        cfg = {"remap": housekeeping.interpreter_remap(), "seccomp": sandbox_seccomp_blob()}
        cfg["env"] = env
        self.reply_r, reply_w = os.pipe()
        self.proc = subprocess.Popen(
            [sys.executable, "-S", "-s", "-B", "-c", HELPER, marshal.dumps(cfg).hex(),
             str(reply_w)],
            stdin=subprocess.PIPE,
            pass_fds=(reply_w,),
            env=dict(interpreter.BASE_ENV),
            cwd="/",
        )  # fmt: skip
        os.close(reply_w)
        self.cpu = 0.0

    def run(self, steps: list[str], argv: list[str] | None, workdir: str, source: bytes) -> float:
        """One request; returns the CPU seconds of its processes."""
        data = marshal.dumps((steps, argv, workdir, source))
        self.proc.stdin.write(struct.pack("I", len(data)) + data)
        self.proc.stdin.flush()
        status, cpu = marshal.loads(os.read(self.reply_r, 1 << 16))
        if status != 0:
            raise SystemExit(f"helper variant {steps} {argv and argv[1:3]} failed: {status}")
        used, self.cpu = cpu - self.cpu, cpu
        return used

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def sandbox_at(rev: str) -> types.ModuleType:
    """cptlab.sandbox as it was at git revision `rev`, as a module of its own (its own launcher
    server), so that it runs interleaved with today's. Only a revision where it was one file,
    src/cptlab/sandbox.py (before it became a package)."""
    root = Path(__file__).resolve().parent.parent
    source = subprocess.run(
        ["git", "-C", str(root), "show", f"{rev}:src/cptlab/sandbox.py"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    folder = Path(tempfile.mkdtemp(prefix="cptlab-sandbox-rev-"))
    path = folder / "sandbox_at_rev.py"
    path.write_text(source)  # a file: the launcher code is compiled from inspect.getsource
    spec = importlib.util.spec_from_file_location(f"cptlab_sandbox_{rev}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def switch_off(module: types.ModuleType, disabled: frozenset[str]) -> None:
    """Switch parts of a sandbox off: today's package (its `switches`), or an older revision's
    one-file module (`sandbox_at`), which kept them in `_disabled`."""
    if module is sandbox:
        switches.disabled = disabled
    else:
        module._disabled = disabled


def launcher_server(module: types.ModuleType):
    """A sandbox's launcher server, or None: today's package's (in `client`), or an older
    revision's one-file module's."""
    return client._server if module is sandbox else module._server


def server_cpu(module: types.ModuleType = sandbox) -> float:
    """The sandbox launcher server's CPU, with that of the launchers it has reaped (0 when none
    runs)."""
    server = launcher_server(module)
    if server is None or not server.alive():
        return 0.0
    with open(f"/proc/{server.proc.pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / TICKS


def own_cpu() -> float:
    self_ = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return self_.ru_utime + self_.ru_stime + kids.ru_utime + kids.ru_stime


def programs(args: argparse.Namespace) -> list[tuple[str, dict[str, str]]]:
    """(source, env) of the harness for each row's reference answer."""
    if args.data:
        from cptlab.rows import read_jsonl

        rows = read_jsonl(args.data)[: args.rows]
    else:
        import cptlab.domains.embedded.code  # noqa: F401 - registers code_train
        from cptlab.domains.registry import get_benchmark

        rows = get_benchmark("code_train").loader(args.rows, 0)
    out = []
    for row in rows:
        probes, _ = split_tests(row["metadata"]["tests"])
        source = harness(extract_code(row["answer"]), probes)
        out.append((source, {"CPTLAB_NONCE": "0" * 32}))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", help="a code benchmark's JSONL (default: generated code_train)")
    parser.add_argument("--rows", type=int, default=16, help="programs per variant and round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--compare-with",
        action="append",
        default=[],
        metavar="REV",
        help="also run the sandbox as it was at this git revision, interleaved (repeatable)",
    )
    args = parser.parse_args()
    progs = programs(args)
    py = sys.executable
    argv_program = [py, "-S", "-s", "-B", "-c", interpreter.BOOTSTRAP]
    base = tempfile.mkdtemp(prefix="cptlab-floor-", dir=housekeeping.workdir_base())
    os.chmod(base, 0o755)
    workdir = os.path.join(base, "work")
    os.mkdir(workdir)
    env = dict(interpreter.BASE_ENV, HOME=workdir, TMPDIR=workdir, CPTLAB_NONCE="0" * 32)
    helper = Helper(env)

    def helped(steps, argv=None, writes=True):
        def run(source: str) -> float:
            data = source.encode()
            if writes:  # main.py where the exec-ed interpreter finds it
                with open(os.path.join(workdir, "main.py"), "wb") as f:
                    f.write(data)
            return helper.run(steps, argv, workdir, data)

        return run

    def sandboxed(disabled: frozenset[str], module: types.ModuleType = sandbox):
        def run(source: str) -> float:
            switch_off(module, disabled)
            cpu0, srv0 = own_cpu(), server_cpu(module)
            result = module.run_python(source, env={"CPTLAB_NONCE": "0" * 32})
            if result.status != "ok":
                raise SystemExit(f"sandbox run failed: {result}")
            return own_cpu() - cpu0 + server_cpu(module) - srv0

        return run

    ns = lambda flags: [f"unshare:{flags}", "fork"]  # noqa: E731 - the PID ns needs a child
    variants: dict[str, object] = {}
    modes = {
        "sandbox (default)": frozenset(),
        "sandbox (interpreter exec-ed)": frozenset({"warm_interpreter"}),
        "sandbox (mount tree per program)": frozenset({"prepared_tree"}),
        "sandbox (no pre-built launcher)": frozenset({"prebuilt"}),
        "sandbox (no launcher server)": frozenset({"launcher_server"}),
    }
    for label, disabled in modes.items():
        variants[label] = sandboxed(disabled)
    for rev in args.compare_with:
        label = f"sandbox at {rev}"
        modes[label] = frozenset()
        variants[label] = sandboxed(frozenset(), sandbox_at(rev))
    variants |= {
        "floor: fork+exec python": helped([], argv_program),
        "floor: fork, no exec": helped(["run"]),
        "fork+exit": helped([]),
        "fork+fork": helped(["fork"]),
        "exec -I -S -c pass": helped([], [py, "-I", "-S", "-c", "pass"]),
        "exec -S -s -B -c pass": helped([], [py, "-S", "-s", "-B", "-c", "pass"]),
        "exec -c pass (site)": helped([], [py, "-c", "pass"]),
        "exec program (site)": helped([], [py, "main.py"]),
        "exec program, rlimits": helped(["rlimits"], argv_program),
        "exec program, seccomp": helped(["seccomp"], argv_program),
        "drop uid": helped(["drop"]),
        "sandbox namespaces": helped(ns(SANDBOX_NS)),
        "ns mount+pid": helped(ns(CLONE["mount"] | CLONE["pid"])),
        "ns mount+pid, mounts": helped(ns(CLONE["mount"] | CLONE["pid"]) + ["mounts"]),
    }
    for kind, flag in CLONE.items():
        variants[f"ns {kind}"] = helped(ns(flag))
    for fn in variants.values():  # warm-up: start the server and the helper, fill caches
        fn(progs[0][0])
    samples: dict[str, list[tuple[float, float]]] = {k: [] for k in variants}
    for _ in range(args.rounds):
        for name, fn in variants.items():
            walls, cpu = [], 0.0
            for source, _env in progs:
                t0 = time.perf_counter()
                cpu += fn(source)
                walls.append(time.perf_counter() - t0)
            samples[name].append((statistics.median(walls), cpu / len(progs)))
    helper.close()
    shutil.rmtree(base, ignore_errors=True)
    med = {
        k: tuple(1000 * statistics.median(s[i] for s in v) for i in (0, 1))
        for k, v in samples.items()
    }
    fork, execd = med["fork+exit"], med["floor: fork+exec python"]
    diff = lambda a, b: (med[a][0] - med[b][0], med[a][1] - med[b][1])  # noqa: E731
    rows = [(name, med[name]) for name in modes]
    rows += [
        ("floor: fork+exec python (no protection)", execd),
        ("floor: fork, no exec (no protection)", med["floor: fork, no exec"]),
        ("  fork+exit+wait of the helper", fork),
    ]
    for kind in CLONE:
        rows.append((f"namespace: {kind}", diff(f"ns {kind}", "fork+fork")))
    rows.append(
        ("namespaces: mount+pid+net+ipc (sandbox)", diff("sandbox namespaces", "fork+fork"))
    )
    rows.append(
        (
            "mounts (ro remount, remap, proc, shm, work)",
            diff("ns mount+pid, mounts", "ns mount+pid"),
        )
    )
    rows.append(("privilege drop", diff("drop uid", "fork+exit")))
    rows.append(("rlimits", diff("exec program, rlimits", "floor: fork+exec python")))
    rows.append(
        (
            "seccomp (install + per-syscall)",
            diff("exec program, seccomp", "floor: fork+exec python"),
        )
    )
    rows.append(("python -I -S start", diff("exec -I -S -c pass", "fork+exit")))
    rows.append(
        ("python -S -s -B start (the program's)", diff("exec -S -s -B -c pass", "fork+exit"))
    )
    rows.append(("python start with site", diff("exec -c pass (site)", "fork+exit")))
    rows.append(
        (
            "program: bootstrap+harness, -S -s -B",
            diff("floor: fork+exec python", "exec -S -s -B -c pass"),
        )
    )
    rows.append(("program with site (python main.py)", diff("exec program (site)", "fork+exit")))
    ref = med["sandbox (default)"][0]
    print(f"{len(progs)} programs x {args.rounds} rounds, per program (median over rounds):")
    print(f"  {'component':46s} {'wall ms':>8s} {'cpu ms':>8s} {'share':>6s}")
    for name, (wall, cpu) in rows:
        print(f"  {name:46s} {wall:8.2f} {cpu:8.2f} {wall / ref:6.2f}")
    print("share: of the default sandbox's wall time. Components are differences of two variants")
    print("(noise can make a small one negative); cpu excludes kernel workers (netns teardown).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
