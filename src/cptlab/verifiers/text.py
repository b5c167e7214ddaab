"""Plain-text answers: the whole completion is the answer (the warm-up copying drills)."""

from __future__ import annotations

from cptlab.verifiers.base import Verdict, correct, register, wrong


@register("exact_text")
def exact_text(completion: str, row: dict) -> Verdict:
    """The whole completion must equal the reference, ignoring surrounding whitespace."""
    answer = completion.strip()
    if answer == row["answer"].strip():
        return correct(answer=answer)
    return wrong("The output differs from the expected text.", answer)
