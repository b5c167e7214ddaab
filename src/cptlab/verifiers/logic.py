"""Logic puzzles: a single boxed entity, or a ZebraLogic grid scored by cell accuracy."""

from __future__ import annotations

import json
import re

from cptlab.verifiers.base import Verdict, canonical, correct, malformed, register, wrong
from cptlab.verifiers.math import last_boxed
from cptlab.verifiers.tool import json_values


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip().strip(".").lower()


def _unwrap(s: str) -> str:
    """`$...$` and `\\text{...}`-style wrappers around a boxed entity are not part of it."""
    s = s.strip().strip("$")
    return re.sub(r"\\(?:text|textbf|textit|mathrm)\{([^{}]*)\}", r"\1", s)


@register("boxed_exact")
def boxed_exact(completion: str, row: dict) -> Verdict:
    """The last \\boxed{} must equal the reference, ignoring case, surrounding spaces and
    `$`/`\\text{}` wrappers."""
    predicted = last_boxed(completion)
    if predicted is None:
        return malformed("no \\boxed{} answer", "No final answer in \\boxed{} was found.")
    if not predicted.strip():
        return malformed("empty \\boxed{}", "The \\boxed{} answer is empty.")
    answer = _norm(_unwrap(predicted))
    if answer == _norm(_unwrap(row["answer"])):
        return correct(answer=answer)
    return wrong(f"The answer {predicted.strip()[:80]} is incorrect.", answer)


def _solution_within(value: object) -> dict | None:
    """The last (outermost) {"solution": {...}} inside a decoded JSON value."""
    stack = [value]
    while stack:  # depth-first, last child first, so the first hit is the last in the text
        node = stack.pop()
        if isinstance(node, dict) and isinstance(node.get("solution"), dict):
            return node["solution"]
        stack.extend(
            node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        )
    return None


def _grid_from_text(text: str) -> dict | None:
    """The last JSON object in the text that has a "solution" mapping (ZebraLogic output).

    Raises ValueError on JSON nested too deeply to decode.
    """
    found = None
    for value in json_values(text, "{"):
        inner = _solution_within(value)
        found = found if inner is None else inner
    return found


def cell_accuracy(predicted: dict, reference: dict) -> float:
    """Share of reference cells (house x attribute) that the prediction fills correctly."""
    total = hits = 0
    for house, attributes in reference.items():
        got = predicted.get(house, {})
        for attribute, value in attributes.items():
            total += 1
            if isinstance(got, dict) and _norm(str(got.get(attribute, ""))) == _norm(str(value)):
                hits += 1
    return hits / total if total else 0.0


@register("zebra_grid")
def zebra_grid(completion: str, row: dict) -> Verdict:
    """ZebraLogic: reward = cell accuracy of the last JSON {"solution": {...}} in the output.

    `row["answer"]` is the JSON of the reference solution grid.
    """
    try:
        predicted = _grid_from_text(completion)
    except ValueError as err:
        return malformed(f"malformed JSON: {err}", "The JSON solution grid is malformed.")
    if predicted is None:
        return malformed("no JSON solution grid", 'No JSON {"solution": ...} grid was found.')
    accuracy = cell_accuracy(predicted, json.loads(row["answer"]))
    answer = canonical(predicted)
    if accuracy == 1.0:
        return correct(answer=answer)
    return Verdict(accuracy, f"{accuracy:.0%} of the cells are correct.", answer=answer)
