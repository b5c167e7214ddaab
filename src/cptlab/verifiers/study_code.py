"""The study's code reward (`data.rewards: study`; Moenupa/SDPO-CL,
verl/utils/reward_score/feedback/code.py, called with sparse rewards), written from its behaviour.

- The program is the longest fenced block (any label, the fence line ending right after it),
  think blocks included; without one the reward is 0.
- Each test runs in a fresh namespace with the study's restricted builtins (no exception
  classes, no `open`), its import allowlist, typing names and debug buffer (stderr and
  `debug_print` go there), within the test's time limit plus one second (`study_harness.py`,
  in the sandbox).
- stdin tests compare the whole output, stripped, with newlines as spaces; functional tests
  call the function with the input split on whitespace, each piece JSON, and compare canonical
  JSON; assert scripts pass when nothing raises. The reward is 1 only if every test passes;
  the verdict's `test_pass_fraction` is the share of tests passed (the study's `acc`).
- The feedback is the study's `format_test_feedback`: the first runtime error, else the first
  time-out, else the two wrong answers with the shortest input and output, in LeetCode's
  layout with its caps; without a code block, the format text, or the "Truncated Attempt" text
  when the response was truncated.

The tests are `metadata["study_tests"]` ({"testtype", "inputs", "outputs", "fn_name",
"time_limit"}, as the study stores them), else derived from `metadata["tests"]`: stdin/stdout
pairs as stdin tests (time limit 1 s, the study's default), assert lists as one script (5 s,
as the study runs HumanEval+ and MBPP+).

The study starts one process per test, all at once, each with a 1 GiB address-space limit, and
waits for all of them until a common deadline; here the tests run one after another in one
sandboxed process (1 GiB for the run), each with its own time limit plus one second, so a
test's time budget does not shrink while earlier tests run (docs/rewards.md).

As in the study, the program and its tests share one process, so a program that inspects the
harness could forge a pass of an assert script; the strict verifiers keep their split tests
(docs/reliability.md). The expected outputs of stdin and functional tests never enter it.
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from cptlab.sandbox import Limits, run_python
from cptlab.verifiers.base import Verdict, register, unscorable

_BLOCK = re.compile(r"```(\w*)\n(.*?)```", re.DOTALL)
HARNESS = Path(__file__).with_name("study_harness.py")
STUDY_DEFAULT_TIME_LIMIT = 1.0
STUDY_ASSERT_TIME_LIMIT = 5.0
STUDY_MEMORY_MB = 1024
MAX_RUN_SECONDS = 300.0
MAX_REPORT_BYTES = 16 << 20

# The `actual` values by which the study's records mark how a test ended
# (verl/utils/reward_score/feedback/code.py @ d277934, its module constants and run_tests).
INCORRECT_FORMAT = "Incorrect format"
TIMEOUT = "Time out"
ERROR_PREFIX = "Error: "
DEAD_PROCESS = "Process Error: EOFError: "  # a test process that died without a record
PASSED_SCRIPT = "All tests pass"

# The feedback texts and layout of format_test_feedback
# (verl/utils/reward_score/feedback/code.py @ d277934).
STUDY_FORMAT_FEEDBACK = "Incorrect Format: Put your code inside a ```python ... ``` block."
STUDY_TRUNCATED_FEEDBACK = (
    "Truncated Attempt: Your previous response was too long and truncated because it reached "
    "the maximum response length. Try again with a shorter response."
)
STUDY_NO_TESTS_FEEDBACK = "No test execution information available."
RUNTIME_ERROR = "Runtime Error"
TIME_LIMIT_EXCEEDED = "Time Limit Exceeded"
LAST_INPUT, INPUT, OUTPUT, EXPECTED = "Last Executed Input", "Input", "Output", "Expected"
DEBUG_OUTPUT = "Debug Output"
# Its caps: cases shown, characters per field, input and debug lines, the whole text.
SHOWN_WRONG_ANSWERS = 2
FIELD_CHARS = 250
INPUT_LINES = 8
DEBUG_LINES, DEBUG_LINE_CHARS = 10, 300
FEEDBACK_CHARS = 2000


def wrong_answer_title(number: int) -> str:
    # verl/utils/reward_score/feedback/code.py @ d277934 (format_test_feedback)
    return f"Test Case {number}: Wrong Answer"


def more_lines(count: int) -> str:
    # verl/utils/reward_score/feedback/code.py @ d277934 (format_test_feedback)
    return f"... ({count} more lines)"


@dataclass(frozen=True)
class TestRecord:
    """One test as the study's feedback sees it (its run_tests record).

    input:          the test's input (text, or a dict of keyword arguments); None for the one
                    record of a completion without a program.
    expected:       as the study keeps it: a stdin test's expected output stripped, a trailing
                    "-" trimmed; a functional test's as given.
    actual:         the text of the study's `actual`: the stripped output of a stdin test, the
                    str() of a functional result (first 251 characters: enough to cap at 250),
                    or a marker (ERROR_PREFIX + the error, TIMEOUT, ...).
    actual_length:  the length of the whole str() of `actual` (the wrong answers' sort key).
    actual_is_text: the study's `actual` is a string; only a string reads as a marker (so a
                    function that returns "Error: ..." shows as a runtime error there too).
    debug_head:     the first DEBUG_LINES lines of the test's debug text (stderr, debug_print),
                    stripped; debug_lines: how many lines it has.
    """

    index: int
    input: object
    expected: str | None
    actual: str
    actual_length: int
    actual_is_text: bool
    passed: bool
    debug_head: tuple[str, ...] = ()
    debug_lines: int = 0

    def marks(self, marker: str) -> bool:
        return self.actual_is_text and self.actual == marker

    @property
    def is_error(self) -> bool:
        return self.actual_is_text and self.actual.startswith(ERROR_PREFIX)


# ----- the feedback (format_test_feedback) ------------------------------------------------------


def _cap(value: object, chars: int = FIELD_CHARS) -> str:
    text = value if isinstance(value, str) else str(value)
    return text[:chars] + "..." if len(text) > chars else text


def _input_lines(title: str, value: object) -> list[str]:
    """The title, then a dict's `name = value` lines, or the first INPUT_LINES lines."""
    if value is None:
        return [title]
    if isinstance(value, dict):
        return [title, *(f"{name} = {_cap(v)}" for name, v in value.items())]
    lines = str(value).splitlines()
    extra = [more_lines(len(lines) - INPUT_LINES)] if len(lines) > INPUT_LINES else []
    return [title, *(_cap(line) for line in lines[:INPUT_LINES]), *extra]


def _debug_lines(record: TestRecord) -> list[str]:
    if not record.debug_lines:
        return []
    extra = record.debug_lines - DEBUG_LINES
    shown = [_cap(line, DEBUG_LINE_CHARS) for line in record.debug_head[:DEBUG_LINES]]
    return ["", DEBUG_OUTPUT, *shown, *([more_lines(extra)] if extra > 0 else [])]


def _case_lines(record: TestRecord, truncated: bool) -> list[str]:
    if record.is_error:
        return [RUNTIME_ERROR, record.actual[len(ERROR_PREFIX) :], "",
                *_input_lines(LAST_INPUT, record.input), *_debug_lines(record)]  # fmt: skip
    if record.marks(TIMEOUT):
        return [TIME_LIMIT_EXCEEDED, "", *_input_lines(LAST_INPUT, record.input),
                *_debug_lines(record)]  # fmt: skip
    if record.marks(INCORRECT_FORMAT):
        return [STUDY_TRUNCATED_FEEDBACK if truncated else STUDY_FORMAT_FEEDBACK]
    expected = [] if record.expected is None else ["", EXPECTED, _cap(record.expected)]
    return [wrong_answer_title(record.index + 1), "", *_input_lines(INPUT, record.input), "",
            OUTPUT, _cap(record.actual), *expected, *_debug_lines(record)]  # fmt: skip


def _shown(records: list[TestRecord]) -> list[TestRecord]:
    """The first runtime error, else the first time-out, else the first format failure, each
    looked for among all records in test order; else the shortest wrong answers."""
    for wanted in (
        lambda r: r.is_error,
        lambda r: r.marks(TIMEOUT),
        lambda r: r.marks(INCORRECT_FORMAT),
    ):
        for record in records:
            if wanted(record):
                return [record]
    failing = [r for r in records if not r.passed]
    by_length = sorted(failing, key=lambda r: len(str(r.input)) + r.actual_length)
    return by_length[:SHOWN_WRONG_ANSWERS]


def study_code_feedback(records: list[TestRecord], truncated: bool = False) -> str:
    """The study's feedback on a completion's test records."""
    if not records:
        return STUDY_NO_TESTS_FEEDBACK
    lines: list[str] = []
    for record in _shown(records):
        lines += [*_case_lines(record, truncated), ""]
    return "\n".join(lines).rstrip()[:FEEDBACK_CHARS]


# ----- running the tests ------------------------------------------------------------------------


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


class HarnessError(Exception):
    """The sandbox or the harness failed: not the program's outcome."""


def _reported(stdout: str, nonce: str, start: int) -> list[dict]:
    """The harness's per-test results from `start` on, in order."""
    results = []
    for line in stdout.splitlines():
        if not line.startswith(nonce):
            continue
        try:
            result = json.loads(line[len(nonce) :])
        except ValueError as err:
            raise HarnessError(f"garbled harness report: {err}") from None
        if not isinstance(result, dict) or result.get("i") != start + len(results):
            raise HarnessError("harness reports out of order")
        results.append(result)
    return results


def run_study_tests(program: str, tests: dict) -> list[dict]:
    """One harness result per test. A run that ends before its last test (a hang the alarm
    could not interrupt, a dead process) is resumed after the test it stopped at, which is
    recorded as the study would see it: timed out, or a process that died."""
    inputs = tests["inputs"]
    limit = float(tests.get("time_limit") or STUDY_DEFAULT_TIME_LIMIT) + 1.0
    results: list[dict] = []
    spent = 0.0
    while len(results) < len(inputs):
        start = len(results)
        budget = min((len(inputs) - start) * limit + 2.0, MAX_RUN_SECONDS - spent)
        if budget <= 0:  # the whole completion's time is spent: the rest never answer
            return results + [{"timeout": True}] * (len(inputs) - start)
        nonce = secrets.token_hex(16)
        request = {"code": program, "testtype": tests["testtype"], "inputs": inputs,
                   "fn_name": tests.get("fn_name", ""), "time_limit": tests.get("time_limit"),
                   "nonce": nonce, "start": start}  # fmt: skip
        limits = Limits(cpu_seconds=budget, wall_seconds=budget, memory_mb=STUDY_MEMORY_MB,
                        max_output_bytes=MAX_REPORT_BYTES)  # fmt: skip
        run = run_python(harness_source(), stdin=json.dumps(request), limits=limits)
        if run.status == "sandbox_error":
            raise HarnessError(f"sandbox error: {run.stderr[-300:]}")
        spent += run.wall_seconds
        reported = _reported(run.stdout, nonce, start)
        results += reported
        stopped_itself = bool(reported) and reported[-1].get("ended")
        if len(results) < len(inputs) and not stopped_itself:
            results.append({"timeout": True} if run.status == "timeout" else {"died": run.status})
    return results


def _expected_stdout(output: str) -> str:
    """code.py keeps an expected output stripped, and trimmed back to before its last "-"
    when it ends in one."""
    output = output.strip()
    return output[: output.rfind("-")].rstrip() if output.endswith("-") else output


def _flat(text: str) -> str:
    return text.strip().replace("\n", " ").replace("\r", "")


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _outcome(kind: str, result: dict, expected: str) -> tuple[bool, str, int, bool]:
    """(passed, actual text, its full length, actual is a string) as the study records them."""
    if "timeout" in result:
        return False, TIMEOUT, len(TIMEOUT), True
    if "died" in result:
        return False, DEAD_PROCESS, len(DEAD_PROCESS), True
    if "error" in result:
        actual = ERROR_PREFIX + result["error"]
        return False, actual, len(actual), True
    if kind == "code":
        return True, PASSED_SCRIPT, len(PASSED_SCRIPT), True
    if kind == "stdin":
        actual = result["stdout"].strip()
        return _flat(actual) == _flat(expected), actual, len(actual), True
    try:
        reference = json.loads(expected)
    except ValueError as err:  # the study parses it in the test: a runtime error there
        actual = f"{ERROR_PREFIX}{err}"
        return False, actual, len(actual), True
    passed = _canonical(result["value"]) == _canonical(reference)
    return passed, result["text"], result["length"], result["is_text"]


def study_records(tests: dict, results: list[dict]) -> list[TestRecord]:
    """The study's records of a program's tests from the harness's results."""
    kind = tests["testtype"]
    records = []
    for index, (test_input, output, result) in enumerate(
        zip(tests["inputs"], tests["outputs"], results, strict=True)
    ):
        # The study keeps the stdin form it compares with, except in the records its parent
        # process writes for a test that never answered.
        unanswered = "timeout" in result or "died" in result
        expected = _expected_stdout(output) if kind == "stdin" and not unanswered else output
        passed, actual, length, is_text = _outcome(kind, result, expected)
        debug = result.get("debug") or {"head": [], "lines": 0}
        records.append(
            TestRecord(
                index,
                test_input,
                expected,
                actual,
                length,
                is_text,
                passed,
                tuple(debug["head"]),
                int(debug["lines"]),
            )  # fmt: skip
        )
    return records


@register("study_code", sees_truncation=True)
def study_code(completion: str, row: dict, truncated: bool = False) -> Verdict:
    """All tests pass: reward 1. The feedback and the pass fraction as the study gives them."""
    program = study_program(completion)
    if program is None:
        record = TestRecord(0, None, None, INCORRECT_FORMAT, len(INCORRECT_FORMAT), True, False)
        return Verdict(0.0, study_code_feedback([record], truncated), "no fenced code block", 0.0)
    tests = study_tests(row)
    if not tests["inputs"]:
        return Verdict(0.0, STUDY_NO_TESTS_FEEDBACK, "no tests")
    if len(tests["outputs"]) != len(tests["inputs"]):
        return Verdict(0.0, STUDY_NO_TESTS_FEEDBACK, "as many test outputs as inputs needed")
    try:
        records = study_records(tests, run_study_tests(program, tests))
    except HarnessError as err:
        return unscorable(str(err), "The code could not be run.")
    passed = sum(r.passed for r in records)
    return Verdict(
        1.0 if passed == len(records) else 0.0,
        study_code_feedback(records, truncated),
        None,
        passed / len(records),
    )
