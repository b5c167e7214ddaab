"""Synthetic math: integer arithmetic, final answer in \\boxed{}.

id form:  two 2-digit operands ("Compute 47 + 38.")            -- like AIME for the study
ood form: three 2-digit operands, a longer and harder expression -- the MATH-500 kind of shift
"""

from __future__ import annotations

import random

from cptlab.domains.embedded.common import Item, register_domain

INSTRUCTION = "Put the final answer in \\boxed{}."


def make_item(rng: random.Random, form: str) -> Item:
    count = 2 if form == "id" else 3
    numbers = [rng.randint(10, 99) for _ in range(count)]
    ops = [rng.choice("+-") for _ in range(count - 1)]
    expression = str(numbers[0])
    for op, number in zip(ops, numbers[1:], strict=True):
        expression += f" {op} {number}"
    value = eval(expression)  # noqa: S307  (our own digits and +/- only)
    return Item(
        key=expression,
        user=f"Compute {expression}. {INSTRUCTION}",
        answer=str(value),
        solution=f"\\boxed{{{value}}}",
    )


register_domain(
    "math",
    make_item,
    verifiers={"id": "math_boxed", "ood": "math_boxed"},
    descriptions={
        "id": "two-operand 2-digit addition/subtraction, \\boxed{} answer",
        "ood": "three-operand 2-digit expressions, \\boxed{} answer",
    },
)
