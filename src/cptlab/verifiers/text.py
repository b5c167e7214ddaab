"""Plain-text answers: the whole completion is the answer (the warm-up copying drills)."""

from __future__ import annotations

from cptlab.verifiers.base import Verdict, correct, register, wrong


@register("exact_text")
def exact_text(completion: str, row: dict) -> Verdict:
    """The whole completion must equal the reference, ignoring surrounding whitespace."""
    if completion.strip() == row["answer"].strip():
        return correct()
    return wrong("The output differs from the expected text.")
