"""The verifier interface and the one safe entry point, `score`."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cptlab.errors import InputError

# Longer completions are scored 0 with a reason instead of being parsed: no verifier should
# spend unbounded time on a degenerate output. 200k chars is ~50k tokens, far above the study's
# 8192-token responses.
MAX_COMPLETION_CHARS = 200_000


@dataclass(frozen=True)
class Verdict:
    """The outcome of checking one completion.

    reward:   in [0, 1]; 1 means correct.
    feedback: a short text for the model (SDPO may put it in the teacher's prompt).
    reason:   why the reward is 0 when the completion could not be scored normally
              (malformed, too long, verifier error); None for an ordinary right/wrong answer.
    test_pass_fraction: the fraction of the row's tests the program passed, for verifiers that
              run several tests (the study's code reward reports it as `acc` beside its
              all-pass reward); None where the verifier has no tests to count.
    unscorable: the verifier could not judge the completion (it raised, its checker timed out
              or failed, the sandbox could not run the program): the reward (0, or what the
              study gives in that case) is not a judgement of the answer. Counted per training
              step; a stage with too many stops (`training.max_unscorable_fraction`).
    answer:   the answer the verifier read, normalised as it compares answers, so that equal
              strings are the same answer to the row (maj@k's votes,
              cptlab.evaluation.scoring); None without one (nothing parsed, or a program, which
              tests judge rather than a comparison).
    """

    reward: float
    feedback: str
    reason: str | None = None
    test_pass_fraction: float | None = None
    unscorable: bool = False
    answer: str | None = None


def canonical(value: Any) -> str:
    """A structured answer (calls, a grid) as one comparable string: JSON with sorted keys."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


# A verifier is fn(completion, row) -> Verdict; one registered with `sees_truncation=True` is
# called as fn(completion, row, truncated=...) instead: whether generation stopped at the token
# limit rather than at the end token (the study's feedback depends on it; no reward does).
Verifier = Callable[..., Verdict]
VERIFIERS: dict[str, Verifier] = {}
SEES_TRUNCATION: set[str] = set()


def register(name: str, *, sees_truncation: bool = False) -> Callable[[Verifier], Verifier]:
    """Register a verifier under `name` (the name a benchmark entry refers to).
    `sees_truncation`: the verifier takes a keyword `truncated: bool`."""

    def wrap(fn: Verifier) -> Verifier:
        if name in VERIFIERS:
            raise ValueError(f"verifier {name!r} registered twice")
        VERIFIERS[name] = fn
        if sees_truncation:
            SEES_TRUNCATION.add(name)
        return fn

    return wrap


def malformed(reason: str, feedback: str | None = None) -> Verdict:
    return Verdict(0.0, feedback or reason, reason=reason)


def unscorable(reason: str, feedback: str = "The answer could not be checked.") -> Verdict:
    return Verdict(0.0, feedback, reason=reason, unscorable=True)


def correct(feedback: str = "Correct.", answer: str | None = None) -> Verdict:
    return Verdict(1.0, feedback, answer=answer)


def wrong(feedback: str, answer: str | None = None) -> Verdict:
    return Verdict(0.0, feedback, answer=answer)


def score(verifier: str, completion: str, row: dict, *, truncated: bool = False) -> Verdict:
    """Score `completion` for `row` with the named verifier. Never raises.

    `truncated`: the completion was cut at the token limit (no end token); passed on to the
    verifiers registered with `sees_truncation`, ignored by the others.

    An unknown verifier name is a configuration error and does raise (InputError naming it);
    everything that depends on the model's output gives a Verdict, with `reason` set when
    the completion could not be scored.
    """
    try:
        fn = VERIFIERS[verifier]
    except KeyError:
        raise InputError(f"unknown verifier {verifier!r}; known: {sorted(VERIFIERS)}") from None
    if not isinstance(completion, str):
        return malformed(f"completion is {type(completion).__name__}, not text")
    if len(completion) > MAX_COMPLETION_CHARS:
        return malformed(f"completion too long ({len(completion)} chars)", "Answer too long.")
    try:
        if verifier in SEES_TRUNCATION:
            verdict = fn(completion, row, truncated=truncated)
        else:
            verdict = fn(completion, row)
    except Exception as err:  # a verifier bug must not kill a training run
        return unscorable(f"verifier {verifier} raised {type(err).__name__}: {err}"[:500])
    if not isinstance(verdict, Verdict) or not isinstance(verdict.reward, int | float):
        return malformed(
            f"verifier {verifier} returned {verdict!r:.200}, not a Verdict with a numeric reward"
        )
    if not 0.0 <= verdict.reward <= 1.0:
        return malformed(f"verifier {verifier} returned reward {verdict.reward} outside [0, 1]")
    fraction = verdict.test_pass_fraction
    if fraction is not None and not 0.0 <= fraction <= 1.0:
        return malformed(f"verifier {verifier} returned test pass fraction {fraction}")
    return verdict
