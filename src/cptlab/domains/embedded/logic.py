"""Synthetic logic (never trained): ordering deductions with three or four people.

"Ana is taller than Bo. Cy is taller than Ana. Who is the tallest?" -> \\boxed{Cy}
"""

from __future__ import annotations

import random

from cptlab.domains.embedded.common import Item, register_domain

NAMES = ("Ana", "Bo", "Cy", "Dee", "Eli", "Fay", "Gus", "Hal", "Ida", "Jo", "Kim", "Lu")
RELATIONS = (("taller", "tallest", "shortest"), ("older", "oldest", "youngest"))


def make_item(rng: random.Random, form: str) -> Item:
    people = rng.sample(NAMES, rng.choice((3, 4)))  # people[0] ranks highest
    comparative, top, bottom = rng.choice(RELATIONS)
    facts = [f"{a} is {comparative} than {b}." for a, b in zip(people, people[1:], strict=False)]
    rng.shuffle(facts)
    ask_top = rng.random() < 0.5
    answer = people[0] if ask_top else people[-1]
    return Item(
        key=" ".join(facts) + f"/{ask_top}",
        user=" ".join(facts) + f" Who is the {top if ask_top else bottom}? "
        "Put the name in \\boxed{}.",
        answer=answer,
        solution=rng.choice((f"\\boxed{{{answer}}}", f"It is {answer}. \\boxed{{{answer}}}")),
    )


register_domain(
    "logic",
    make_item,
    verifiers={"ood": "boxed_exact"},
    descriptions={"ood": "ordering deductions over 3-4 people, \\boxed{name} (ZebraLogic-like)"},
)
