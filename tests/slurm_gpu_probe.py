"""A probe in front of a program that GPU jobs run (tests/test_slurm_cluster.py, the GPU drill):
it appends one JSON line to $GPU_PROBE_LOG, then execs the program with the same arguments.

    python -S -E slurm_gpu_probe.py REAL_PROGRAM ARGS...

The line holds the program's name and arguments, and two environments, each cut to SLURM's,
CUDA's and GPU_ variables: the program's own (the job step that runs the rule's command) and
the job's, read from the job's batch script (`scontrol listpids`, then /proc/<pid>/environ,
which needs root, as the test cluster does). The executor plugin's job step drops the
allocation's SLURM_* variables before it starts the command, so only the batch script shows the
allocation as the node gave it.
"""

import json
import os
import subprocess
import sys

PREFIXES = ("SLURM_", "CUDA_", "GPU_")


def gpu_variables(environ: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in sorted(environ.items()) if k.startswith(PREFIXES)}


def batch_environment(jobid: str) -> dict[str, str] | None:
    """The environment of job `jobid`'s batch script (its step `batch`, local id 0)."""
    listed = subprocess.run(
        ["scontrol", "listpids", jobid], capture_output=True, text=True, check=False
    ).stdout
    for line in listed.splitlines()[1:]:
        pid, _, step, local_id = (line.split() + ["", "", "", ""])[:4]
        if step == "batch" and local_id == "0":
            with open(f"/proc/{pid}/environ", "rb") as environ:
                pairs = (item.split(b"=", 1) for item in environ.read().split(b"\0") if item)
                return {k.decode(): v.decode(errors="replace") for k, v in pairs}
    return None


def main() -> None:
    real, args = sys.argv[1], sys.argv[2:]
    jobid = os.environ.get("SLURM_JOB_ID")
    job_env = batch_environment(jobid) if jobid else None
    record = {
        "program": os.path.basename(real),
        "args": args,
        "pid": os.getpid(),
        "command_env": gpu_variables(dict(os.environ)),
        "job_env": None if job_env is None else gpu_variables(job_env),
    }
    with open(os.environ["GPU_PROBE_LOG"], "a") as log:
        log.write(json.dumps(record) + "\n")
    os.execv(real, [real, *args])


if __name__ == "__main__":
    main()
