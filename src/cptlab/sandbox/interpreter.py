"""The interpreters the sandbox starts: the program's (its flags, its base environment and the
bootstrap that runs main.py), the stubs that start a launcher or the launcher server, the
server's environment, and whether a run's program may run in the server's warm interpreter.
"""

from __future__ import annotations

import os
import sys

from cptlab.sandbox import switches

BASE_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "PYTHONHASHSEED": "0",
    "PYTHONIOENCODING": "utf-8",
    "PYTHONUTF8": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
}

# Runs as the program's `__main__` (python -S -c ...). It restores exit()/quit() (which `-S`
# drops but model code uses), makes sys.argv/__file__ look like `python main.py`, and hides its
# own frame (and, in a warm interpreter, the launcher's frame above it) from tracebacks so that
# stderr looks exactly like a plain script run.
BOOTSTRAP = """\
import sys as _s, builtins as _b
class _Quitter:
    def __init__(self, name):
        self.name = name
    def __repr__(self):
        return f"Use {self.name}() to exit"
    def __call__(self, code=None):
        raise SystemExit(code)
_b.exit, _b.quit = _Quitter("exit"), _Quitter("quit")
def _hook(t, v, tb, _me=_s._getframe().f_code, _orig=_s.excepthook):
    mine = tb
    while mine is not None and mine.tb_frame.f_code is not _me:
        mine = mine.tb_next
    if mine is not None:
        tb = mine.tb_next
        if isinstance(v, BaseException):
            v.__traceback__ = tb
    _orig(t, v, tb)
_s.excepthook = _hook
__file__ = "main.py"
_s.argv[:] = [__file__]
with open(__file__, "rb") as _f:
    _code = compile(_f.read(), __file__, "exec")
del _s, _b, _Quitter, _hook, _f
exec(globals().pop("_code"))
"""

# The program's interpreter: `python -S -s -B -c <bootstrap>` in BASE_ENV plus the run's env.
PROGRAM_FLAGS = [sys.executable, "-S", "-s", "-B", "-c"]
# A launcher started on its own. The launcher code (client.py `_launcher_code_hex`) runs in a
# namespace of its own, here as in the server, where __main__'s is the warm program's
# (`fresh_main`).
LAUNCHER_STUB = "import marshal,sys;exec(marshal.loads(bytes.fromhex(sys.argv[1])),{})"
# The server's: a program process forked from the server (a warm interpreter) returns from the
# launcher code with a fresh __main__ namespace and runs the bootstrap right here, at the top
# level and on the same lines as after exec, so that exit codes, uncaught exceptions, the stack
# depth and interpreter shutdown (atexit, threads, flushing) are the interpreter's own.
# Unlike exec-ed programs it records how the program ended, for `warm_exit`. The launcher code
# comes in a file (argv[1] its descriptor), so that the argv a program inherits stays small,
# and runs in a namespace of its own (as a launcher's). Before it imports anything, the working
# folder that `-c` put first in sys.path goes: only programs get it back (`warm_program`).
SERVER_STUB = (
    "import marshal,sys;sys.path[:1]==[''] and sys.path.pop(0);"
    "exec(marshal.loads(open(int(sys.argv[1]),'rb').read()),{})"
    + ";"
    + BOOTSTRAP.replace(
        'exec(globals().pop("_code"))\n',
        'try: exec(globals().pop("_code"))\n'
        "except BaseException as _e: _cptlab_exit = _e; raise\n"
        "_cptlab_exit = None\n",
    )
)


# The server's environment: what the program's interpreter reads at its start, and room for
# each warm program's environment (`show_as_program`).
_ENV_ROOM = 8192
SERVER_ENV = dict(BASE_ENV, CPTLAB_SANDBOX_ENV_ROOM="." * _ENV_ROOM)
# Environment variables that an interpreter (or the C library under it) reads at its start: a
# run whose env sets one gets its own exec-ed interpreter, not a warm one started without it.
_STARTUP_ENV_PREFIXES = ("PYTHON", "LC_", "LD_", "MALLOC_", "GLIBC_")
_STARTUP_ENV_NAMES = frozenset({"LANG", "LANGUAGE", "TZ"})


def may_run_warm(cfg: dict) -> bool:
    """Whether the program may run in an interpreter forked from the server's instead of an
    exec-ed one: its interpreter start would see what the server's saw, and its environment
    fits the room in the server's. Root only: without root the program keeps our uid in a user
    namespace, where it holds every capability until an exec drops them."""
    if "warm_interpreter" in switches.disabled or cfg["uid"] is None:
        return False
    if cfg["argv"][:-1] != PROGRAM_FLAGS or cfg["python"] != sys.executable:
        return False
    if sum(len(os.fsencode(f"{k}={v}")) + 1 for k, v in cfg["env"].items()) > _ENV_ROOM:
        return False
    return all(cfg["env"].get(k) == v for k, v in BASE_ENV.items()) and not any(
        k in _STARTUP_ENV_NAMES or k.startswith(_STARTUP_ENV_PREFIXES)
        for k in cfg["env"]
        if k not in BASE_ENV
    )
