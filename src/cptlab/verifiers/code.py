"""Code answers: run the model's program in the sandbox against unit tests or stdin/stdout
tests. Reward 1 only if every test passes (the study's rule)."""

from __future__ import annotations

import ast
import dataclasses
import re
import secrets

from cptlab.sandbox import Limits, run_python
from cptlab.verifiers.asserts import (
    ENCODER,
    SplitTest,
    Unserializable,
    UnsupportedTest,
    check_namespace,
    decode_value,
    split_tests,
)
from cptlab.verifiers.base import Verdict, correct, malformed, register, unscorable, wrong

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


# The harness loads the solution, then evaluates each probe (cptlab.verifiers.asserts) in the
# solution's namespace and writes the encoded values behind a per-run nonce, with the
# solution's own prints captured. It holds no expected value and no verdict: the checks run in
# the verifier, on the decoded values, so nothing the program prints, patches or reads can turn
# a failing test into a passing one (the nonce only finds the report among stray output).
_HARNESS = """
def _harness():
    import builtins, io, os, sys
    nonce = os.environ.pop("CPTLAB_NONCE")
    write, run, evaluate, kind, text, rep = os.write, exec, eval, type, str, repr
    Error, copy = BaseException, dict
    clean_builtins = copy(builtins.__dict__)
%(encoder)s
    encode = _encoder()

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
        for probe in %(probes)r:
            try:
                # the builtins as they were before the solution ran (a probe may call them)
                scope = {**ns, "__builtins__": copy(clean_builtins)}
                results.append(["v", encode(evaluate(probe, scope))])
            except Error as err:
                results.append(["e", describe(err)])
    report = (nonce + rep([loaded, results]) + "\\n").encode()
    while report:
        report = report[write(1, report) :]


_harness()
"""
# Probe values travel on stdout, so it may hold more than a program's usual output.
MAX_REPORT_BYTES = 8 << 20


def harness(source: str, probes: list[str]) -> str:
    encoder = "\n".join("    " + line if line else line for line in ENCODER.splitlines())
    return _HARNESS % {"source": source, "probes": list(probes), "encoder": encoder}


def _read_report(text: str, n_probes: int) -> tuple[str | None, list]:
    """The harness's (load error, per-probe ["v", encoded] | ["e", error]); ValueError if it is
    not that."""
    try:
        loaded, results = ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as err:
        raise ValueError(f"unreadable ({type(err).__name__})") from None
    if not (loaded is None or isinstance(loaded, str)) or not isinstance(results, list):
        raise ValueError("wrong shape")
    if loaded is None and len(results) != n_probes:
        raise ValueError(f"{len(results)} results for {n_probes} probes")
    return loaded, results


def _probe_values(results: list) -> dict[int, object]:
    """Decoded probe values; a probe that raised maps to the exception's description."""
    values: dict[int, object] = {}
    for i, result in enumerate(results):
        if not (isinstance(result, list) and len(result) == 2 and result[0] in ("v", "e")):
            raise ValueError(f"probe {i}: wrong shape")
        values[i] = decode_value(result[1]) if result[0] == "v" else ProbeError(str(result[1]))
    return values


class ProbeError(Exception):
    """A probe raised in the sandbox; its check fails with that error."""


def _check(test: SplitTest, values: dict[int, object]) -> str | None:
    """None when `test` holds on the probe values, else why not."""
    for i in test.probes:
        if isinstance(values[i], ProbeError):
            return str(values[i])
    try:
        exec(test.check, check_namespace({i: values[i] for i in test.probes}))
    except AssertionError:
        odd = [v for i in test.probes if isinstance(v := values[i], Unserializable)]
        return f"AssertionError: returned {odd[0]!r}" if odd else "AssertionError"
    except Exception as err:
        return f"{type(err).__name__}: {str(err)[:200]}"
    return None


@register("python_unit_tests")
def python_unit_tests(completion: str, row: dict) -> Verdict:
    """metadata["tests"]: assert statements run against the model's code (function tasks);
    metadata["prelude"], if any, runs before the code (e.g. LiveCodeBench's typing names)."""
    source = extract_code(completion)
    if not source:
        return malformed("no code in the completion", "No code was found.")
    source = row["metadata"].get("prelude", "") + source
    # A program that does not compile fails in the harness with this same feedback; the check
    # spares a sandbox run (a quarter of the base model's code answers do not compile).
    try:
        compile(source, "solution.py", "exec")
    except SyntaxError as err:
        return wrong(f"The code does not run: SyntaxError: {str(err)[:200]}")
    except (ValueError, MemoryError, RecursionError):
        pass  # let the sandbox run it and report
    tests = row["metadata"]["tests"]
    try:
        probes, split = split_tests(tests)
    except UnsupportedTest as err:
        return malformed(f"unsupported test shape: {err}", "The tests could not be run.")
    nonce = secrets.token_hex(16)
    limits = dataclasses.replace(limits_for(row), max_output_bytes=MAX_REPORT_BYTES)
    result = run_python(harness(source, probes), env={"CPTLAB_NONCE": nonce}, limits=limits)
    if result.status == "sandbox_error":
        return unscorable(f"sandbox error: {result.stderr[-300:]}", "The code could not be run.")
    if result.status != "ok":
        return wrong(f"The program failed: {result.status}. {result.stderr[-200:]}".strip())
    line = next((ln for ln in result.stdout.splitlines() if ln.startswith(nonce)), None)
    if line is None:
        return malformed("the test harness produced no verdict", "The program did not finish.")
    try:
        load_error, results = _read_report(line[len(nonce) :], len(probes))
        values = _probe_values(results) if load_error is None else {}
    except (ValueError, TypeError, OverflowError, RecursionError, MemoryError) as err:
        return malformed(f"garbled test harness report: {err}", "The program did not finish.")
    if load_error:
        return wrong(f"The code does not run: {load_error}")
    failed = [(t.source, e) for t in split if (e := _check(t, values)) is not None]
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
            return unscorable(
                f"sandbox error: {result.stderr[-300:]}", "The code could not be run."
            )
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
