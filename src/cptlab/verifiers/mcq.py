"""Multiple-choice answers, in the three forms the study's benchmarks use."""

from __future__ import annotations

import re

from cptlab.verifiers.base import Verdict, correct, malformed, register, wrong
from cptlab.verifiers.math import last_boxed, normalize_answer

_OPEN_TAG = re.compile(r"<answer>", re.IGNORECASE)
_CLOSE_TAG = re.compile(r"</answer>", re.IGNORECASE)
_STANDALONE_LETTER = re.compile(r"(?<![A-Za-z])([A-J])(?![A-Za-z])")


def letters_for(row: dict) -> str:
    """The valid option letters of a row: metadata["options"] gives their number (default 4)."""
    n = len(row.get("metadata", {}).get("options", [])) or 4
    return "ABCDEFGHIJ"[:n]


def _check(letter: str | None, row: dict, form: str) -> Verdict:
    if letter is None:
        return malformed(f"no answer letter in {form}", f"No answer letter in {form} was found.")
    letter = letter.strip().strip("().").upper()
    if len(letter) != 1 or letter not in letters_for(row):  # not `in`: "" and "AB" are in "ABCD"
        return malformed(f"{letter[:20]!r} is not an option letter", "Answer with one letter.")
    if letter == row["answer"].strip().upper():
        return correct(answer=letter)
    return wrong(f"The answer {letter} is incorrect.", letter)


def last_answer_tag(text: str) -> str | None:
    """Content of the last <answer>...</answer> (SciKnowEval format).

    The same pairs as `re.findall(r"<answer>(.*?)</answer>")`, found in one linear pass (the
    regex is quadratic on many unclosed `<answer>` tags).
    """
    found, pos = None, 0
    while (opening := _OPEN_TAG.search(text, pos)) is not None:
        closing = _CLOSE_TAG.search(text, opening.end())
        if closing is None:
            break
        found, pos = text[opening.end() : closing.start()], closing.end()
    return found


def last_standalone_letter(text: str, letters: str = "ABCD") -> str | None:
    """The last capital letter among `letters` that is not part of a word (GPQA/MMLU rule)."""
    found = [m for m in _STANDALONE_LETTER.findall(text) if m in letters]
    return found[-1] if found else None


@register("mcq_answer_tag")
def mcq_answer_tag(completion: str, row: dict) -> Verdict:
    """`<reasoning>...</reasoning><answer>LETTER</answer>`: exact match of the last <answer>."""
    return _check(last_answer_tag(completion), row, "<answer></answer>")


@register("mcq_boxed_letter")
def mcq_boxed_letter(completion: str, row: dict) -> Verdict:
    """GPQA style: `\\boxed{LETTER}`; without a box, the last standalone option letter counts."""
    boxed = last_boxed(completion)
    if boxed is not None:  # normalize_answer drops `$`, spaces and \\text{} around the letter
        return _check(normalize_answer(boxed), row, "\\boxed{}")
    return _check(last_standalone_letter(completion, letters_for(row)), row, "the answer")


@register("mcq_letter")
def mcq_letter(completion: str, row: dict) -> Verdict:
    """MMLU style: the last standalone option letter in the completion."""
    return _check(last_standalone_letter(completion, letters_for(row)), row, "the answer")
