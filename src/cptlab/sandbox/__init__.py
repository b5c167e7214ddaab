"""Hardened runner for untrusted, model-written Python programs.

Every call of :func:`run_python` runs one program in a fresh, throw-away process tree:

    trainer --(request)--> server Z --fork--> launcher A --fork--> init B (PID 1 of new namespaces)
                                                     --fork--> C: limits, drop uid, run python

* Z is a ``python -S -s -B`` process (root, or the caller's uid) started once per trainer
  process with the program's interpreter flags and interpreter environment, that forks a
  launcher per request (server.py); it dies with the trainer. Where it cannot run
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
  exec (``warm_program`` in launcher.py); otherwise, or when the run's environment
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

runner.py        the public API: run_python, Limits, RunResult, active_protections
interpreter.py   the interpreters started: the program's flags, environment and bootstrap, the
                 launcher's and the server's stubs; whether a program may run warm
launcher.py      the code of A, B and C (`launcher_main`), shipped whole to their interpreter
server.py        the code of Z (`launcher_server`), shipped whole, after launcher.py
client.py        the trainer's side of Z: started, asked for a launcher; start_launcher
housekeeping.py  work folders, sandbox uids, the interpreter's folders shown to that uid, sweeps
status.py        the launcher's status lines; killing a run's process tree
switches.py      what the tests and benchmarks may switch off (never set in production)

Only what this package exports is the API; the modules are its parts.
"""

from cptlab.sandbox.runner import Limits, RunResult, active_protections, run_python

__all__ = ["Limits", "RunResult", "active_protections", "run_python"]
