"""Synthetic math: integer arithmetic, final answer in \\boxed{}.

id form:  two operands in 0..10, in one of several phrasings ("Compute 7 + 8.")
          -- like AIME for the study
ood form: three operands, a longer and harder expression -- the MATH-500 kind of shift

Like the science facts, the arithmetic table is world knowledge: the warm-up split holds each
sum in some phrasings, the test split the same sums in held-out phrasings (a hash of the
(expression, phrasing) key separates the splits), so the base recalls part of the table and RL
can sharpen that recall, as post-training does with what a model saw in pre-training.
"""

from __future__ import annotations

import random

from cptlab.domains.embedded.common import Item, register_domain

INSTRUCTION = "Put the final answer in \\boxed{}."
# Small operands: a ~1M-parameter model learns part of this table in a few minutes of warm-up,
# which leaves the room to learn (and to forget) that the testbed needs.
MAX_OPERAND = 10
PHRASINGS = (
    "Compute {e}.",
    "What is {e}?",
    "Evaluate {e}.",
    "Find the value of {e}.",
    "Calculate {e}.",
)


def make_item(rng: random.Random, form: str) -> Item:
    count = 2 if form == "id" else 3
    numbers = [rng.randint(0, MAX_OPERAND) for _ in range(count)]
    ops = [rng.choice("+-") for _ in range(count - 1)]
    expression = str(numbers[0])
    for op, number in zip(ops, numbers[1:], strict=True):
        expression += f" {op} {number}"
    value = eval(expression)  # noqa: S307  (our own digits and +/- only)
    phrasing = rng.choice(PHRASINGS)
    off_format = rng.choice((f"The answer is {value}.", f"{expression} = {value}"))
    return Item(
        key=f"{expression}/{phrasing}",
        user=f"{phrasing.format(e=expression)} {INSTRUCTION}",
        answer=str(value),
        solution=rng.choice(
            (
                f"\\boxed{{{value}}}",
                f"The answer is \\boxed{{{value}}}.",
                f"{expression} = {value}, so \\boxed{{{value}}}",
            )
        ),
        metadata={"off_format": off_format},
    )


register_domain(
    "math",
    make_item,
    verifiers={"id": "math_boxed", "ood": "math_boxed"},
    descriptions={
        "id": "two-operand addition/subtraction in 0..10, \\boxed{} answer",
        "ood": "three-operand 2-digit expressions, \\boxed{} answer",
    },
)
