"""The study's code feedback and pass fraction, against its own function.

Each case's inputs (a completion, the tests in the study's form, whether the response was
truncated) were given to the study's `compute_score` (Moenupa/SDPO-CL @ d277934,
verl/utils/reward_score/feedback/code.py, loaded by path outside the project, called as its
feedback/__init__.py calls it: `compute_score(completion, json.dumps(tests), {"split": "train",
"truncated": truncated}, sparse_rewards=True)`, Python 3.11, one process per test as it runs
them). STUDY holds what it returned: `score`, `acc` and `feedback`, recorded here as
literals. `study_code` must give the same reward, `test_pass_fraction` and feedback.
"""

from __future__ import annotations

import pytest

from cptlab.verifiers import score


def block(src: str) -> str:
    return f"Here it is.\n```python\n{src}\n```"


def stdin(inputs: list, outputs: list, limit: float = 1) -> dict:
    return {"testtype": "stdin", "fn_name": "", "time_limit": limit, "inputs": inputs,
            "outputs": outputs}  # fmt: skip


def functional(fn: str, inputs: list, outputs: list, limit: float = 1) -> dict:
    return {"testtype": "functional", "fn_name": fn, "time_limit": limit, "inputs": inputs,
            "outputs": outputs}  # fmt: skip


def script(tests: list[str], limit: float = 5) -> dict:
    return {"testtype": "code", "fn_name": "", "time_limit": limit,
            "inputs": ["\n".join(tests)], "outputs": [""]}  # fmt: skip


ADD = "a, b = map(int, input().split())\nprint(a + b)"
# name: (completion, tests, truncated)
CASES = {
    "runtime_error_after_wrong_answer": (
        block(
            "def solve(a, b):\n    return a // b\n\n"
            "a, b = map(int, input().split())\nprint(solve(a, b) + 1)"
        ),
        stdin(["4 2\n", "1 0\n", "9 3\n"], ["2\n", "0\n", "3\n"]),
        False,
    ),
    "two_shortest_wrong_answers_sorted": (
        block("print('no')"),
        stdin(["1 2 3 4 5 6 7 8 9 10\n", "1\n", "1 2 3\n", "5\n"], ["55\n", "1\n", "6\n", "no\n"]),
        False,
    ),
    "input_over_8_lines": (
        block("import sys\nprint(len(sys.stdin.read().split()))"),
        stdin(["\n".join(str(i) for i in range(12)) + "\n"], ["13\n"]),
        False,
    ),
    "output_over_250_chars": (block("print('x' * 300)"), stdin(["\n"], ["y" * 260 + "\n"]), False),
    "timeout": (block("while True:\n    pass"), stdin(["1\n", "2\n"], ["1\n", "2\n"]), False),
    "stderr_debug_output": (
        block(
            "import sys\nfor i in range(12):\n"
            "    print('step', i, 'z' * (310 if i == 1 else 3), file=sys.stderr)\nprint(1)"
        ),
        stdin(["3\n"], ["2\n"]),
        False,
    ),
    "debug_print_and_runtime_error": (
        block("debug_print('reading', 42)\nx = int(input())\nprint(10 // x)"),
        stdin(["0\n"], ["1\n"]),
        False,
    ),
    "no_block_truncated": ("def f(): return 1", stdin(["1\n"], ["1\n"]), True),
    "no_block_not_truncated": ("def f(): return 1", stdin(["1\n"], ["1\n"]), False),
    "truncated_with_block_wrong": (block("print(0)"), stdin(["1 2\n"], ["3\n"]), True),
    "truncated_with_block_right": (block(ADD), stdin(["1 2\n"], ["3\n"]), True),
    "all_pass": (block(ADD), stdin(["1 2\n", "3 4\n"], ["3\n", "7\n"]), False),
    "half_pass": (block(ADD), stdin(["1 2\n", "3 4\n"], ["3\n", "8\n"]), False),
    "functional_true": (
        block("def same(a, b):\n    return a == a"),
        functional("same", ["1\n2"], ["false"]),
        False,
    ),
    "functional_none": (
        block("def total(nums):\n    nums.sort()"),
        functional("total", ["[3,1,2]"], ["6"]),
        False,
    ),
    "functional_list_and_tuple": (
        block("def pair(n):\n    return (n, [n, None, True])"),
        functional("pair", ["1", "22"], ["[1,[1,null,false]]", "[22,[22,null,false]]"]),
        False,
    ),
    "functional_non_serialisable": (
        block("def uniq(nums):\n    return set(nums)"),
        functional("uniq", ["[1,1,2]"], ["[1,2]"]),
        False,
    ),
    "functional_string_result": (
        block("def name(n):\n    return 'Error: ' + str(n)"),
        functional("name", ["7"], ['"seven"']),
        False,
    ),
    "functional_dict_input": (
        block("def area(w, h):\n    return w * h + 1"),
        functional("area", [{"w": 2, "h": "x" * 300}, {"w": 2, "h": 3}], ["6", "6"]),
        False,
    ),
    "functional_bad_expected": (
        block("def one():\n    return 1"),
        functional("one", [""], ["not json"]),
        False,
    ),
    "deep_recursion_frames": (
        block(
            "def down(n):\n    if n == 0:\n        return 1 // n\n    return down(n - 1)\n\n"
            "def start(n):\n    return down(n)"
        ),
        functional("start", ["5"], ["1"]),
        False,
    ),
    "assert_script_fails": (
        block("def inc(x):\n    return x + 2"),
        script([f"assert inc({i}) == {i + 1}" for i in range(10)]),
        False,
    ),
    "assert_script_error_in_solution": (
        block("def inc(x):\n    return x + undefined_name"),
        script(["assert inc(1) == 2"]),
        False,
    ),
    "import_not_allowed": (block("import os\nprint(1)"), stdin(["\n"], ["1\n"]), False),
    "sys_exit": (block("print(3)\nimport sys\nsys.exit(0)"), stdin(["\n"], ["3\n"]), False),
    "expected_trailing_dash": (block("print(5)"), stdin(["\n"], ["4 -\n"]), False),
    "printed_error_marker": (block("print('Error: not really')"), stdin(["\n"], ["ok\n"]), False),
    "feedback_over_2000_chars": (
        block("print('w' * 240)"),
        stdin(
            ["\n".join("q" * 240 for _ in range(8)), "\n".join("r" * 240 for _ in range(8)) + "\n"],
            ["a" * 240, "b" * 240],
        ),
        False,
    ),
    "name_error_exception_class": (
        block("try:\n    int(input())\nexcept ValueError:\n    print(0)"),
        stdin(["abc\n"], ["0\n"]),
        False,
    ),
}

# Programs that end their test process, or hang where no alarm reaches or keep catching it.
SLOW = "import sys\nx = int(input())\nif x == 1:\n    y = 7 ** (10 ** 9)\nprint(x)"
SWALLOW = (
    "x = int(input())\nwhile x == 1:\n    try:\n        while True:\n            pass\n"
    "    except:\n        pass\nprint(x)"
)
EXIT = "import random\nx = int(input())\nif x == 1:\n    random._os._exit(0)\nprint(x)"
CASES |= {
    "c_level_hang": (
        block(SLOW),
        stdin(["0\n", "1\n", "2\n", "3\n"], ["0\n", "1\n", "2\n", "4\n"]),
        False,
    ),
    "swallowed_alarm": (
        block(SWALLOW),
        stdin(["0\n", "1\n", "2\n", "3\n"], ["0\n", "1\n", "2\n", "4\n"]),
        False,
    ),
    "process_exit": (
        block(EXIT),
        stdin(["0\n", "1\n", "2\n", "3\n"], ["0\n", "1\n", "2\n", "4\n"]),
        False,
    ),
}
SLEEPER = (
    "import time\nx = int(input())\nwhile x == 1:\n    try:\n        time.sleep(100)\n"
    "    except:\n        pass\nprint(x)"
)
CASES["swallowed_alarm_sleeping"] = (
    block(SLEEPER),
    stdin(["0\n", "1\n", "2\n", "3\n"], ["0\n", "1\n", "2\n", "4\n"]),
    False,
)

# name: (score, acc, feedback), as the study's compute_score returned them.
STUDY = {
    "runtime_error_after_wrong_answer": (
        0.0,
        0.0,
        (
            "Runtime Error\nZeroDivisionError: integer division or modulo by zero\n"
            "Line 6 in <module> (Solution.py)\nLine 3 in solve (Solution.py)\n\n"
            "Last Executed Input\n1 0"
        ),
    ),
    "two_shortest_wrong_answers_sorted": (
        0.0,
        0.25,
        (
            "Test Case 2: Wrong Answer\n\nInput\n1\n\nOutput\nno\n\nExpected\n1\n\n"
            "Test Case 3: Wrong Answer\n\nInput\n1 2 3\n\nOutput\nno\n\nExpected\n6"
        ),
    ),
    "input_over_8_lines": (
        0.0,
        0.0,
        (
            "Test Case 1: Wrong Answer\n\nInput\n0\n1\n2\n3\n4\n5\n6\n7\n... (4 more lines)\n\n"
            "Output\n12\n\nExpected\n13"
        ),
    ),
    "output_over_250_chars": (
        0.0,
        0.0,
        (
            "Test Case 1: Wrong Answer\n\nInput\n\n\nOutput\n"
            + "x" * 250
            + "...\n\nExpected\n"
            + "y" * 250
            + "..."
        ),
    ),
    "timeout": (0.0, 0.0, ("Time Limit Exceeded\n\nLast Executed Input\n1")),
    "stderr_debug_output": (
        0.0,
        0.0,
        (
            "Test Case 1: Wrong Answer\n\nInput\n3\n\nOutput\n1\n\nExpected\n2\n\n"
            "Debug Output\nstep 0 zzz\nstep 1 "
            + "z"
            * 293
            + "...\nstep 2 zzz\nstep 3 zzz\nstep 4 zzz\nstep 5 zzz\nstep 6 zzz\nstep 7 zzz\n"
            "step 8 zzz\nstep 9 zzz\n... (2 more lines)"
        ),
    ),
    "debug_print_and_runtime_error": (
        0.0,
        0.0,
        (
            "Runtime Error\nZeroDivisionError: integer division or modulo by zero\n"
            "Line 4 in <module> (Solution.py)\n\nLast Executed Input\n0\n\nDebug Output\n"
            "reading 42"
        ),
    ),
    "no_block_truncated": (
        0.0,
        0.0,
        (
            "Truncated Attempt: Your previous response was too long and truncated because it "
            "reached the maximum response length. Try again with a shorter response."
        ),
    ),
    "no_block_not_truncated": (
        0.0,
        0.0,
        ("Incorrect Format: Put your code inside a ```python ... ``` block."),
    ),
    "truncated_with_block_wrong": (
        0.0,
        0.0,
        ("Test Case 1: Wrong Answer\n\nInput\n1 2\n\nOutput\n0\n\nExpected\n3"),
    ),
    "truncated_with_block_right": (1.0, 1.0, ("")),
    "all_pass": (1.0, 1.0, ("")),
    "half_pass": (
        0.0,
        0.5,
        ("Test Case 2: Wrong Answer\n\nInput\n3 4\n\nOutput\n7\n\nExpected\n8"),
    ),
    "functional_true": (
        0.0,
        0.0,
        ("Test Case 1: Wrong Answer\n\nInput\n1\n2\n\nOutput\nTrue\n\nExpected\nfalse"),
    ),
    "functional_none": (
        0.0,
        0.0,
        ("Test Case 1: Wrong Answer\n\nInput\n[3,1,2]\n\nOutput\nNone\n\nExpected\n6"),
    ),
    "functional_list_and_tuple": (
        0.0,
        0.0,
        (
            "Test Case 1: Wrong Answer\n\nInput\n1\n\nOutput\n(1, [1, None, True])\n\n"
            "Expected\n[1,[1,null,false]]\n\nTest Case 2: Wrong Answer\n\nInput\n22\n\nOutput\n"
            "(22, [22, None, True])\n\nExpected\n[22,[22,null,false]]"
        ),
    ),
    "functional_non_serialisable": (
        0.0,
        0.0,
        ("Runtime Error\nNon-serializable result type: set\n\nLast Executed Input\n[1,1,2]"),
    ),
    "functional_string_result": (0.0, 0.0, ("Runtime Error\n7\n\nLast Executed Input\n7")),
    "functional_dict_input": (
        0.0,
        0.0,
        (
            'Runtime Error\nTypeError: can only concatenate str (not "int") to str\n'
            "Line 2 in area (Solution.py)\n\nLast Executed Input\nw = 2\nh = " + "x" * 250 + "..."
        ),
    ),
    "functional_bad_expected": (
        0.0,
        0.0,
        ("Runtime Error\nExpecting value: line 1 column 1 (char 0)\n\nLast Executed Input"),
    ),
    "deep_recursion_frames": (
        0.0,
        0.0,
        (
            "Runtime Error\nZeroDivisionError: integer division or modulo by zero\n"
            "Line 4 in down (Solution.py)\nLine 4 in down (Solution.py)\n"
            "Line 3 in down (Solution.py)\n\nLast Executed Input\n5"
        ),
    ),
    "assert_script_fails": (
        0.0,
        0.0,
        (
            "Runtime Error\nAssertionError: \n\nLast Executed Input\nassert inc(0) == 1\n"
            "assert inc(1) == 2\nassert inc(2) == 3\nassert inc(3) == 4\nassert inc(4) == 5\n"
            "assert inc(5) == 6\nassert inc(6) == 7\nassert inc(7) == 8\n... (2 more lines)"
        ),
    ),
    "assert_script_error_in_solution": (
        0.0,
        0.0,
        (
            "Runtime Error\nNameError: name 'undefined_name' is not defined\n"
            "Line 2 in inc (Solution.py)\n\nLast Executed Input\nassert inc(1) == 2"
        ),
    ),
    "import_not_allowed": (
        0.0,
        0.0,
        (
            "Runtime Error\nImportError: Import of module 'os' is not allowed\n"
            "Line 2 in <module> (Solution.py)\n\nLast Executed Input"
        ),
    ),
    "sys_exit": (
        0.0,
        0.0,
        ("Runtime Error\nSystemExit: 0\nLine 4 in <module> (Solution.py)\n\nLast Executed Input"),
    ),
    "expected_trailing_dash": (
        0.0,
        0.0,
        ("Test Case 1: Wrong Answer\n\nInput\n\n\nOutput\n5\n\nExpected\n4"),
    ),
    "printed_error_marker": (0.0, 0.0, ("Runtime Error\nnot really\n\nLast Executed Input")),
    "feedback_over_2000_chars": (
        0.0,
        0.0,
        ("Test Case 1: Wrong Answer\n\nInput\n" + ("q" * 240 + "\n") * 8 + "\nOutput\n" + "w" * 31),
    ),
    "name_error_exception_class": (
        0.0,
        0.0,
        (
            "Runtime Error\nNameError: name 'ValueError' is not defined\n"
            "Line 4 in <module> (Solution.py)\n\nLast Executed Input\nabc"
        ),
    ),
    "c_level_hang": (0.0, 0.5, ("Time Limit Exceeded\n\nLast Executed Input\n1")),
    "swallowed_alarm": (0.0, 0.5, ("Time Limit Exceeded\n\nLast Executed Input\n1")),
    "process_exit": (
        0.0,
        0.5,
        (
            "Test Case 4: Wrong Answer\n\nInput\n3\n\nOutput\n3\n\nExpected\n4\n\n"
            "Test Case 2: Wrong Answer\n\nInput\n1\n\nOutput\nProcess Error: EOFError: \n\n"
            "Expected\n1"
        ),
    ),
    "swallowed_alarm_sleeping": (0.0, 0.5, ("Time Limit Exceeded\n\nLast Executed Input\n1")),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_study_code_matches_the_studys_compute_score(name: str) -> None:
    completion, tests, truncated = CASES[name]
    reward, fraction, feedback = STUDY[name]
    row = {"answer": "", "metadata": {"tests": [], "study_tests": tests}}
    verdict = score("study_code", completion, row, truncated=truncated)
    assert verdict.feedback == feedback
    assert (verdict.reward, verdict.test_pass_fraction) == (reward, fraction)


def test_every_case_has_the_studys_output() -> None:
    assert sorted(CASES) == sorted(STUDY)
