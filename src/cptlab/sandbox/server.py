"""The launcher server Z: the process, started once per trainer process, that forks a launcher
for each run and whose interpreter warm programs are forked from.

Shipped whole, like the launcher and together with it: the parent (client.py) compiles
launcher.py's source followed by this module's into one code object, which Z's interpreter runs
in a namespace of its own before calling `launcher_server`. So it is self-contained: it imports
only the standard library, and what it uses of the launcher is defined just above it in that
namespace (the parent, which only reads this module, imports it). Z runs one server, so what its
functions share is this module's globals, set by `launcher_server`. Its parent's side is
client.py.

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

Z runs with the program's interpreter flags and interpreter environment (`SERVER_STUB`,
`SERVER_ENV`), so that the program process C, forked from it through A and B, can skip its
exec and the interpreter start (`warm_program`): Z never runs a program itself, so every
program starts from the same untouched interpreter, in namespaces of its own. As root, Z
also prepares once the mount tree that every run starts from (`prepare`).

A launcher is reaped only when the parent asks, so its pid cannot be reused while the parent
may still signal it. Z dies with the parent (PDEATHSIG, then a parent-pid check), and every
launcher with Z (the launcher's own PDEATHSIG).
"""

import _signal as signal
import _socket  # not `socket`: its imports would be in every fork's memory
import ctypes
import gc
import marshal
import os
import struct
import sys

if "launcher_main" not in globals():  # imported in the parent; shipped, launcher.py precedes us
    from cptlab.sandbox.launcher import CLONE_NEWNS, launcher_main, read_whole, received_fds

# The server's state, set by `launcher_server`.
sock = None  # the socket to the parent
setup = {}  # the server's settings (see client.py), the base of every launcher's cfg
server_libc = None  # its own: the launcher makes a `libc` per launch (`settle`)
max_fd = 0
prepared = {}  # the prepared mount tree and seccomp filter (`prepare`)
ready = None  # the pre-built launcher for the next run: (pid, our end of its socket), or None


def launcher_server():  # pragma: no cover - runs in the launcher server process
    """Body of the launcher server Z, which forks a launcher A for each run. Returns only in a
    warm program process C, whose program the top level then runs."""
    global sock, setup, server_libc, max_fd, prepared, ready
    sock = _socket.socket(fileno=int(sys.argv[2]))
    setup = marshal.loads(bytes.fromhex(sys.argv[4]))
    server_libc = ctypes.CDLL(None, use_errno=True)
    server_libc.prctl.argtypes = (ctypes.c_int,) + (ctypes.c_ulong,) * 4
    server_libc.setns.argtypes = (ctypes.c_int, ctypes.c_int)
    if server_libc.prctl(1, signal.SIGKILL, 0, 0, 0) != 0 or os.getppid() != int(sys.argv[3]):
        os._exit(1)  # PR_SET_PDEATHSIG failed, or the parent died before it was armed
    # Non-dumpable, as the launcher is: a program that kept our uid (no uid drop) cannot reach
    # our socket through /proc/<pid>/fd.
    if server_libc.prctl(4, 0, 0, 0, 0) != 0:
        os._exit(1)
    max_fd = os.sysconf("SC_OPEN_MAX")
    prepared = prepare() if setup["prepare"] else {}
    ready = prebuild()
    if ready is True:
        return True  # a warm program process: on to the bootstrap (SERVER_STUB)
    # Everything so far is the interpreter's and ours, never garbage: a warm program's
    # collections skip it (and leave its memory shared), and its exit finds its own objects.
    gc.freeze()
    return serve()


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
            launcher_main(cfg)
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


def prebuild():
    """The launcher A for the next run, made before that run exists (root, prepared tree):
    it enters the tree, unshares the namespaces and forks B, which mounts its /proc and
    /dev/shm; then B waits for the run on a socket of its own (`receive_run`), used once.
    So that all this overlaps the previous run instead of delaying the next. Returns (pid,
    our end of its socket), or None where runs get a launcher each; True in a warm program
    process, up to the caller's caller."""
    if "template_fd" not in prepared or "prebuilt" in setup["disabled"]:
        return None
    ours, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        return prebuilt_launcher(ours, theirs)
    theirs.close()
    return pid, ours


def prebuilt_launcher(ours, theirs):
    """The forked pre-built launcher A: in the prepared tree, its socket at descriptor 3, no
    other descriptor. Returns only in a warm program process."""
    program = None
    try:
        os.setsid()
        sock.detach()  # closed below; their objects must not close those numbers later
        ours.detach()
        if server_libc.setns(prepared["template_fd"], CLONE_NEWNS) != 0:
            os._exit(1)
        os.dup2(theirs.detach(), 3)
        os.closerange(4, max_fd)
        os.chdir("/")
        cfg = dict(setup, prebuilt=True, status_fd=-1, parent_pid=os.getppid())
        cfg.update(fresh_uid=False, template_readonly=prepared["template_readonly"])
        cfg["seccomp_blob"] = prepared["seccomp_blob"]
        program = launcher_main(cfg)
    except BaseException:  # noqa: BLE001 - whatever failed, this process ends
        pass
    if program is None:
        os._exit(1)
    return program  # a warm program process: True, up to the caller's caller


def serve():
    """Answer the parent's requests, one at a time, until it closes its end. Returns only in
    a warm program process."""
    global ready
    while True:
        try:
            message, ancillary, _, _ = sock.recvmsg(64, _socket.CMSG_LEN(5 * 4))
        except OSError:
            os._exit(1)
        fds = received_fds(ancillary)
        if not message:
            os._exit(0)  # the parent closed its end
        pid = None
        if message == b"U" and len(fds) == 5 and ready is not None:  # a run for a pre-built one
            pid = hand_to_prebuilt(fds)
        if pid is not None:
            reply = b"P%d" % pid
        elif message in (b"R", b"U") and len(fds) == 5:
            pid = os.fork()
            if pid == 0:
                return run_launcher(fds)  # a warm program process: on to the bootstrap
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
                return True  # a warm program process: on to the bootstrap (SERVER_STUB)


def hand_to_prebuilt(fds):
    """Pass a run's five descriptors on, unread, to the pre-built launcher's B (used once).
    Returns that launcher's pid, or None where it died: the run gets a launcher of its own."""
    global ready
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
    return pid


def run_launcher(fds):
    """The launcher A forked for one run: its cfg read from the run's file, the prepared tree
    entered where it may be, the run's descriptors at 0..3 and no other. Returns only in a
    warm program process."""
    program = None
    try:
        os.setsid()
        sock.detach()  # closed below; its object must not close that number later
        if ready is not None:
            ready[1].detach()  # likewise
        cfg = marshal.loads(read_whole(fds[4]))
        os.close(fds[4])
        if "seccomp_blob" in prepared:
            cfg["seccomp_blob"] = prepared["seccomp_blob"]
        enter_prepared_tree(cfg)
        # stdin, stdout, stderr, status -> 0..3. Z's own 0-2 are /dev/null, so no
        # received fd is below 3 and only the last dup2 can replace an fd (3).
        for target, fd in enumerate(fds[:4]):
            os.dup2(fd, target)
        os.closerange(4, max_fd)  # the socket and other runs' fds stay out
        cfg["status_fd"], cfg["parent_pid"] = 3, os.getppid()
        os.chdir(cfg["workdir"])
        program = launcher_main(cfg)
    except BaseException:  # noqa: BLE001 - whatever failed, this process ends
        pass
    if program is None:
        os._exit(1)
    return program


def enter_prepared_tree(cfg):
    """Root, with the tree prepared and not switched off: enter its mount namespace (or, where
    the run's work folder was made on a mount that came after it, ours again)."""
    if (
        "template_fd" in prepared
        and cfg["uid"] is not None
        and not {"namespaces", "readonly", "prepared_tree"} & set(cfg["disabled"])
        and server_libc.setns(prepared["template_fd"], CLONE_NEWNS) == 0
    ):
        if os.path.isdir(cfg["workdir"]):
            cfg["template_readonly"] = prepared["template_readonly"]
        else:  # made on a mount that came after the template: ours then
            with open(f"/proc/{os.getppid()}/ns/mnt", "rb") as ns:
                if server_libc.setns(ns.fileno(), CLONE_NEWNS) != 0:
                    os._exit(1)
