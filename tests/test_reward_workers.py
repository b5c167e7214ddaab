"""The training reward at any worker count (`training.reward_workers`), and what it does with a
completion its verifier could not judge.

On real rows of the study's benchmarks (../shared/study-data; skipped where absent) and on the
embedded code rows (the sandbox), under both reward sets, the verdicts with 8 workers equal those
with 1: reward, feedback, reason. math-verify's time limits need the main thread; off it, its
checks run in worker processes (cptlab.verifiers.symbolic), else most equivalent math answers
score 0 with 8 workers (2 of 9 did before).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from test_study_conformance import BFCL, SCIKNOWEVAL, STUDY_DATA, bfcl_reference_call, react

from cptlab.domains.registry import get_benchmark, load_benchmark
from cptlab.errors import StageError
from cptlab.train.rewards import UnscorableGuard, VerifierReward, merge_step_stats
from cptlab.verifiers import VERIFIERS, score
from cptlab.verifiers.base import unscorable
from cptlab.verifiers.symbolic import SymbolicResult, symbolic_equal

needs_study_data = pytest.mark.skipif(
    not STUDY_DATA.is_dir(), reason=f"the study's rows are not here ({STUDY_DATA})"
)


def with_verifier(rows: list[dict], benchmark: str, reward_set: str) -> list[dict]:
    verifier = get_benchmark(benchmark).verifier_for(reward_set)
    return [{**row, "metadata": {**row["metadata"], "verifier": verifier}} for row in rows]


def scored(rows: list[dict], completions: list[tuple[int, str]], workers: int) -> list[tuple]:
    reward = VerifierReward(rows, workers=workers)
    texts = [[{"role": "assistant", "content": text}] for _, text in completions]
    reward(prompts=None, completions=texts, row_index=[i for i, _ in completions])
    return [(v.reward, v.feedback, v.reason, v.unscorable) for v in reward.last_verdicts]


def math_completions(rows: list[dict], solutions: list[str]) -> list[tuple[int, str]]:
    """Per row: its published solution (the boxed answer in the solution's own form), the
    reference in another form (\\dfrac, spaces), and the next row's answer (mostly wrong)."""
    out = []
    for i, (row, solution) in enumerate(zip(rows, solutions, strict=True)):
        other = row["answer"].replace("\\frac", "\\dfrac").replace(",", ", ")
        wrong = rows[(i + 1) % len(rows)]["answer"]
        out += [(i, solution), (i, f"So \\boxed{{{other}}}"), (i, f"\\boxed{{{wrong}}}")]
    return out


def math500() -> tuple[list[dict], list[str]]:
    path = STUDY_DATA / "math500" / "test.jsonl"
    raw = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return load_benchmark("math500", path=str(path)), [r["solution"] for r in raw]


@needs_study_data
@pytest.mark.parametrize("reward_set", ["study", "strict"])
def test_math_rewards_are_the_same_at_one_and_eight_workers(reward_set: str) -> None:
    rows, solutions = math500()
    rows, solutions = with_verifier(rows[:120], "math500", reward_set), solutions[:120]
    completions = math_completions(rows, solutions)
    one = scored(rows, completions, workers=1)
    assert scored(rows, completions, workers=8) == one
    rights = sum(v[0] for v in one[1::3])
    # the positive control: the reference in another form is mostly right under either set
    assert rights >= 0.8 * len(rows), rights


@needs_study_data
def test_mcq_tool_and_bfcl_rewards_are_the_same_at_one_and_eight_workers() -> None:
    cases = []
    mcq = load_benchmark("sciknoweval_test", path=str(SCIKNOWEVAL / "physics" / "test.json"))
    letters = "ABCD"
    for reward_set in ("study", "strict"):
        rows = with_verifier(mcq, "sciknoweval_test", reward_set)
        texts = [(i, f"<answer>{x}</answer>") for i in range(len(rows)) for x in letters]
        cases.append((rows, texts))
    tool = load_benchmark(
        "toolalpaca_test", path=str(STUDY_DATA / "sdpo-cl" / "tooluse" / "test.json")
    )
    for reward_set in ("study", "strict"):
        rows = with_verifier(tool, "toolalpaca_test", reward_set)
        texts = [(i, react(json.loads(r["answer"]))) for i, r in enumerate(rows)]
        texts += [(i, react(json.loads(r["answer"])[:-1])) for i, r in enumerate(rows)]
        cases.append((rows, texts))
    bfcl = load_benchmark("bfcl_multiple", path=str(BFCL))[:60]
    texts = [(i, bfcl_reference_call(json.loads(r["answer"])[0])) for i, r in enumerate(bfcl)]
    cases.append((bfcl, texts + [(i, "[f()]") for i in range(len(bfcl))]))
    for rows, texts in cases:
        one = scored(rows, texts, workers=1)
        assert 0 < sum(v[0] for v in one) < len(texts)  # both outcomes occur
        assert scored(rows, texts, workers=8) == one


def test_sandboxed_code_rewards_are_the_same_at_one_and_eight_workers() -> None:
    cases = []
    for name in ("code_id", "code_ood"):
        rows = load_benchmark(name, n=6, seed=0)
        texts = [(i, r["metadata"]["solution"]) for i, r in enumerate(rows)]
        texts += [(i, "```python\nprint(1 / 0)\n```") for i in range(len(rows))]
        cases.append((rows, texts))
    for rows, texts in cases:
        one = scored(rows, texts, workers=1)
        assert [v[0] for v in one] == [1.0] * len(rows) + [0.0] * len(rows)
        assert scored(rows, texts, workers=8) == one


def test_math_verify_off_the_main_thread_checks_as_on_it() -> None:
    """The check itself, from a thread: the same answer as on the main thread, where
    math-verify called from a thread raises (and the study's reward would score 0)."""
    from math_verify import parse, verify

    pairs = [("\\frac{1}{2}", "0.5"), ("3", "x=3"), ("1.5", "3/2"), ("2", "3")]
    here = [symbolic_equal(g, p, timeout_s=5, delimit=True) for g, p in pairs]
    assert [r.equal for r in here] == [True, True, True, False]
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(lambda gp: symbolic_equal(*gp, timeout_s=5, delimit=True), pairs)) == (
            here
        )
        with pytest.raises(ValueError, match="threaded environment"):
            pool.submit(lambda: verify(parse("$1$"), parse("$1$"))).result()


def test_a_math_verify_timeout_is_recorded_not_silent(monkeypatch) -> None:
    """math-verify answers "not equal" after a time-out and says so only in its log: the
    verdict keeps the reward (the study's) and records why, as unscorable."""
    import cptlab.verifiers.math as math_module
    import cptlab.verifiers.study as study_module

    timed_out = SymbolicResult(False, "math-verify timed out after 5 s (comparison)")
    monkeypatch.setattr(math_module, "symbolic_equal", lambda *a, **k: timed_out)
    monkeypatch.setattr(study_module, "symbolic_equal", lambda *a, **k: timed_out)
    row = {"id": "r", "benchmark": "math500", "answer": "x+1", "metadata": {}}
    for verifier in ("math_boxed", "study_math"):
        verdict = score(verifier, "so \\boxed{1+x}", row)
        assert (verdict.reward, verdict.unscorable) == (0.0, True), verifier
        assert verdict.reason == timed_out.note
    assert score("study_math", "so \\boxed{1+x}", row).feedback == ""  # the study's feedback


def test_math_verify_reports_its_own_timeout(monkeypatch) -> None:
    """A real time-out of math-verify's alarm, caught from its log."""

    def slow(*args, **kwargs):
        time.sleep(3)
        return True

    monkeypatch.setattr("math_verify.grader.sympy_expr_eq", slow)
    result = symbolic_equal("x+1", "1+x", timeout_s=1, delimit=True)
    assert result == SymbolicResult(False, "math-verify timed out after 1 s (comparison)")


def test_unscorable_verdicts_are_counted_per_step_and_stop_the_stage(monkeypatch) -> None:
    rows = [
        {"id": f"r{i}", "benchmark": "math_id", "answer": "1", "metadata": {"verifier": v}}
        for i, v in enumerate(["math_boxed", "tiny_missing_checker"])
    ]
    checker = lambda completion, row: unscorable("checker missing")  # noqa: E731
    monkeypatch.setitem(VERIFIERS, "tiny_missing_checker", checker)
    reward = VerifierReward(rows)
    texts = ["\\boxed{1}", "\\boxed{2}", "x", "y"]
    reward(None, [[{"content": t}] for t in texts], row_index=[0, 0, 1, 1])
    stats = reward.take_step_stats()
    assert stats["unscorable"] == [["tiny_missing_checker", "checker missing", 2]]
    metrics, reasons = merge_step_stats([stats])
    assert metrics["verifier/unscorable_fraction"] == 0.5
    assert reasons == {"checker missing": 2}
    guard = UnscorableGuard(max_fraction=0.5)
    guard.add([stats])
    guard.check(step=1)  # 2 of 4: at the limit, not past it
    guard.add([{"n": 4, "unscorable": [["tiny_missing_checker", "checker missing", 3]]}])
    with pytest.raises(StageError, match=re.escape("tiny_missing_checker (5)")) as err:
        guard.check(step=2)
    assert "5 of the stage's 8 completions (62.5%" in str(err.value)


def test_a_raising_verifier_is_unscorable(monkeypatch) -> None:
    def broken(completion, row):
        raise KeyError("tests")

    monkeypatch.setitem(VERIFIERS, "tiny_raises", broken)
    verdict = score("tiny_raises", "x", {"id": "r", "answer": "1", "metadata": {}})
    assert verdict.unscorable and verdict.reason.startswith("verifier tiny_raises raised KeyError")


def end_the_worker(*args) -> None:
    """Stands in for the check in a worker process: the process ends mid-check."""
    os._exit(1)


def test_a_lost_worker_process_makes_the_check_unscorable_then_is_replaced(monkeypatch):
    import cptlab.verifiers.symbolic as symbolic

    def from_a_thread():
        return ThreadPoolExecutor(1).submit(symbolic_equal, "1", "1.0", timeout_s=5).result()

    monkeypatch.setattr(symbolic, "_check_in_worker", end_the_worker)
    with pytest.raises(symbolic.SymbolicCheckError, match="worker process ended"):
        from_a_thread()
    monkeypatch.undo()
    assert from_a_thread() == SymbolicResult(True)


def test_a_check_stuck_where_the_alarm_cannot_reach_ends_its_worker() -> None:
    """The alarm is blocked (as in C code that never returns to Python): the worker's own
    hard limit ends the process, which the parent sees as a lost worker."""
    program = (
        "import signal, time\n"
        "import math_verify.grader as grader\n"
        "import cptlab.verifiers.symbolic as symbolic\n"
        "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})\n"
        "grader.sympy_expr_eq = lambda *a, **k: time.sleep(30)\n"
        "symbolic._HARD_LIMIT_FACTOR = 2\n"
        "symbolic._check_in_worker('x+1', '1+x', 1, True)\n"
    )
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert done.returncode != 0 and "Timeout (0:00:02)" in done.stderr
    assert time.monotonic() - started < 20
