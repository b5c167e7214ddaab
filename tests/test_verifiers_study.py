"""The study's reward functions (`data.rewards: study`) on constructed cases.

Each case states the decision of the study's reward function (Moenupa/SDPO-CL,
verl/utils/reward_score/feedback/<file>.py), as read from its code, next to the strict
verifier's where they differ. The real-row checks are in test_study_conformance.py.
"""

from __future__ import annotations

import json

import pytest

from cptlab.verifiers import score
from cptlab.verifiers.study import STUDY_MATH_FORMAT_FEEDBACK, study_boxed, study_gpqa_letter


def both(study: str, strict: str, completion: str, row: dict) -> tuple[float, float]:
    return score(study, completion, row).reward, score(strict, completion, row).reward


MATH = [  # (completion, reference, study reward, strict reward)
    ("So \\boxed{\\frac{1}{2}}.", "\\frac{1}{2}", 1.0, 1.0),
    ("So \\boxed{0.5}", "\\frac{1}{2}", 1.0, 1.0),  # math-verify: equal numbers
    ("So \\boxed{\\dfrac{1}{2}}", "\\frac{1}{2}", 0.0, 1.0),  # bare LaTeX does not parse there
    ("So \\boxed{\\frac12}", "\\frac{1}{2}", 0.0, 1.0),
    ("\\boxed{34}" + " and then a long coda." * 5, "34", 0.0, 1.0),  # box not in the last 100
    ("\\boxed {34}", "34", 0.0, 1.0),  # a space before the brace
    ("\\boxed{34} or maybe \\boxed{35}", "34", 0.0, 0.0),  # the last box counts, in both
    ("\\boxed{034}", "34", 1.0, 1.0),
]


@pytest.mark.parametrize(("completion", "reference", "study", "strict"), MATH)
def test_study_math(completion: str, reference: str, study: float, strict: float) -> None:
    row = {"answer": reference, "metadata": {}}
    assert both("study_math", "math_boxed", completion, row) == (study, strict)


def test_study_math_box_and_feedback() -> None:
    assert study_boxed("x \\boxed{a{b}c} y") == "a{b}c"
    assert study_boxed("x \\boxed{a{b") == ""
    assert study_boxed("no box") is None
    verdict = score("study_math", "no box at all", {"answer": "1", "metadata": {}})
    assert (verdict.reward, verdict.feedback) == (0.0, STUDY_MATH_FORMAT_FEEDBACK)
    assert verdict.reason == "no \\boxed{} in the last 100 characters"
    assert score("study_math", "\\boxed{2}", {"answer": "1", "metadata": {}}).feedback == ""


FORMAT = (
    "Your answer had the wrong format. The solution must be given in the format: "
    "\\boxed{your_answer}."
)
TRUNCATED = "Your response was truncated because it exceeded the maximum length."
# (completion, truncated, the study's score, the study's feedback): what math.py's
# compute_score(completion, "34", {"split": "train", "truncated": truncated}) returned
# (Moenupa/SDPO-CL @ d277934, verl/utils/reward_score/feedback/math.py, loaded by path outside
# the project, math-verify 0.9.0). The format text only when not truncated; the truncation text
# for every truncated response, a correct one included.
MATH_FEEDBACK = [
    ("So the answer is 34.", False, 0.0, FORMAT),
    ("So the answer is 34.", True, 0.0, TRUNCATED),
    ("So \\boxed{34}", True, 1.0, TRUNCATED),
    ("So \\boxed{35}", True, 0.0, TRUNCATED),
    ("So \\boxed{34}", False, 1.0, ""),
    ("So \\boxed{35}", False, 0.0, ""),
    ("So \\boxed{", False, 0.0, FORMAT),
    ("So \\boxed{", True, 0.0, TRUNCATED),
    ("So \\boxed{}", True, 0.0, TRUNCATED),
]


@pytest.mark.parametrize(("completion", "truncated", "reward", "feedback"), MATH_FEEDBACK)
def test_study_math_feedback_is_the_studys(
    completion: str, truncated: bool, reward: float, feedback: str
) -> None:
    verdict = score("study_math", completion, {"answer": "34", "metadata": {}}, truncated=truncated)
    assert (verdict.reward, verdict.feedback) == (reward, feedback)


GPQA = [  # (completion, study reward, strict reward) for answer "B"
    ("The answer is \\boxed{B}", 1.0, 1.0),
    ("B", 1.0, 1.0),
    ("\\boxed{B}, not a single other option", 0.0, 1.0),  # upper-cased "a" is a standalone A
    ("b.", 1.0, 0.0),  # the study upper-cases the completion
    ("\\boxed{B} is my final answer (after ruling out D)", 0.0, 1.0),  # the last letter counts
]


@pytest.mark.parametrize(("completion", "study", "strict"), GPQA)
def test_study_gpqa(completion: str, study: float, strict: float) -> None:
    row = {"answer": "B", "metadata": {"options": ["w", "x", "y", "z"]}}
    assert both("study_gpqa", "mcq_boxed_letter", completion, row) == (study, strict)


def test_study_gpqa_letter() -> None:
    assert study_gpqa_letter("I pick C.") == "C"
    assert study_gpqa_letter("  none  ") == "NONE"[:0] or study_gpqa_letter("  none  ") == "none"


def react(calls: list[tuple[str, str]]) -> str:
    steps = [f"Thought: call it\nAction: {name}\nAction Input: {inputs}" for name, inputs in calls]
    return "\n".join(steps) + "\nThought: done\nFinal Answer: done"


TOOL_ROW = {
    "answer": json.dumps([
        {"name": "search", "arguments": {"q": "dogs"}},
        {"name": "details", "arguments": {"id": 3}},
    ]),
    "metadata": {},
}  # fmt: skip
TOOL = [  # (calls, study reward, strict reward)
    ([("search", '{"q": "dogs"}'), ("details", '{"id": 3}')], 1.0, 1.0),
    ([("details", '{"id": 3}'), ("search", '{"q": "dogs"}')], 1.0, 1.0),  # order is free
    ([("search", '{"q": "dogs", "id": 3}'), ("details", "{}")], 1.0, 1.0),  # inputs merged
    ([("search", '{"q": "cats"}'), ("details", '{"id": 3}')], 0.0, 0.0),
    ([("search", '{"q": "dogs"}')], 0.0, 0.0),  # a call missing
    ([("search", '{"q": "dogs"}'), ("details", '{"id": 3}'), ("search", "{}")], 0.0, 0.0),
    ([("search", '{"q": "dogs"}'), ("details", '{"id": 3, "x": {"y": 1}}')], 0.0, 0.0),
    ([("search", '{"q": "dogs"}'), ("details", '{"id": 3} trailing')], 1.0, 1.0),
    ([("search", '{"q": "dogs"}'), ("details", '{"id": 3')], 0.0, 0.0),  # input not JSON
]


@pytest.mark.parametrize(("calls", "study", "strict"), TOOL)
def test_study_react_tool(calls: list, study: float, strict: float) -> None:
    assert both("study_react_tool", "react_tool", react(calls), TOOL_ROW) == (study, strict)


def test_study_react_tool_nested_reference_input() -> None:
    """A nested JSON input never parses under the study's rule (its regex stops at the first
    closing brace), so a row whose reference input is nested can never score 1 there."""
    row = {"answer": json.dumps([{"name": "f", "arguments": {"a": {"b": 1}}}]), "metadata": {}}
    completion = react([("f", '{"a": {"b": 1}}')])
    assert both("study_react_tool", "react_tool", completion, row) == (0.0, 1.0)


def test_study_react_tool_feedback_is_the_studys() -> None:
    verdict = score("study_react_tool", react([("search", '{"q": "cats"}')]), TOOL_ROW)
    assert verdict.feedback == (
        "Actions mismatch: predicted ['search'], expected ['search', 'details']; "
        "Action inputs mismatch: predicted {'q': 'cats'}, expected {'q': 'dogs', 'id': 3}"
    )


# ----- code (code.py) ---------------------------------------------------------------------------


def code_row(tests: list, **study: object) -> dict:
    meta: dict = {"tests": tests}
    if study:
        meta["study_tests"] = study
    return {"answer": "", "metadata": meta}


def block(source: str) -> str:
    return f"Here it is.\n```python\n{source}\n```"


STDIN = [{"input": "1 2\n", "output": "1\n2\n"}]
CODE = [  # (completion, tests, study reward, strict reward); each decision as code.py makes it
    (block("print('1 ')\nprint(2)"), STDIN, 0.0, 1.0),  # a space before the newline counts
    (block("print('1 2')"), STDIN, 1.0, 0.0),  # newlines compare as spaces
    (block("pass"), [{"input": "", "output": "-"}], 1.0, 0.0),  # a trailing "-" is trimmed
    (block("print('-')"), [{"input": "", "output": "-"}], 0.0, 1.0),
    (block("print(1)\nprint(2)\nimport sys\nsys.exit(0)"), STDIN, 0.0, 1.0),  # SystemExit fails
    (block("try:\n    int(input())\nexcept ValueError:\n    print(0)"),
     [{"input": "abc\n", "output": "0\n"}], 0.0, 1.0),  # no exception classes in its builtins
    (block("import os\nprint(1)\nprint(2)"), STDIN, 0.0, 1.0),  # os is not on its allowlist
    ("print(1)\nprint(2)", STDIN, 0.0, 1.0),  # no fenced block
    (block("print('a much longer wrong program ...')") + block("print(1)\nprint(2)"), STDIN,
     0.0, 1.0),  # the longest block runs, not the last
    ("```python \nprint(1)\nprint(2)\n```", STDIN, 0.0, 1.0),  # a space after the label
    (block("def inc(x):\n    return x + 1"), ["for x in range(3):\n    assert inc(x) == x + 1"],
     1.0, 0.0),  # one assert script: loops work
    (block("def inc(x):\n    return x"), ["assert inc(1) == 2"], 0.0, 0.0),
]  # fmt: skip


@pytest.mark.parametrize(("completion", "tests", "study", "strict"), CODE)
def test_study_code(completion: str, tests: list, study: float, strict: float) -> None:
    row = code_row(tests)
    official = "python_unit_tests" if isinstance(tests[0], str) else "stdio_tests"
    assert both("study_code", official, completion, row) == (study, strict)


def test_study_code_functional_splits_arguments_on_whitespace() -> None:
    """code.py calls f(*[json.loads(x) for x in input.split()]): a list argument written
    with spaces (LiveCodeBench's form) never parses, so such a test always fails."""
    solution = block("def total(nums, k):\n    return sum(nums) + k")
    spaced = code_row([], testtype="functional", fn_name="total", inputs=["[2, 3]\n1"],
                      outputs=["6"], time_limit=6)  # fmt: skip
    compact = code_row([], testtype="functional", fn_name="total", inputs=["[2,3]\n1"],
                       outputs=["6"], time_limit=6)  # fmt: skip
    assert score("study_code", solution, spaced).reward == 0.0
    assert score("study_code", solution, compact).reward == 1.0
    as_float = code_row([], testtype="functional", fn_name="total", inputs=["[2,3]\n1"],
                        outputs=["6.0"], time_limit=6)  # fmt: skip
    assert score("study_code", solution, as_float).reward == 0.0  # canonical JSON: 6 != 6.0


def test_study_code_feedback_on_derived_tests() -> None:
    """stdin/stdout pairs become stdin tests, whose expected output the study keeps stripped.
    (Its feedback on its own test form: test_study_code_feedback.py.)"""
    verdict = score("study_code", "no code here", code_row(STDIN))
    assert verdict.feedback == "Incorrect Format: Put your code inside a ```python ... ``` block."
    assert verdict.test_pass_fraction == 0.0
    wrong = score("study_code", block("print(3)"), code_row(STDIN))
    assert wrong.feedback == (
        "Test Case 1: Wrong Answer\n\nInput\n1 2\n\nOutput\n3\n\nExpected\n1\n2"
    )
    assert wrong.test_pass_fraction == 0.0
