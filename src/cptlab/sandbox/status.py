"""What the launcher reports (its status lines) and how a run that must stop is stopped (its
whole process tree killed).
"""

from __future__ import annotations

import os
import signal
import subprocess

from cptlab.sandbox.client import ServedLauncher
from cptlab.sandbox.housekeeping import is_fresh_uid, kill_uid_processes


def parse_status(buf: bytes | bytearray) -> dict:
    """Parse the launcher's status lines (see `launcher_main`)."""
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


def kill_tree(
    proc: subprocess.Popen[bytes] | ServedLauncher, protections: dict[str, bool], uid: int | None
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
    if is_fresh_uid(uid) and not protections.get("pid_namespace"):
        kill_uid_processes(uid)
