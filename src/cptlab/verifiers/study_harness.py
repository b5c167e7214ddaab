"""The program `study_code` runs in the sandbox: the study's way of running a solution on its
tests (Moenupa/SDPO-CL, verl/utils/reward_score/feedback/code.py), written from its behaviour.

It reads one JSON object on stdin: {"code", "testtype", "inputs", "fn_name", "time_limit",
"nonce"}, runs the code once per input in a fresh namespace with the study's restricted
builtins and import allowlist, and prints one line, the nonce then a JSON list with one result
per input: {"stdout": text} (stdin tests), {"value": json-able} (functional), {"ok": true}
(assert scripts), {"error": message} or {"timeout": true}. The expected outputs never enter
this process: the verifier compares outside the sandbox.

Standard library only: this file is sent as the sandbox's main.py.
"""

import __future__

import ast
import builtins
import io
import json
import os
import signal
import sys
import typing

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


class Deadline(BaseException):
    """A test ran past its time limit."""


def restricted_import(name, globals=None, locals=None, fromlist=(), level=0):
    if name.split(".")[0] not in MODULES:
        raise ImportError(f"Import of module '{name}' is not allowed")
    return builtins.__import__(name, globals, locals, fromlist, level)


def namespace():
    allowed = {name: getattr(builtins, name) for name in BUILTIN_NAMES}
    allowed.update(
        open=None, __import__=restricted_import, __build_class__=builtins.__build_class__
    )
    ns = {"__builtins__": allowed, "__name__": "__not_main__"}
    ns.update({name: getattr(typing, name) for name in TYPING_NAMES if hasattr(typing, name)})
    return ns


def jsonable(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    raise TypeError(f"Non-serializable result type: {type(value).__name__}")


def first_function(code, fn_name):
    try:
        defs = [n.name for n in ast.parse(code).body if isinstance(n, ast.FunctionDef)]
    except SyntaxError:
        return None
    return fn_name if fn_name and fn_name in defs else (defs[0] if defs else None)


def run_stdin(code, test_input):
    ns = namespace()
    sys.stdin, captured = io.StringIO(test_input), io.StringIO()
    sys.stdout = captured
    exec(compile('__name__ = "__main__"\n' + code, "Solution.py", "exec"), ns)
    return {"stdout": captured.getvalue()}


def run_functional(code, test_input, fn_name):
    ns = namespace()
    flags = __future__.annotations.compiler_flag
    exec(compile(code, "Solution.py", "exec", flags=flags, dont_inherit=True), ns)
    name = fn_name if fn_name and callable(ns.get(fn_name)) else first_function(code, fn_name)
    if name not in ns or not callable(ns.get(name)):
        name = code.split("(")[0].split()[-1]
    sys.stdout = io.StringIO()
    function = ns[name]
    if isinstance(test_input, dict):
        result = function(**test_input)
    else:  # the study splits the arguments on any whitespace
        result = function(*[json.loads(x) for x in test_input.split()])
    return {"value": jsonable(result)}


def run_code(code, test_input):
    ns = namespace()
    ns["__name__"] = "__main__"
    exec(compile(code, "Solution.py", "exec"), ns)
    exec(compile(test_input, "Tests.py", "exec"), ns)
    return {"ok": True}


def run_one(request, test_input):
    kind = request["testtype"]
    if kind == "stdin":
        return run_stdin(request["code"], test_input)
    if kind == "functional":
        return run_functional(request["code"], test_input, request.get("fn_name") or "")
    if kind == "code":
        return run_code(request["code"], test_input)
    raise ValueError(f"Invalid test type: {kind}")


def on_deadline(signum, frame):
    raise Deadline()


def main():
    request = json.loads(sys.stdin.read())
    report = os.fdopen(os.dup(1), "w")  # the program's prints go to a captured stdout
    nonce = request.pop("nonce")
    sys._getframe = None  # as the study's reliability guard does
    limit = float(request.get("time_limit") or 1) + 1.0
    signal.signal(signal.SIGALRM, on_deadline)
    results = []
    for test_input in request["inputs"]:
        signal.setitimer(signal.ITIMER_REAL, limit)
        try:
            result = run_one(request, test_input)
        except Deadline:
            result = {"timeout": True}
        except BaseException as err:  # the study fails a test on any exception
            result = {"error": f"{type(err).__name__}: {err}"[:500]}
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            sys.stdout, sys.stdin = sys.__stdout__, sys.__stdin__
        try:
            json.dumps(result)
        except (TypeError, ValueError) as err:
            result = {"error": f"{type(err).__name__}: {err}"[:500]}
        results.append(result)
    report.write(nonce + json.dumps(results) + "\n")
    report.flush()


if __name__ == "__main__":
    main()
