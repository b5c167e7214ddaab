"""The study's code reward (`data.rewards: study`; Moenupa/SDPO-CL,
verl/utils/reward_score/feedback/code.py, called with sparse rewards), written from its behaviour.

- The program is the longest fenced block (any label, the fence line ending right after it),
  think blocks included; without one the reward is 0.
- Each test runs in a fresh namespace with the study's restricted builtins (no exception
  classes, no `open`), its import allowlist and typing names, within the test's time limit
  plus one second (`study_harness.py`, in the sandbox).
- stdin tests compare the whole output, stripped, with newlines as spaces; functional tests
  call the function with the input split on whitespace, each piece JSON, and compare canonical
  JSON; assert scripts pass when nothing raises. The reward is 1 only if every test passes.

The tests are `metadata["study_tests"]` ({"testtype", "inputs", "outputs", "fn_name",
"time_limit"}, as the study stores them), else derived from `metadata["tests"]`: stdin/stdout
pairs as stdin tests (time limit 1 s, the study's default), assert lists as one script (5 s,
as the study runs HumanEval+ and MBPP+). The feedback follows the study's layout for the first
failing test; its truncation limits and choice among several failures are not reproduced.

As in the study, the program and its tests share one process, so a program that inspects the
harness could forge a pass of an assert script; the strict verifiers keep their split tests
(docs/reliability.md). The expected outputs of stdin and functional tests never enter it.
"""

from __future__ import annotations

import json
import re
import secrets
from functools import cache
from pathlib import Path

from cptlab.sandbox import Limits, run_python
from cptlab.verifiers.base import Verdict, register

_BLOCK = re.compile(r"```(\w*)\n(.*?)```", re.DOTALL)
HARNESS = Path(__file__).with_name("study_harness.py")
# code.py: format_test_feedback's text for a completion without a code block.
STUDY_FORMAT_FEEDBACK = "Incorrect Format: Put your code inside a ```python ... ``` block."
STUDY_DEFAULT_TIME_LIMIT = 1.0
STUDY_ASSERT_TIME_LIMIT = 5.0
STUDY_MEMORY_MB = 1024
MAX_RUN_SECONDS = 300.0
MAX_REPORT_BYTES = 16 << 20


@cache
def harness_source() -> str:
    """The harness's text, read once per process (it runs for every completion)."""
    return HARNESS.read_text()


def study_program(completion: str) -> str | None:
    """The longest fenced block's body (the first of equal ones), None without one."""
    blocks = [body for _, body in _BLOCK.findall(completion)]
    return max(blocks, key=len) if blocks else None


def study_tests(row: dict) -> dict:
    """The row's tests in the study's form."""
    meta = row["metadata"]
    if "study_tests" in meta:
        return meta["study_tests"]
    tests = meta["tests"]
    if tests and all(isinstance(t, str) for t in tests):
        return {
            "testtype": "code",
            "inputs": ["\n".join(tests)],
            "outputs": [""],
            "time_limit": STUDY_ASSERT_TIME_LIMIT,
        }
    return {
        "testtype": "stdin",
        "inputs": [t["input"] for t in tests],
        "outputs": [t["output"] for t in tests],
        "time_limit": STUDY_DEFAULT_TIME_LIMIT,
    }


def _flat(text: str) -> str:
    return text.strip().replace("\n", " ").replace("\r", "")


def _expected_stdout(output: str) -> str:
    """code.py trims an expected output that ends in "-" back to before its last "-"."""
    output = output.strip()
    if output.endswith("-"):
        output = output[: output.rfind("-")].rstrip()
    return _flat(output)


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _failure(kind: str, result: dict, test_input: object, expected: str) -> str | None:
    """None if the test passed, else the study's feedback text for it."""
    shown = str(test_input)
    if "timeout" in result:
        return f"Time Limit Exceeded\n\nLast Executed Input\n{shown}"
    if "error" in result:
        return f"Runtime Error\n{result['error']}\n\nLast Executed Input\n{shown}"
    if kind == "code":
        return None
    if kind == "stdin":
        actual = result.get("stdout", "")
        if _flat(actual) == _expected_stdout(expected):
            return None
        actual = actual.strip()
    else:
        try:
            if _canonical(result.get("value")) == _canonical(json.loads(expected)):
                return None
        except (TypeError, ValueError) as err:
            return f"Runtime Error\n{type(err).__name__}: {err}\n\nLast Executed Input\n{shown}"
        actual = json.dumps(result.get("value"))
    return f"Wrong Answer\n\nInput\n{shown}\n\nOutput\n{actual}\n\nExpected\n{expected}"


@register("study_code")
def study_code(completion: str, row: dict) -> Verdict:
    program = study_program(completion)
    if program is None:
        return Verdict(0.0, STUDY_FORMAT_FEEDBACK, "no fenced code block")
    tests = study_tests(row)
    inputs, outputs = tests["inputs"], tests["outputs"]
    if not inputs:
        return Verdict(0.0, "No test execution information available.", "no tests")
    limit = float(tests.get("time_limit") or STUDY_DEFAULT_TIME_LIMIT) + 1.0
    budget = min(len(inputs) * limit + 2.0, MAX_RUN_SECONDS)
    nonce = secrets.token_hex(16)
    request = {"code": program, "testtype": tests["testtype"], "inputs": inputs,
               "fn_name": tests.get("fn_name", ""), "time_limit": tests.get("time_limit"),
               "nonce": nonce}  # fmt: skip
    limits = Limits(cpu_seconds=budget, wall_seconds=budget, memory_mb=STUDY_MEMORY_MB,
                    max_output_bytes=MAX_REPORT_BYTES)  # fmt: skip
    run = run_python(harness_source(), stdin=json.dumps(request), limits=limits)
    if run.status == "sandbox_error":
        return Verdict(0.0, "The code could not be run.", f"sandbox error: {run.stderr[-300:]}")
    lines = [ln for ln in run.stdout.splitlines() if ln.startswith(nonce)]
    if len(lines) > 1:
        return Verdict(0.0, "The program did not finish.", "more than one harness report")
    if not lines:  # the whole run died (time, memory, output): every test failed
        return Verdict(0.0, f"Runtime Error\n{run.status}", None)
    line = lines[0]
    try:
        results = json.loads(line[len(nonce) :])
    except ValueError as err:
        return Verdict(0.0, "The program did not finish.", f"garbled harness report: {err}")
    for test_input, expected, result in zip(inputs, outputs, results, strict=False):
        problem = _failure(tests["testtype"], result, test_input, expected)
        if problem is not None:
            return Verdict(0.0, problem[:2000], None)
    if len(results) != len(inputs):
        return Verdict(0.0, "The program did not finish.", "the harness reported too few tests")
    return Verdict(1.0, "", None)
