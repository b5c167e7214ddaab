"""The study's reward functions (`data.rewards: study`), written from their published behaviour.

Each verifier makes the decisions of the reward function named in its docstring (in
Moenupa/SDPO-CL, `verl/utils/reward_score/feedback/<file>.py`), including where those differ
from the benchmark's own rule, which the project's verifiers (`data.rewards: strict`) follow.
docs/rewards.md lists the measured disagreements between the two sets on real rows.

The feedback texts are the study's too: they reach the SDPO teacher when environment feedback
is on. Where the study gives no feedback, the feedback is empty.
"""

from __future__ import annotations

import json
import re
from collections import Counter

from cptlab.verifiers.base import Verdict, canonical, register, unscorable
from cptlab.verifiers.symbolic import SymbolicCheckError, symbolic_equal

# math.py: only the end of a completion is searched for the final box.
STUDY_MATH_TAIL_CHARS = 100
# verl/utils/reward_score/feedback/math.py @ d277934 (compute_score, a completion without a box)
STUDY_MATH_FORMAT_FEEDBACK = (
    "Your answer had the wrong format. The solution must be given in the format: "
    "\\boxed{your_answer}."
)
# verl/utils/reward_score/feedback/math.py @ d277934 (compute_score, a truncated completion)
STUDY_MATH_TRUNCATED_FEEDBACK = (
    "Your response was truncated because it exceeded the maximum length."
)
STUDY_MATH_VERIFY_TIMEOUT_S = 5

_GPQA_LETTER = re.compile(r"\b(A|B|C|D)\b")
_MCQ_FORMAT = re.compile(r"<answer>\s*(A|B|C|D)\s*</answer>$")
_REACT_ACTION = re.compile(r"Action:\s*(\w+)")
_REACT_INPUT = re.compile(r"Action Input:\s*({.*?})", re.DOTALL)
_REACT_FORMAT = re.compile(r"Action:.*?\nAction Input:.*?", re.DOTALL)


def _verdict(
    right: bool, feedback: str = "", reason: str | None = None, answer: str | None = None
) -> Verdict:
    """1 or 0; a `reason` is recorded only for a zero reward; `answer` the one read."""
    return Verdict(1.0 if right else 0.0, feedback, None if right else reason, answer=answer)


# ----- math (math.py) ---------------------------------------------------------------------------


def study_boxed(completion: str) -> str | None:
    """The study's answer: the last `\\boxed{` in the last 100 characters, its braces counted
    from there; None without a box, "" when the box does not close or is malformed."""
    tail = completion[-STUDY_MATH_TAIL_CHARS:]
    start = tail.rfind("\\boxed{")
    if start < 0:
        return None
    depth = 0
    for end in range(start, len(tail)):
        if tail[end] == "{":
            depth += 1
        elif tail[end] == "}":
            depth -= 1
            if depth == 0:
                return tail[start + len("\\boxed{") : end]
    return ""


def study_math_feedback(has_answer: bool, truncated: bool) -> str:
    """math.py's feedback (format feedback on, correctness feedback off, its defaults): the
    format text for a completion without an answer that was not truncated, else the truncation
    text for any truncated one (right or wrong), else nothing."""
    if not has_answer and not truncated:
        return STUDY_MATH_FORMAT_FEEDBACK
    return STUDY_MATH_TRUNCATED_FEEDBACK if truncated else ""


@register("study_math", sees_truncation=True)
def study_math(completion: str, row: dict, truncated: bool = False) -> Verdict:
    """math.py: the boxed answer equals the reference string, else math-verify equivalence.
    Truncation changes the feedback only, never the reward."""
    predicted = study_boxed(completion)
    feedback = study_math_feedback(bool(predicted), truncated)
    if not predicted:
        where = f"in the last {STUDY_MATH_TAIL_CHARS} characters"
        reason = f"no \\boxed{{}} {where}" if predicted is None else f"empty or open box {where}"
        return _verdict(False, feedback, reason)
    answer = str(row["answer"])
    if predicted == answer:
        return _verdict(True, feedback, answer=predicted)
    # math-verify on the bare strings, as the study calls it (no `$` delimiters added). The
    # study takes every error of the check for a wrong answer: so does the reward, with the
    # reason recorded.
    try:
        result = symbolic_equal(answer, predicted, timeout_s=STUDY_MATH_VERIFY_TIMEOUT_S)
    except SymbolicCheckError as err:
        return unscorable(str(err), feedback)
    if not result.equal and result.note:
        return unscorable(result.note, feedback)
    return _verdict(result.equal, feedback, answer=predicted)


# ----- multiple choice (mcq.py, gpqa.py) --------------------------------------------------------


def study_answer_tag(completion: str) -> str:
    """mcq.py: the text after the last `<answer>` up to the next `</answer>`, stripped (the
    whole completion when it has no tag)."""
    return completion.split("<answer>")[-1].split("</answer>")[0].strip()


@register("study_mcq_answer_tag")
def study_mcq_answer_tag(completion: str, row: dict) -> Verdict:
    """mcq.py (SciKnowEval): that text must equal the answer letter exactly."""
    predicted = study_answer_tag(completion)
    reason = None if _MCQ_FORMAT.search(completion) else "no <answer>LETTER</answer> at the end"
    return _verdict(predicted == row["answer"], "", reason, predicted)


def study_gpqa_letter(completion: str) -> str:
    """gpqa.py: the last standalone A-D of the upper-cased completion (else the completion,
    stripped of spaces and dots), with trailing dots and slashes removed."""
    found = _GPQA_LETTER.findall(completion.upper())
    predicted = found[-1] if found else completion.strip().strip(".")
    return predicted.rstrip(".").rstrip("/")


@register("study_gpqa")
def study_gpqa(completion: str, row: dict) -> Verdict:
    """gpqa.py (GPQA): that letter must equal the answer letter."""
    predicted = study_gpqa_letter(completion)
    reason = None if predicted in ("A", "B", "C", "D") else "no standalone letter A-D"
    return _verdict(predicted == row["answer"], "", reason, predicted)


# ----- tool use (tooluse.py) --------------------------------------------------------------------


def study_react(completion: str) -> tuple[list[str], dict]:
    """tooluse.py: every word after `Action:`, and the merge of every `Action Input:` that
    parses as JSON up to its first closing brace (a nested object never parses)."""
    actions = _REACT_ACTION.findall(completion)
    merged: dict = {}
    for block in _REACT_INPUT.findall(completion):
        try:
            merged.update(json.loads(block))
        except json.JSONDecodeError:
            pass
    return actions, merged


def study_reference_calls(row: dict) -> tuple[list[str], dict]:
    """The reference action names and merged inputs. (tooluse.py counts a golden input that
    is not JSON as {}; the loaders exclude such rows, so every input here is an object.)"""
    calls = json.loads(row["answer"])
    merged: dict = {}
    for call in calls:
        merged.update(call["arguments"])
    return [call["name"] for call in calls], merged


@register("study_react_tool")
def study_react_tool(completion: str, row: dict) -> Verdict:
    """tooluse.py (ToolAlpaca): the multiset of action names and the merged inputs must both
    equal the reference's."""
    actions, inputs = study_react(completion)
    expected_actions, expected_inputs = study_reference_calls(row)
    problems = []  # the texts of verl/utils/reward_score/feedback/tooluse.py @ d277934
    if Counter(actions) != Counter(expected_actions):
        problems.append(f"Actions mismatch: predicted {actions}, expected {expected_actions}")
    if inputs != expected_inputs:
        problems.append(f"Action inputs mismatch: predicted {inputs}, expected {expected_inputs}")
    reason = None if _REACT_FORMAT.search(completion) else "no Action / Action Input lines"
    answer = canonical({"actions": sorted(actions), "inputs": inputs})
    return _verdict(not problems, "; ".join(problems), reason, answer)
