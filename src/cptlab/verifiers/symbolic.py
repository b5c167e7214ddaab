"""math-verify's equivalence check, run where its time limits work.

math-verify bounds `parse` and `verify` with `signal.alarm`, which only the main thread may
install. Called from any other thread it raises ValueError, and a caller that treats errors as
"not equal" (the study's reward does) scores a right answer 0. So a check asked for on the main
thread runs there, and one asked for on another thread (the reward's thread pool,
`training.reward_workers`) runs on the main thread of a worker process: the same verdict at any
worker count, with the same time limits.

math-verify reports its own time-outs only in its log ("Timeout during parsing" or "... during
comparison") and then answers "not equal", which is also the study's reward. The check returns
that note beside the answer, so that the verdict can say why; the reward is unchanged.
"""

from __future__ import annotations

import concurrent.futures
import faulthandler
import logging
import multiprocessing
import os
import threading
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

# A worker whose check outlives this many times the check's own time limit is stuck outside
# Python (where the alarm cannot interrupt it): it exits, and the check is unscorable. One check
# is two parses and a comparison per pair of parsed forms, each bounded by the time limit.
_HARD_LIMIT_FACTOR = 10

_MATH_VERIFY_LOGGERS = ("math_verify.parser", "math_verify.grader")


class SymbolicCheckError(RuntimeError):
    """The check could not run (math-verify missing, raising, or its worker process lost)."""


@dataclass(frozen=True)
class SymbolicResult:
    """equal: math-verify's answer. note: why it may not be a judgement of the answer (a time-out
    that math-verify reported and answered "not equal"); None for an ordinary answer."""

    equal: bool
    note: str | None = None


def symbolic_equal(
    reference: str, predicted: str, *, timeout_s: int, delimit: bool = False
) -> SymbolicResult:
    """math-verify's `verify(parse(reference), parse(predicted))` with `timeout_s` on each parse
    and comparison. `delimit`: wrap both in `$...$` first (cptlab's math verifier; the study
    parses the bare strings). Raises SymbolicCheckError when the check could not run."""
    if threading.current_thread() is threading.main_thread():
        return _check(reference, predicted, timeout_s, delimit)
    future = _pool().submit(_check_in_worker, reference, predicted, timeout_s, delimit)
    try:
        return future.result()
    except BrokenProcessPool as err:
        _discard_pool()
        raise SymbolicCheckError(
            "math-verify's worker process ended during the check (stuck past "
            f"{_HARD_LIMIT_FACTOR * timeout_s} s, or killed)"
        ) from err


def _check(reference: str, predicted: str, timeout_s: int, delimit: bool) -> SymbolicResult:
    try:
        from math_verify import parse, verify
    except ImportError as err:
        raise SymbolicCheckError("math-verify is not installed") from err
    if delimit:
        reference, predicted = f"${reference}$", f"${predicted}$"
    timeouts = _TimeoutNotes()
    try:
        gold = parse(reference, parsing_timeout=timeout_s)
        pred = parse(predicted, parsing_timeout=timeout_s)
        equal = bool(verify(gold, pred, timeout_seconds=timeout_s))
    except Exception as err:  # math-verify catches its own; what escapes is the check's failure
        raise SymbolicCheckError(f"math-verify raised {type(err).__name__}: {err}"[:300]) from err
    finally:
        timeouts.close()
    note = f"math-verify timed out after {timeout_s} s ({timeouts.what})" if timeouts.what else None
    return SymbolicResult(equal, note)


def _check_in_worker(reference: str, predicted: str, timeout_s: int, delimit: bool):
    # faulthandler's watchdog thread ends the process even where the main thread is stuck in C.
    faulthandler.dump_traceback_later(_HARD_LIMIT_FACTOR * timeout_s, exit=True)
    try:
        return _check(reference, predicted, timeout_s, delimit)
    finally:
        faulthandler.cancel_dump_traceback_later()


class _TimeoutNotes(logging.Handler):
    """Collects, while installed, math-verify's time-out warnings of the calling thread."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.thread = threading.get_ident()
        self.found: list[str] = []
        for name in _MATH_VERIFY_LOGGERS:
            logging.getLogger(name).addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if record.thread == self.thread and message.startswith("Timeout during"):
            self.found.append(message.split()[2].rstrip(":"))  # "parsing" or "comparison"

    @property
    def what(self) -> str:
        return ", ".join(dict.fromkeys(self.found))

    def close(self) -> None:
        for name in _MATH_VERIFY_LOGGERS:
            logging.getLogger(name).removeHandler(self)
        super().close()


_executor: concurrent.futures.ProcessPoolExecutor | None = None
_executor_lock = threading.Lock()


def _pool() -> concurrent.futures.ProcessPoolExecutor:
    # Started at the first check off the main thread; its processes are spawned as concurrent
    # checks need them (at most one per reward thread), not forked from a process that holds
    # torch's threads and a GPU context.
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = concurrent.futures.ProcessPoolExecutor(
                max_workers=os.cpu_count() or 1, mp_context=multiprocessing.get_context("spawn")
            )
        return _executor


def _discard_pool() -> None:
    global _executor
    with _executor_lock:
        if _executor is not None:
            _executor.shutdown(wait=False, cancel_futures=True)
            _executor = None
