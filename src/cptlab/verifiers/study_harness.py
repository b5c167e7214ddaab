"""The program `study_code` runs in the sandbox: the study's way of running a solution on its
tests (Moenupa/SDPO-CL, verl/utils/reward_score/feedback/code.py), written from its behaviour.

It reads one JSON object on stdin: {"code", "testtype", "inputs", "fn_name", "time_limit",
"nonce", "start"}, runs the code on each input from index `start` on, in a fresh namespace with
the study's restricted builtins, import allowlist and debug buffer, and prints one line per
test as soon as it ends: the nonce, then a JSON object {"i": index, ...} with one of
  {"stdout": text}                         a stdin test's whole output
  {"value": json-able, "text", "length", "is_text"}   a functional test's result, its str()
                                            (first TEXT_CHARS characters), that string's length
                                            and whether the result was a string
  {"ok": true}                              an assert script that raised nothing
  {"error": text}                           what the study writes after "Error: ": the
                                            exception's type and message and its last
                                            Solution.py frames, or a non-serialisable result
  {"timeout": true}                         past the time limit plus one second ("ended":
                                            true when the harness then stopped: the program
                                            kept catching the alarm)
and, except after a timeout, "debug": {"head": [...], "lines": n} when the test wrote to
stderr or called `debug_print`: its first DEBUG_LINES lines (each cut after DEBUG_LINE_CHARS)
and its line count, all the feedback ever shows of it. The expected outputs never enter this
process: the verifier compares outside the sandbox. A test that kills the process (a CPU-bound
hang the alarm cannot interrupt hits the per-test CPU limit) leaves its line missing; the
verifier then runs the remaining tests again from the next index.

Standard library only: this file is sent as the sandbox's main.py.
"""

import __future__

import ast
import builtins
import io
import json
import math
import os
import resource
import signal
import sys
import traceback
import typing
from collections.abc import MutableMapping

FILENAME = "Solution.py"
BUILTIN_NAMES = (
    "abs all any bool bytes callable chr dict enumerate filter float format frozenset hash hex "
    "int isinstance issubclass iter len list map max min next object ord pow print range repr "
    "reversed round set slice sorted str sum tuple zip input"
).split()
MODULES = set(
    (
        "math cmath itertools functools operator statistics random collections heapq bisect "
        "array string re typing json io fractions decimal dataclasses datetime time sys "
        "sortedcontainers numpy"
    ).split()
)
TYPING_NAMES = (
    "Any Optional Union List Dict Set Tuple Callable Iterable Iterator Sequence Mapping "
    "MutableMapping MutableSequence MutableSet DefaultDict Deque FrozenSet Type TypeVar Generic "
    "Literal TypedDict NoReturn overload"
).split()
# The study's namespace offers its debug buffer and a print into it; the program cannot rebind
# either name.
DEBUG_BUFFER, DEBUG_PRINT = "__debug_buffer__", "debug_print"
PROTECTED = {DEBUG_BUFFER, DEBUG_PRINT}
TRACE_FRAMES = 3  # the last Solution.py frames an error shows
# The feedback shows at most 250 characters of a value (and "..." past them), 10 debug lines of
# at most 300: one more character than shown is enough to know a cut happened.
TEXT_CHARS = 251
DEBUG_LINES, DEBUG_LINE_CHARS = 10, 301
# The feedback never shows more than 2,000 characters: an error text is cut well past that.
ERROR_CHARS = 4000
# After the alarm, re-raise every REARM_S until the test ends (a program may swallow one); a
# program that swallows SWALLOWED_ALARMS of them is ended with the test reported timed out.
REARM_S = 0.1
SWALLOWED_ALARMS = 10


class Deadline(BaseException):
    """A test ran past its time limit."""


class GuardedNames(MutableMapping):
    """The module-level names of an exec: the namespace itself, except that binding or deleting
    a protected name does nothing (as in the study's harness)."""

    def __init__(self, ns):
        self.ns = ns

    def __getitem__(self, key):
        return self.ns[key]

    def __setitem__(self, key, value):
        if key not in PROTECTED:
            self.ns[key] = value

    def __delitem__(self, key):
        if key not in PROTECTED:
            del self.ns[key]

    def __iter__(self):
        return iter(self.ns)

    def __len__(self):
        return len(self.ns)


class Discard(io.TextIOBase):
    """stdout where the study does not read it (a functional test's prints, an assert
    script's): written nowhere, so it never counts against the sandbox's output limit."""

    def writable(self):
        return True

    def write(self, text):
        return len(text)


def restricted_import(name, globals=None, locals=None, fromlist=(), level=0):
    if name.split(".")[0] not in MODULES:
        raise ImportError(f"Import of module '{name}' is not allowed")
    return builtins.__import__(name, globals, locals, fromlist, level)


def namespace(debug):
    allowed = {name: getattr(builtins, name) for name in BUILTIN_NAMES}
    allowed.update(
        open=None, __import__=restricted_import, __build_class__=builtins.__build_class__
    )

    def debug_print(*args, sep=" ", end="\n", **_ignored):
        try:
            debug.write(sep.join(str(a) for a in args) + end)
        except Exception:  # an argument whose str() fails
            debug.write(" ".join(["<unprintable>"] * len(args)) + end)

    ns = {"__builtins__": allowed, DEBUG_PRINT: debug_print, DEBUG_BUFFER: debug}
    ns.update({name: getattr(typing, name) for name in TYPING_NAMES if hasattr(typing, name)})
    ns["__name__"] = "__not_main__"
    return ns


def run(code_obj, ns):
    exec(code_obj, ns, GuardedNames(ns))


def jsonable(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    raise TypeError(f"Non-serializable result type: {type(value).__name__}")


def error_text(err):
    """The study's error text: type and message, then for each of the last Solution.py frames
    its source line (where the line cache has it) and its place."""
    try:
        message = f"{type(err).__name__}: {err}"
    except Exception:  # a message that cannot be rendered
        message = f"{type(err).__name__}: <unprintable>"
    frames = [f for f in traceback.extract_tb(err.__traceback__) if f.filename == FILENAME]
    parts = [message]
    for frame in frames[-TRACE_FRAMES:]:
        if frame.line:
            parts.append(f"  {frame.line}")
        parts.append(f"Line {frame.lineno} in {frame.name} ({FILENAME})")
    return "\n".join(parts)


def function_name(code, fn_name, ns):
    """The named function if the code defines it, else the first top-level function, else the
    word before the code's first parenthesis (the study's fallbacks)."""
    if fn_name and callable(ns.get(fn_name)):
        return fn_name
    try:
        defs = [n.name for n in ast.parse(code).body if isinstance(n, ast.FunctionDef)]
    except SyntaxError:
        defs = []
    name = fn_name if fn_name in defs else (defs[0] if defs else None)
    if name in ns and callable(ns[name]):
        return name
    return code.split("(")[0].split()[-1]


def run_stdin(code, test_input, ns):
    sys.stdin, captured = io.StringIO(test_input), io.StringIO()
    sys.stdout = captured
    run(compile('__name__ = "__main__"\n' + code, FILENAME, "exec"), ns)
    return {"stdout": captured.getvalue()}


def run_functional(code, test_input, fn_name, ns):
    flags = __future__.annotations.compiler_flag
    sys.stdout = Discard()
    run(compile(code, FILENAME, "exec", flags=flags, dont_inherit=True), ns)
    function = ns[function_name(code, fn_name, ns)]
    if isinstance(test_input, dict):
        result = function(**test_input)
    else:  # the study splits the arguments on any whitespace
        result = function(*[json.loads(x) for x in test_input.split()])
    try:
        value = jsonable(result)
    except TypeError as err:  # the study's message, without the exception's type
        return {"error": str(err)}
    text = str(result)
    return {
        "value": value,
        "text": text[:TEXT_CHARS],
        "length": len(text),
        "is_text": isinstance(result, str),
    }


def run_code(code, test_input, ns):
    ns["__name__"] = "__main__"
    sys.stdout = Discard()
    run(compile(code, FILENAME, "exec"), ns)
    run(compile(test_input, "Tests.py", "exec"), ns)
    return {"ok": True}


def run_one(request, test_input, ns):
    kind = request["testtype"]
    if kind == "stdin":
        return run_stdin(request["code"], test_input, ns)
    if kind == "functional":
        return run_functional(request["code"], test_input, request.get("fn_name") or "", ns)
    if kind == "code":
        return run_code(request["code"], test_input, ns)
    raise ValueError(f"Invalid test type: {kind}")


def debug_summary(text):
    lines = text.strip().split("\n")
    if not lines[0]:
        return None
    return {"head": [line[:DEBUG_LINE_CHARS] for line in lines[:DEBUG_LINES]], "lines": len(lines)}


class Report:
    """The per-test lines, on a copy of the original stdout (the program's prints go to a
    captured one), and the test running now."""

    def __init__(self, nonce):
        self.out = os.fdopen(os.dup(1), "w")
        self.nonce = nonce
        self.index = None
        self.alarms = 0

    def write(self, index, result):
        try:
            line = json.dumps({"i": index, **result})
        except (TypeError, ValueError) as err:  # e.g. a float key the value cannot carry
            line = json.dumps({"i": index, "error": f"{type(err).__name__}: {err}"})
        self.out.write(self.nonce + line + "\n")
        self.out.flush()

    def on_alarm(self, signum, frame):
        self.alarms += 1
        if self.alarms > SWALLOWED_ALARMS:  # the program catches Deadline and goes on
            self.write(self.index, {"timeout": True, "ended": True})
            os._exit(0)
        raise Deadline()


def cpu_used():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_test(request, test_input, limit):
    """One test's result. The alarm interrupts Python code; a CPU-bound call it cannot reach
    meets the per-test CPU limit (SIGXCPU ends the process: the verifier sees a missing line)."""
    debug = io.StringIO()
    ns = namespace(debug)
    run_soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = math.ceil(cpu_used() + limit) + 1
    if run_soft != resource.RLIM_INFINITY:
        soft = min(soft, run_soft)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    sys.stderr = debug
    signal.setitimer(signal.ITIMER_REAL, limit, REARM_S)
    try:
        try:
            result = run_one(request, test_input, ns)
        except Deadline:
            raise
        except BaseException as err:  # the study fails a test on any exception
            result = {"error": error_text(err)[:ERROR_CHARS]}
        signal.setitimer(signal.ITIMER_REAL, 0)
    except Deadline:  # raised in the test, or in its handler of another exception
        signal.setitimer(signal.ITIMER_REAL, 0)
        return {"timeout": True}
    finally:
        sys.stdout, sys.stdin, sys.stderr = sys.__stdout__, sys.__stdin__, sys.__stderr__
        resource.setrlimit(resource.RLIMIT_CPU, (run_soft, hard))
    summary = debug_summary(debug.getvalue())
    if summary is not None:
        result["debug"] = summary
    return result


def main():
    request = json.loads(sys.stdin.read())
    report = Report(request.pop("nonce"))
    sys._getframe = None  # as the study's reliability guard does
    limit = float(request.get("time_limit") or 1) + 1.0
    signal.signal(signal.SIGALRM, report.on_alarm)
    for index in range(int(request.get("start", 0)), len(request["inputs"])):
        report.index, report.alarms = index, 0
        report.write(index, run_test(request, request["inputs"][index], limit))


if __name__ == "__main__":
    main()
