"""`python -m cptlab`: the CLI, for launchers that start a module in each process
(`accelerate launch -m cptlab ...`, `torchrun -m cptlab ...`).

A process that returns from the CLI has written all it writes (a stage's checkpoint and
manifest, its log lines): it then ends at once, without the interpreter's teardown. On the
rehearsal's 2 cores that teardown took about 5 s of each training stage (measured with
`perf`: the garbage collector walking the heap of torch, vLLM and TRL while the interpreter
freed its modules, and the colocated vLLM engine's own shutdown), after the stage's last
line; no output depends on it. An error ends the same way, with the exit code `main` returns
(it has printed the message, and an internal error's traceback); argparse's exit still takes
the ordinary way out.
"""

import ctypes
import logging
import os
import sys

from cptlab.cli import main

code = main()
logging.shutdown()  # flushes the log handlers, as the interpreter's exit would
sys.stdout.flush()
sys.stderr.flush()
try:  # and C's stdio buffers (native libraries' printf into a redirected log), as exit() would
    ctypes.CDLL(None).fflush(None)
except (OSError, AttributeError):
    pass
os._exit(code)
