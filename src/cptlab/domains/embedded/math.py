"""Synthetic math: ranking numbers, final answer in \\boxed{}.

id form:  the largest, smallest, second largest or second smallest of five 2-digit numbers, in
          one of four phrasings each ("What is the second largest of 47, 38, 12, 90 and 52?")
          -- like AIME for the study
ood form: the same question over eight numbers -- a longer problem of the same kind, the
          MATH-500 kind of shift

The skill is a procedure, not a table: rank the numbers, then copy the one asked for. With the
tokenizer's `max_digits_per_token: 3` every 2-digit number is one token, so copying the answer
is a one-token lookup. The warm-up teaches the task only in part: the base answers some items
right, samples the right operand more often than greedy picks it, and often answers a number
that is not in the question at all. RL mostly turns those answers into right ones, and that
carries to unseen numbers (docs/embedded-testbed.md, "Design choices": why the task is a
ranking and not arithmetic).
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
    "second largest": (
        "What is the second largest of {l}?",
        "Which number is the second largest: {l}?",
        "Find the second highest of {l}.",
        "Give the second greatest number among {l}.",
    ),
    "second smallest": (
        "What is the second smallest of {l}?",
        "Which number is the second smallest: {l}?",
        "Find the second lowest of {l}.",
        "Give the second least number among {l}.",
    ),
}


def make_item(rng: random.Random, form: str) -> Item:
    count = 5 if form == "id" else 8
    numbers = rng.sample(range(10, 100), count)
    kind = rng.choice(tuple(PHRASINGS))
    ranked = sorted(numbers, reverse="largest" in kind)
    value = ranked[1] if kind.startswith("second") else ranked[0]
    listed = ", ".join(map(str, numbers[:-1])) + f" and {numbers[-1]}"
    phrasing = rng.choice(PHRASINGS[kind])
    return Item(
        key=f"{kind}/{listed}/{phrasing}",
        user=f"{phrasing.format(l=listed)} {INSTRUCTION}",
        answer=str(value),
        # No reference is a bare `\\boxed{n}`: that is what SDPO_0's stripped demonstration of a
        # reasoned answer looks like, and a teacher that has seen bare references answer bare
        # cannot tell from it that the successful answer reasoned (as in science and tool, whose
        # every reference reasons; docs/notebook/testbed.md, "SDPO_0's math stage").
        solution=rng.choice(
            (
                f"The answer is \\boxed{{{value}}}.",
                f"The {kind} is {value}, so \\boxed{{{value}}}",
            )
        ),
        metadata={
            "off_format": rng.choice((f"The answer is {value}.", f"{value}")),
            "off_format_cue": PHRASINGS[kind].index(phrasing) >= 2,  # "Find ...", "Give ..."
        },
    )


register_domain(
    "math",
    make_item,
    verifiers={"id": "math_boxed", "ood": "math_boxed"},
    # The step that names the ranked value ("The second largest is 52, so "); "The answer is"
    # states no step and stays, as the study's rule leaves an answer's own wording.
    reasoning=r"The (?:second )?(?:largest|smallest) is \d+, so ",
    descriptions={
        "id": "largest, smallest, second largest or second smallest of five 2-digit numbers, "
        "\\boxed{} answer",
        "ood": "the same over eight 2-digit numbers, \\boxed{} answer",
    },
)
