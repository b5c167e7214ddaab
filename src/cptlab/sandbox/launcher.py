"""The launcher: the code of the processes A, B and C of each run (see the package docstring).

Shipped whole: the parent never runs this module's functions, it compiles the module's source
and ships it, marshalled, to a fresh interpreter (or to the launcher server, with server.py's
source after it; client.py), which runs it in a namespace of its own and calls `launcher_main`.
So it is self-contained: it imports only the standard library, and only what starts fast;
nothing of cptlab exists on the other side.

Each process runs one launch, so what its functions share is this module's globals: `settle`
sets them from the launch's cfg, and a pre-built B sets them again when its run comes
(`adopt_run`). Messages to the parent go over the status pipe as lines "P <protection> 0|1",
"X <wait status> <cpu seconds>" and "E <sandbox error>" (and, from the server's helper that
prepares the mount tree, "T <readonly> <seccomp filter>").
"""

import _signal as signal  # the `signal` module imports enum: ~4 ms of startup
import ctypes
import marshal
import os
import resource
import struct
import sys

PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_SECCOMP = 1, 4, 22
PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 36, 38
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWUSER = 0x20000, 0x08000000, 0x10000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
SANDBOX_NAMESPACES = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC

# The launch's state: `settle` sets it from the launch's cfg (and `adopt_run` again, in a
# pre-built B whose run has come), `launch` the rest.
cfg = {}
status_fd = -1  # the status pipe; -1 in a pre-built launcher, until its run comes
workdir = None
uid = None  # the sandbox uid when we are root, else None
is_root = False
disabled = ()
libc = None
tmpfs_opts = ""
blob = None  # the seccomp filter; None on a machine it does not know
in_ns = False  # whether A has its new namespaces
kids = []  # A's children, which `on_term` kills


def launcher_main(given=None):  # pragma: no cover - runs in the launcher
    """Body of the launcher process A (and, after forks, of B and C). Its cfg comes from the
    command line when A is started on its own, as `given` when the server forks it (or forks
    the helper that prepares the mount tree, cfg["template"]). Returns (True) only in a
    program process C that runs in the server's warm interpreter (`run_program`)."""
    settle(marshal.loads(bytes.fromhex(sys.argv[2])) if given is None else given)
    try:
        return launch()
    except BaseException as exc:  # noqa: BLE001 - report anything, then die
        die_reporting("launcher", exc, 1)


def die_reporting(what, exc, code):
    """Say on the status pipe that `what` failed with `exc` (unless the pipe is gone), then
    exit at once with `code`."""
    try:
        say("E", f"{what} failed: {exc!r}".replace("\n", " "))
    except OSError:
        pass
    os._exit(code)


def settle(given):
    """The launch's globals from its cfg; our umask; libc."""
    global cfg, status_fd, workdir, uid, disabled, is_root, libc, tmpfs_opts
    cfg = given
    status_fd = cfg["status_fd"]
    if status_fd >= 0:
        os.set_inheritable(status_fd, False)
    workdir = cfg["workdir"]
    uid = cfg["uid"]
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
    tmpfs_opts = f"size={cfg['tmpfs_bytes']},nr_inodes={cfg['tmpfs_inodes']}"


# --- status lines and syscalls ----------------------------------------------------------------


def say(kind, text):
    """One status line to the parent."""
    os.write(status_fd, f"{kind} {text}\n".encode())


def protect(**flags):
    """A status line of protections: each on (1) or off (0)."""
    say("P", " ".join(f"{k}={int(bool(v))}" for k, v in flags.items()))


def check(ret, what):
    """Raise OSError with errno where a libc call failed."""
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def enc(s):
    """A C string argument (None stays NULL)."""
    return None if s is None else s.encode()


def mount(src, target, fstype, flags, data=None):
    """mount(2), raising OSError where it fails."""
    check(libc.mount(enc(src), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


# --- A: the launch ----------------------------------------------------------------------------


def launch():
    """A: PDEATHSIG, new namespaces, then B (or, without namespaces, C) and its supervision.
    Returns only in a warm program process C."""
    global blob, in_ns
    check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "pdeathsig")
    if os.getppid() != cfg["parent_pid"]:
        os._exit(1)  # the trainer died before we set PDEATHSIG
    if cfg.get("template"):
        serve_template()
    blob = cfg["seccomp_blob"] if "seccomp_blob" in cfg else seccomp_filter()
    prebuilt = cfg.get("prebuilt", False)  # made before its run, which B then receives
    nproc = cfg.get("max_processes", 0)
    in_ns = "namespaces" not in disabled and unshare_namespaces()
    # Without a uid drop (user namespace) the program has our uid. Non-dumpable keeps it out
    # of our /proc/<pid>/{mem,fd} (the status pipe!) and ignoring SIGINT leaves it nothing to
    # throw at the init; other signals to a namespace init are dropped by the kernel. Both
    # are inherited by B and undone for C (exec resets dumpable; run_program resets SIGINT).
    # (Not earlier: a non-dumpable process cannot write its own uid_map.)
    check(libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "dumpable")
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if prebuilt and not in_ns:
        os._exit(1)  # the server falls back to a launcher per run
    if not prebuilt:
        report_namespaces(in_ns)
    signal.signal(signal.SIGTERM, on_term)
    if in_ns:
        return launch_in_namespaces(prebuilt, nproc)
    return launch_without_namespaces(nproc)


def serve_template():
    """The server's helper that prepares the tree (root only): it reports the tree and the
    seccomp filter ("T <readonly> <filter>"), then stays until the server has our mount
    namespace and kills us."""
    check(libc.unshare(SANDBOX_NAMESPACES), "unshare")  # what every launcher will need
    readonly = prepare_tree()
    template_blob = seccomp_filter()
    say("T", f"{int(readonly)} {template_blob.hex() if template_blob else '-'}")
    while True:
        signal.pause()


def unshare_namespaces():
    """New mount, PID, network and IPC namespaces; without root in a new user namespace too,
    mapping our uid and gid to themselves. Returns whether we have them."""
    if is_root:
        return libc.unshare(SANDBOX_NAMESPACES) == 0
    if libc.unshare(SANDBOX_NAMESPACES | CLONE_NEWUSER) != 0:
        return False
    # A launcher forked by the server inherits its non-dumpable flag, and a non-dumpable
    # process cannot write its own uid_map (its /proc/self files then belong to root).
    # Dumpable only until the maps are written (`launch`).
    check(libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "dumpable")
    real_uid, real_gid = os.getuid(), os.getgid()
    for name, text in (
        ("setgroups", "deny"),
        ("uid_map", f"{real_uid} {real_uid} 1"),
        ("gid_map", f"{real_gid} {real_gid} 1"),
    ):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)
    return True


def report_namespaces(in_ns):
    """The status line of the process protections, with or without namespaces."""
    protect(
        separate_process=True,
        pid_namespace=in_ns,
        network_namespace=in_ns,
        ipc_namespace=in_ns,
        user_namespace=in_ns and not is_root,
        kill_descendants=in_ns or cfg["fresh_uid"],
    )


def launch_in_namespaces(prebuilt, nproc):
    """A in its new namespaces: fork B, their init, and wait for it. Returns only in a warm
    program process C."""
    source = cfg.pop("source", None)  # else in main.py, before B hides the host's copy
    if source is None and not prebuilt:
        with open(os.path.join(workdir, "main.py"), "rb") as f:
            source = f.read()
    lifeline_r, lifeline_w = os.pipe()
    if fork_child() == 0:  # B: PID 1 of the new namespaces
        os.close(lifeline_w)
        return init_main(lifeline_r, source, prebuilt, nproc)
    os.close(lifeline_r)
    if prebuilt:
        os.close(3)  # the run goes to B: only B may hold the request socket
    reap(block=True)
    os._exit(0)


def launch_without_namespaces(nproc):
    """Fallback: no namespaces. A supervises C directly as a child subreaper. Returns only in a
    warm program process C (never: warm needs namespaces)."""
    check(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "subreaper")
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


def count_my_tasks():
    """The tasks (threads) of our uid, every process of it counted (from /proc)."""
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


# --- B: the init of the namespaces ------------------------------------------------------------


def init_main(lifeline_r, source, prebuilt, nproc):
    """B, PID 1 of the new namespaces: its mounts (a pre-built B then receives its run), then
    C, supervised. Returns only in a warm program process C."""
    check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "pdeathsig")
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
    if prebuilt:
        source, nproc = adopt_run()
    work_mount(source, readonly, private_proc, private_shm)
    child = os.fork()
    if child == 0:
        return run_program(True, nproc)
    supervise(child, True)


def adopt_run():
    """A pre-built B's run, now received: its settings become the launch's, then what A would
    have reported. Returns the run's source and process limit."""
    global cfg, status_fd, workdir, uid, disabled, is_root
    cfg = dict(receive_run(), seccomp_blob=blob, parent_pid=cfg["parent_pid"])
    status_fd, workdir, uid = 3, cfg["workdir"], cfg["uid"]
    disabled, is_root = cfg["disabled"], uid is not None
    nproc = cfg["max_processes"]
    report_namespaces(True)
    return cfg.pop("source"), nproc


def receive_run():
    """A pre-built B (cfg["prebuilt"]): wait on descriptor 3 for the run the server hands
    over (its stdin, stdout, stderr, status and cfg, as the server receives them), put
    them at 0..3 and return the run's cfg."""
    import _socket

    request = _socket.socket(fileno=3)
    message, ancillary, _, _ = request.recvmsg(16, _socket.CMSG_LEN(5 * 4))
    fds = received_fds(ancillary)
    request.close()
    if message != b"R" or len(fds) != 5:
        os._exit(1)
    run = marshal.loads(read_whole(fds[4]))
    for target, fd in enumerate(fds[:4]):  # every received fd is above 3
        os.dup2(fd, target)
    for fd in fds:
        os.close(fd)
    os.set_inheritable(3, False)
    return run


def received_fds(ancillary):
    """The descriptors in a message's ancillary data (as socket.recv_fds)."""
    import _socket

    fds = []
    for level, kind, data in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            fds += struct.unpack(f"{len(data) // 4}i", data[: len(data) // 4 * 4])
    return fds


def read_whole(fd):
    """The whole content of the file at descriptor `fd`."""
    size, chunks = os.fstat(fd).st_size, []
    while size > 0 and (chunk := os.pread(fd, size, sum(map(len, chunks)))):
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def supervise(child, in_ns):
    """Reap until C exits, report its wait status and CPU time, kill what is left, exit."""
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


def kill_rest(in_ns):
    """Kill every process the program left, then reap."""
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
    """Reap exited children: until none is left (block), or none has exited."""
    while True:
        try:
            pid, _ = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


# --- the mounts -------------------------------------------------------------------------------


def prepare_tree():
    """The mount tree every run starts from: private, every mount read-only, and (root) the
    interpreter's trees re-exposed where the sandbox uid could not reach them (pyenv in
    /root, mode 0700) on a read-only 0755 tmpfs. Returns whether all is read-only."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    readonly = "readonly" not in disabled and remount_all_readonly()
    for blocked, needed in cfg["remap"]:
        held = [os.open(path, os.O_PATH | os.O_DIRECTORY) for path in needed]
        mount("tmpfs", blocked, "tmpfs", MS_NOSUID | MS_NODEV, "size=65536,mode=0755")
        for fd, path in zip(held, needed, strict=True):  # the hidden trees, by descriptor
            os.makedirs(path, exist_ok=True)
            mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
            os.close(fd)
            mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
        mount(None, blocked, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    return readonly


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
            keep = st & (MS_NOSUID | MS_NODEV | MS_NOEXEC)
            mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | keep)
        except (OSError, ValueError):
            if fstype not in pseudo:
                ok = False
    return ok


def run_mounts():
    """This run's own /proc and private /dev/shm, on top of the prepared tree. Returns
    whether each was mounted."""
    try:
        mount("proc", "/proc", "proc", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
        private_proc = True
    except OSError:
        private_proc = False
    private_shm = True
    if os.path.isdir("/dev/shm"):  # private: multiprocessing's semaphores live there
        try:
            mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, tmpfs_opts + ",mode=1777")
        except OSError:
            private_shm = False
    return private_proc, private_shm


def work_mount(source, readonly, private_proc, private_shm):
    """The size-capped work folder holding main.py; then the mount protections' report."""
    os.makedirs(workdir, exist_ok=True)  # hidden if it lived in /dev/shm: recreate it
    owner = f",uid={uid},gid={uid}" if is_root else ""
    mount("tmpfs", workdir, "tmpfs", MS_NOSUID | MS_NODEV, tmpfs_opts + ",mode=0700" + owner)
    with open(os.path.join(workdir, "main.py"), "wb") as f:
        f.write(source)
    readonly = readonly and private_shm
    protect(mount_namespace=True, readonly_filesystem=readonly, private_proc=private_proc)
    protect(private_workdir=True)


# --- the seccomp filter -----------------------------------------------------------------------


def seccomp_filter():
    """BPF program: deny every socket but an AF_UNIX stream (socket, socketpair), deny
    connect, namespace/mount/bpf/io_uring/ptrace/keyring syscalls and foreign syscall
    ABIs; clone3 gets ENOSYS so libc falls back to clone, whose flags (unlike clone3's)
    the filter can inspect. None on a machine it does not know.

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
    return assemble_bpf(prog)


def assemble_bpf(prog):
    """The bytes of a BPF program whose rows may start with a label and jump to labels."""
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


# --- C: the program process -------------------------------------------------------------------


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
        set_rlimits(nproc)
        if is_root:
            drop_privileges()
        if warm:  # as exec would: a changed uid made us non-dumpable
            check(libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "dumpable")
        check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        seccomp = install_seccomp()
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
        die_reporting("program setup", exc, 127)
    os._exit(127)


def set_rlimits(nproc):
    """The run's CPU, address-space, file-size and process limits; no core dumps."""
    cpu = cfg["cpu_seconds"]
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_AS, (cfg["memory_bytes"],) * 2)
    resource.setrlimit(resource.RLIMIT_FSIZE, (cfg["max_file_bytes"],) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))


def drop_privileges():
    """Root: become the sandbox uid, with no supplementary groups, for good."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if os.getuid() != uid or os.geteuid() != uid or os.getgroups():
        raise OSError("privilege drop did not take effect")


def install_seccomp():
    """The seccomp filter on this process, unless there is none or it is switched off.
    Returns whether it is installed."""
    if blob is None or "seccomp" in disabled:
        return False
    buf = ctypes.create_string_buffer(blob)
    fprog = struct.pack("HxxxxxxQ", len(blob) // 8, ctypes.addressof(buf))
    fbuf = ctypes.create_string_buffer(fprog)
    return libc.prctl(PR_SET_SECCOMP, 2, ctypes.addressof(fbuf), 0, 0) == 0


# --- C in the server's warm interpreter -------------------------------------------------------


def warm_program():
    """The rest of what exec would do, in this forked interpreter (started with the program's
    flags and interpreter environment, which never ran another program): the program's
    environment, stdio objects, signal dispositions, sys.path/argv and a fresh __main__;
    then every other descriptor closed. Returns True, up to the server's top level."""
    show_as_program()
    fresh_stdio()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.path.insert(0, "")  # `python -c`: the working folder first
    sys.orig_argv = list(cfg["argv"])
    namespace = fresh_main()
    had_atexit = "atexit" in sys.modules
    import atexit

    atexit.register(warm_exit, namespace)  # the first registered runs last
    if not had_atexit:
        del sys.modules["atexit"]  # as after exec; the registration stays
    # the status pipe last: nothing can be reported after it
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    return True


def show_as_program():
    """/proc/<pid>/cmdline and environ of a warm program: those an exec would give it (the
    server's argv holds the launcher code, its environment is not the program's), so that
    the program and its children look on the host as after exec. Both show the blocks the
    kernel placed at the server's start, which we overwrite in place (as setproctitle
    does); the server's environment carries room for the program's (`SERVER_ENV`)."""
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


def fresh_stdio():
    """sys.stdin, stdout and stderr (and their __std*__) on descriptors 0-2, as the
    interpreter's start makes them."""
    import io

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


def fresh_main():
    """__main__ as `python -c` makes it; returns its namespace. That is also the namespace of
    the server's top level, which runs the bootstrap once we have returned (the launcher code
    runs in a namespace of its own)."""
    import builtins

    namespace = vars(sys.modules["__main__"])
    fresh = {k: namespace[k] for k in ("__name__", "__doc__", "__package__", "__loader__")}
    fresh.update(__spec__=None, __annotations__={}, __builtins__=builtins)
    namespace.clear()
    namespace.update(fresh)
    return namespace


def warm_exit(namespace):
    """The end of a warm program's interpreter, registered with atexit before the program.

    Called by the interpreter's own shutdown, after the non-daemon threads were joined and
    every other atexit callback ran, it does what remains of that shutdown that a program's
    output can show: flush sys.stdout and sys.stderr, then every file object the program
    left open (as their finalizers would: a file on fd 1 left unflushed still writes), then
    C stdio; and it exits with the status the interpreter would (`SERVER_STUB` records how
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
        code = exit_status(ended)
        streams = [getattr(sys, "stdout", None), getattr(sys, "stderr", None)]
        # the program's objects only: the server froze its own (gc.freeze)
        streams += [obj for obj in gc.get_objects() if isinstance(obj, io._IOBase)]
        flush_open(streams)
        libc.fflush(None)
    except BaseException:  # noqa: BLE001 - the interpreter's own shutdown takes over
        return
    if isinstance(ended, KeyboardInterrupt):  # the interpreter exits by SIGINT then
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        code = 130
    os._exit(code)


def exit_status(ended):
    """The exit status of a program that ended by `ended` (None: it returned)."""
    code = 0
    if isinstance(ended, SystemExit):  # as the interpreter's handle_system_exit
        value = ended.code
        if isinstance(value, int):
            code = value & 0xFF if -(1 << 63) <= value < 1 << 63 else 255
        elif value is not None:
            code = 1  # the interpreter printed it
    elif ended is not None:
        code = 1  # the interpreter printed the traceback
    return code


def flush_open(streams):
    """Flush each of `streams` that is not closed (as the interpreter's flush_std_files)."""
    for stream in streams:
        try:
            closed = stream is None or stream.closed
        except Exception:  # noqa: BLE001 - as the interpreter's file_is_closed
            closed = False
        if not closed:
            stream.flush()
