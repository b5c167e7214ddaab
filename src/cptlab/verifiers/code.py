"""Code answers: run the model's program in the sandbox against unit tests or stdin/stdout
tests. Reward 1 only if every test passes (the study's rule)."""

from __future__ import annotations

import ast
import re
import secrets

from cptlab.sandbox import Limits, run_python
from cptlab.verifiers.base import Verdict, correct, malformed, register, wrong

_FENCE = re.compile(r"```(?:python|py|Python)?[ \t]*\n(.*?)```", re.DOTALL)


def _drop_think(text: str) -> str:
    """`re.sub(r"<think>.*?</think>", "", text, flags=re.DOTALL)` in one linear pass (the regex
    rescans the rest of the text from every unclosed <think>)."""
    kept, pos = [], 0
    while (start := text.find("<think>", pos)) >= 0:
        end = text.find("</think>", start + len("<think>"))
        if end < 0:
            break
        kept.append(text[pos:start])
        pos = end + len("</think>")
    kept.append(text[pos:])
    return "".join(kept)


def extract_code(completion: str) -> str:
    """The last fenced code block, else the whole completion (minus any <think> block)."""
    text = _drop_think(completion)
    blocks = _FENCE.findall(text)
    return (blocks[-1] if blocks else text).strip()


def limits_for(row: dict) -> Limits:
    meta = row.get("metadata", {})
    return Limits(
        cpu_seconds=float(meta.get("time_limit_s", 1.0)),
        wall_seconds=float(meta.get("time_limit_s", 1.0)) * 2 + 1,
        memory_mb=int(meta.get("memory_limit_mb", 256)),
    )


# The harness runs the solution and each assert in this one process, with the solution's own
# prints captured, and reports on the real stdout behind a per-run nonce so that a program
# printing "all passed" cannot forge the verdict. Everything it needs is bound in the locals of
# a function before the solution runs, the tests get the builtins as they were before it ran,
# and the report is a plain repr() written with os.write: a solution that monkeypatches
# `builtins`, `json`, `contextlib`, `sys.stdout` or the module's globals cannot turn failing
# tests into passing ones.
_HARNESS = """
def _harness():
    import builtins, io, os, sys
    nonce = os.environ.pop("CPTLAB_NONCE")
    write, run, copy, kind, text, rep = os.write, exec, dict, type, str, repr
    Error = BaseException
    clean_builtins = copy(builtins.__dict__)

    def describe(err):
        try:
            return "".join([text(kind(err).__name__), ": ", text(err)[:200]])
        except Error:
            return "an exception that cannot be described"

    ns = {"__name__": "__solution__"}
    results = []
    sys.stdout = io.StringIO()  # the solution's prints; the report goes straight to fd 1
    try:
        run(compile(%(source)r, "solution.py", "exec"), ns)
        loaded = None
    except Error as err:
        loaded = describe(err)
    if loaded is None:
        for test in %(tests)r:
            try:
                run(test, {**ns, "__builtins__": copy(clean_builtins)})
                results.append(None)
            except Error as err:
                results.append(describe(err))
    report = (nonce + rep((loaded, results)) + "\\n").encode()
    while report:
        report = report[write(1, report) :]


_harness()
"""


def _read_report(text: str, n_tests: int) -> tuple[str | None, list[str | None]]:
    """The harness's (load error, per-test errors); ValueError if it is not that."""
    try:
        loaded, results = ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as err:
        raise ValueError(f"unreadable ({type(err).__name__})") from None
    if not (loaded is None or isinstance(loaded, str)) or not isinstance(results, list):
        raise ValueError("wrong shape")
    if not all(r is None or isinstance(r, str) for r in results):
        raise ValueError("wrong shape")
    if loaded is None and len(results) != n_tests:
        raise ValueError(f"{len(results)} results for {n_tests} tests")
    return loaded, results


@register("python_unit_tests")
def python_unit_tests(completion: str, row: dict) -> Verdict:
    """metadata["tests"]: assert statements run against the model's code (function tasks)."""
    source = extract_code(completion)
    if not source:
        return malformed("no code in the completion", "No code was found.")
    # A program that does not compile fails in the harness with this same feedback; the check
    # spares a sandbox run (a quarter of the base model's code answers do not compile).
    try:
        compile(source, "solution.py", "exec")
    except SyntaxError as err:
        return wrong(f"The code does not run: SyntaxError: {str(err)[:200]}")
    except (ValueError, MemoryError, RecursionError):
        pass  # let the sandbox run it and report
    tests = row["metadata"]["tests"]
    nonce = secrets.token_hex(16)
    program = _HARNESS % {"source": source, "tests": list(tests)}
    result = run_python(program, env={"CPTLAB_NONCE": nonce}, limits=limits_for(row))
    if result.status == "sandbox_error":
        return malformed(f"sandbox error: {result.stderr[-300:]}", "The code could not be run.")
    if result.status != "ok":
        return wrong(f"The program failed: {result.status}. {result.stderr[-200:]}".strip())
    line = next((ln for ln in result.stdout.splitlines() if ln.startswith(nonce)), None)
    if line is None:
        return malformed("the test harness produced no verdict", "The program did not finish.")
    try:
        load_error, results = _read_report(line[len(nonce) :], len(tests))
    except ValueError as err:
        return malformed(f"garbled test harness verdict: {err}", "The program did not finish.")
    if load_error:
        return wrong(f"The code does not run: {load_error}")
    failed = [(t, e) for t, e in zip(tests, results, strict=True) if e is not None]
    if not failed:
        return correct(f"All {len(tests)} tests passed.")
    test, error = failed[0]
    return wrong(f"{len(failed)} of {len(tests)} tests failed, e.g. `{test[:120]}` ({error[:80]}).")


def _same_output(got: str, expected: str) -> bool:
    norm = lambda s: [line.rstrip() for line in s.strip().splitlines()]  # noqa: E731
    return norm(got) == norm(expected)


@register("stdio_tests")
def stdio_tests(completion: str, row: dict) -> Verdict:
    """metadata["tests"]: [{"input": stdin, "output": expected stdout}], one process per test."""
    source = extract_code(completion)
    if not source:
        return malformed("no code in the completion", "No code was found.")
    tests = row["metadata"]["tests"]
    limits = limits_for(row)
    for i, test in enumerate(tests):
        result = run_python(source, stdin=test["input"], limits=limits)
        if result.status == "sandbox_error":
            return malformed(f"sandbox error: {result.stderr[-300:]}", "The code could not be run.")
        if result.status != "ok":
            detail = result.stderr.strip().splitlines()[-1:] or [""]
            return wrong(f"Test {i + 1} of {len(tests)}: {result.status}. {detail[0][:120]}")
        if not _same_output(result.stdout, test["output"]):
            got, expected = result.stdout.strip()[:40], test["output"].strip()[:40]
            return wrong(
                f"Test {i + 1} of {len(tests)}: for input {test['input'].strip()[:40]!r} the "
                f"output was {got!r}, expected {expected!r}."
            )
    return correct(f"All {len(tests)} tests passed.")
