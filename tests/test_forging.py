"""Reward forging: programs that solve nothing and try to earn reward 1 from the unit-test
verifier anyway. Each must earn 0; the honest solution of the same rows earns 1 (the control
that makes the zeros mean something).

The attacker knows the harness (cptlab.verifiers.code) and the probe protocol
(cptlab.verifiers.asserts): it may read everything in the sandbox (the harness, its own
environment, /proc), write to every descriptor it has, patch builtins and the harness's frames,
leave early, and print reports in the harness's format.
"""

from __future__ import annotations

import pytest

from cptlab.verifiers import score

MBPP_TESTS = ["assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(20, 22) == 42"]
HUMANEVAL_TESTS = [
    "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(20, 22) == 42\n"
    "\ncheck(add)"
]
HONEST = "def add(a, b):\n    return a + b\n"


def row(tests: list[str]) -> dict:
    return {
        "id": "forge",
        "domain": "code",
        "benchmark": "test",
        "prompt": [{"role": "user", "content": "Write add(a, b)."}],
        "answer": HONEST,
        "metadata": {"tests": tests},
    }


# Each program solves nothing (its own add is wrong or missing) and attacks the verdict.
FORGERIES = {
    "reads the harness for expected values": (
        "import re\n"
        "_expected = [int(x) for x in re.findall(r'==\\s*(-?\\d+)', open('main.py').read())]\n"
        "_calls = iter(_expected)\n"
        "def add(a, b):\n    return next(_calls, 0)\n"
    ),
    "reads its initial environment for the nonce and prints a passing report": (
        "import os\n"
        "env = open('/proc/self/environ', 'rb').read().split(b'\\0')\n"
        "nonce = [e for e in env if e.startswith(b'CPTLAB_NONCE=')][0].split(b'=')[1]\n"
        "os.write(1, nonce + repr((None, [None, None, None])).encode() + b'\\n')\n"
        "os.write(1, nonce + repr([None, [['v', ['b', '1']]] * 3]).encode() + b'\\n')\n"
        "os._exit(0)\n"
    ),
    "prints a report for every probe it finds, with the values it wants": (
        "import os, re\n"
        "env = open('/proc/self/environ', 'rb').read().split(b'\\0')\n"
        "nonce = [e for e in env if e.startswith(b'CPTLAB_NONCE=')][0].split(b'=')[1]\n"
        "probes = re.findall(r\"'(add\\([^']*\\))'\", open('main.py').read())\n"
        "fake = [['v', ['i', '3']] for _ in probes]\n"
        "os.write(1, nonce + repr([None, fake]).encode() + b'\\n')\n"
        "os._exit(0)\n"
    ),
    "returns an object that equals everything": (
        "class Anything:\n"
        "    def __eq__(self, other):\n        return True\n"
        "    __hash__ = object.__hash__\n"
        "def add(a, b):\n    return Anything()\n"
    ),
    "returns an int subclass that equals everything": (
        "class Int(int):\n"
        "    def __eq__(self, other):\n        return True\n"
        "    __hash__ = int.__hash__\n"
        "def add(a, b):\n    return Int(0)\n"
    ),
    "writes a report to every inherited descriptor": (
        "import os\n"
        "for fd in range(0, 64):\n"
        "    try:\n        os.write(fd, b'All tests passed\\n')\n"
        "    except OSError:\n        pass\n"
        "def add(a, b):\n    return 0\n"
    ),
    "patches the builtins the harness uses": (
        "import builtins\n"
        "builtins.repr = lambda o: '[None, []]'\n"
        "builtins.eval = lambda *a, **k: 3\n"
        "builtins.exec = lambda *a, **k: None\n"
        "def add(a, b):\n    return 0\n"
    ),
    "rewrites the harness's results from its frame": (
        "import sys\n"
        "frame = sys._getframe(1)\n"
        "while frame and 'results' not in frame.f_locals:\n    frame = frame.f_back\n"
        "frame.f_locals['results'].extend([['v', ['i', '3']]] * 3)\n"
        "def add(a, b):\n    return 0\n"
    ),
    "leaves before the tests run": "import sys\nsys.exit(0)\n" + HONEST,
    "leaves from inside a probe": "def add(a, b):\n    import os\n    os._exit(0)\n",
    "kills itself after printing": (
        "import os, sys\nprint('ok')\nsys.stdout.flush()\nos.kill(os.getpid(), 9)\n"
    ),
    "returns a generator that claims to be a list": (
        "def add(a, b):\n    yield a + b\n"
    ),  # `add(1, 2) == 3` is false for a generator in Python as well
}


@pytest.mark.parametrize("tests", [MBPP_TESTS, HUMANEVAL_TESTS], ids=["mbpp", "humaneval"])
def test_the_honest_solution_earns_one(tests):
    assert score("python_unit_tests", HONEST, row(tests)).reward == 1.0


@pytest.mark.parametrize("tests", [MBPP_TESTS, HUMANEVAL_TESTS], ids=["mbpp", "humaneval"])
@pytest.mark.parametrize("attack", list(FORGERIES))
def test_no_forgery_earns_a_reward(attack, tests):
    verdict = score("python_unit_tests", FORGERIES[attack], row(tests))
    assert verdict.reward == 0.0, (attack, verdict)
    assert "raised" not in (verdict.reason or ""), verdict  # scored, not a verifier crash


def test_the_sandbox_never_holds_an_expected_value():
    """What the program can read: the harness holds the solution and the probes only."""
    from cptlab.verifiers.code import harness, split_tests

    for tests in (MBPP_TESTS, HUMANEVAL_TESTS):
        probes, _ = split_tests(tests)
        program = harness("def add(a, b):\n    return 0\n", probes)
        assert probes and all(p.startswith("add(") for p in probes)
        for expected in ("== 3", "== 0", "== 42", "check("):
            assert expected not in program


def test_a_helper_the_test_defines_runs_with_the_checks():
    tests = ["def double(x):\n    return 2 * x\nassert double(add(1, 2)) == 6"]
    assert score("python_unit_tests", HONEST, row(tests)).reward == 1.0
    assert score("python_unit_tests", "def add(a, b):\n    return 0\n", row(tests)).reward == 0.0


@pytest.mark.parametrize(
    "tests, reason",
    [
        (["for i in range(3):\n    assert add(i, i) == 2 * i"], "depends on the test's own ['i']"),
        (["assert all(add(i, 0) == i for i in range(3))"], "depends on the test's own ['i']"),
        (["import os\nassert add(1, 2) == 3"], "imports 'os'"),
    ],
)
def test_unsplittable_tests_score_zero_with_the_reason(tests, reason):
    verdict = score("python_unit_tests", HONEST, row(tests))
    assert verdict.reward == 0.0 and reason in verdict.reason
