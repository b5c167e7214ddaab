"""diagnostics/science_errors.py tells a wrong fact from a fact bound to the wrong letter, as
docs/notebook/testbed.md reports them."""

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "diagnostics" / "science_errors.py"
spec = importlib.util.spec_from_file_location("science_errors", SCRIPT)
science_errors = importlib.util.module_from_spec(spec)
spec.loader.exec_module(science_errors)

# "What is the color of velorite? Options: red (A), green (B), blue (C), white (D)." -> B
ROW = {"answer": "B", "metadata": {"options": ["red", "green", "blue", "white"]}}


@pytest.mark.parametrize(
    "completion,kind,fact",
    [
        ("<reasoning>The color is green (B).</reasoning><answer>B</answer>", "correct", True),
        (
            "<reasoning>The color is green (D).</reasoning><answer>D</answer>",
            "letter not the stated value's (binding)",
            True,
        ),
        ("<reasoning>It has color red, option A.</reasoning><answer>A</answer>",
         "wrong fact, its letter", False),
        ("<reasoning>No idea.</reasoning><answer>C</answer>", "wrong, no option value stated",
         False),
        ("<reasoning>The color is green.</reasoning>", "no answer letter", True),
        # the first value the reasoning names is the stated one, not a later comparison
        ("<reasoning>green, not blue</reasoning><answer>C</answer>",
         "letter not the stated value's (binding)", True),
    ],
)  # fmt: skip
def test_answer_categories(completion, kind, fact):
    assert science_errors.category(ROW, completion) == (kind, fact)


def test_lookup_drills_are_fresh_and_answered_by_their_letter():
    drills = science_errors.fresh_lookup_drills(50, seed=0)
    assert len(drills) == 50 and len({d[0][0]["content"] for d in drills}) == 50
    for prompt, letter in drills:
        options = prompt[0]["content"].split("Options: ")[1].split(". Which letter is ")
        asked = options[1].rstrip("?")
        assert f"{asked} ({letter})" in options[0]
    assert science_errors.fresh_lookup_drills(5, seed=0) == drills[:5]
