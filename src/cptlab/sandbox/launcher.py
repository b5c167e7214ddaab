"""The launcher: the code of the processes A, B and C of each run (see the package docstring).

`launcher_main` is one function on purpose, and stays whole: it is not called in the parent but
shipped, as its source compiled and marshalled, to a fresh interpreter (or to the launcher
server, which forks it). What it runs must therefore be self-contained: every helper is nested
in it and every import is its own, since nothing of this module exists on the other side.
"""

from __future__ import annotations


def launcher_main(cfg: dict | None = None) -> bool:  # pragma: no cover - runs in the launcher
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
