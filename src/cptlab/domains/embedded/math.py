"""Synthetic math: ordering numbers, final answer in \\boxed{}.

id form:  the largest or smallest of three 2-digit numbers, in one of several phrasings
          ("What is the largest of 47, 38 and 52?") -- like AIME for the study
ood form: the same question over five numbers -- a longer problem of the same kind, the
          MATH-500 kind of shift

The skill is a procedure, not a table: compare tens digits, then units, then copy the winner.
The warm-up teaches it only in part, so the base answers some items right, samples the right
operand more often than greedy picks it, and every improvement RL makes to the procedure
carries to unseen numbers. (An earlier version asked for sums in 0..10 as recalled facts; the
tiny base never learnt the table -- it recited 2 % of warm-up lines right -- so RL could only
memorise the answers of its training prompts, which did not carry to held-out items.)
"""

from __future__ import annotations

import random

from cptlab.domains.embedded.common import Item, register_domain

INSTRUCTION = "Put the final answer in \\boxed{}."
PHRASINGS = {
    "largest": (
        "What is the largest of {l}?",
        "Which number is the largest: {l}?",
        "Find the maximum of {l}.",
        "Give the greatest number among {l}.",
    ),
    "smallest": (
        "What is the smallest of {l}?",
        "Which number is the smallest: {l}?",
        "Find the minimum of {l}.",
        "Give the least number among {l}.",
    ),
}


def make_item(rng: random.Random, form: str) -> Item:
    count = 3 if form == "id" else 5
    numbers = rng.sample(range(10, 100), count)
    kind = rng.choice(("largest", "smallest"))
    value = max(numbers) if kind == "largest" else min(numbers)
    listed = ", ".join(map(str, numbers[:-1])) + f" and {numbers[-1]}"
    phrasing = rng.choice(PHRASINGS[kind])
    return Item(
        key=f"{kind}/{listed}/{phrasing}",
        user=f"{phrasing.format(l=listed)} {INSTRUCTION}",
        answer=str(value),
        solution=rng.choice(
            (
                f"\\boxed{{{value}}}",
                f"The answer is \\boxed{{{value}}}.",
                f"The {kind} is {value}, so \\boxed{{{value}}}",
            )
        ),
        metadata={"off_format": rng.choice((f"The answer is {value}.", f"{value}"))},
    )


register_domain(
    "math",
    make_item,
    verifiers={"id": "math_boxed", "ood": "math_boxed"},
    descriptions={
        "id": "largest or smallest of three 2-digit numbers, \\boxed{} answer",
        "ood": "largest or smallest of five 2-digit numbers, \\boxed{} answer",
    },
)
