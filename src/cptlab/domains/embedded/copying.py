"""Warm-up only: in-context copying and lookup drills for the tiny base model.

A ~1M-parameter model trained for a few minutes only sometimes forms the induction heads that
copying needs (Olsson et al., 2022), and without them it can neither map a recalled value to its
option letter nor use SDPO's demonstration. Repetition in ordinary pre-training text is what
forms those heads in real models; these drills play that part. They carry no domain fact: the
words are drawn at random, so they teach the skill, not an answer.

"Repeat: Titan C 7 Lima"                                       -> "Titan C 7 Lima"
"Options: gas (A), Lima (B), 7 (C), blue (D). Which letter is 7?" -> "C"
'Copy: {"gas": "Lima", "blue": 7}'                              -> '{"gas": "Lima", "blue": 7}'
"Copy: y = ((x * 6) - 3) % 11"                                  -> "y = ((x * 6) - 3) % 11"

The records and expressions matter: there the token before each value (` "`, `, `, ` % `)
occurs several times, so copying them needs a longer context than one token, which is what
copying a tool call's arguments or a program's constants from SDPO's demonstration needs.
"""

from __future__ import annotations

import random

from cptlab.domains.embedded.common import Item, register_domain
from cptlab.domains.embedded.facts import SCIENCE_ATTRIBUTES
from cptlab.domains.embedded.tool import CITIES, WORDS

VOCABULARY = (
    tuple(
        sorted(
            {v for values in SCIENCE_ATTRIBUTES.values() for v in values} | set(CITIES) | set(WORDS)
        )
    )
    + tuple("ABCD")
    + tuple(str(n) for n in range(-12, 25))
)


def _record(rng: random.Random) -> str:
    keys = rng.sample(VOCABULARY[:-41], rng.randint(2, 4))
    fields = [
        f'"{key}": '
        + (str(rng.randint(0, 12)) if rng.random() < 0.3 else f'"{rng.choice(VOCABULARY)}"')
        for key in keys
    ]
    return "{" + ", ".join(fields) + "}"


def _expression(rng: random.Random) -> str:
    expression = "x"
    for _ in range(rng.randint(2, 4)):
        expression = f"({expression} {rng.choice('+-*%')} {rng.randint(2, 12)})"
    return f"y = {expression[1:-1]}"


def make_item(rng: random.Random, form: str) -> Item:
    kind = rng.random()
    if kind < 1 / 3:
        text = _record(rng) if rng.random() < 0.5 else _expression(rng)
        return Item(key=f"copy/{text}", user=f"Copy: {text}", answer=text, solution=text)
    if kind < 2 / 3:
        text = " ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(3, 8)))
        return Item(key=f"repeat/{text}", user=f"Repeat: {text}", answer=text, solution=text)
    options = rng.sample(VOCABULARY, 4)
    index = rng.randrange(4)
    listed = ", ".join(f"{o} ({'ABCD'[i]})" for i, o in enumerate(options))
    return Item(
        key=f"lookup/{listed}/{index}",
        user=f"Options: {listed}. Which letter is {options[index]}?",
        answer="ABCD"[index],
        solution="ABCD"[index],
    )


def lookup_drills(rng: random.Random, n: int) -> list[Item]:
    """The first n option-lookup drills `make_item` draws from `rng` (diagnostics score the
    lookup on drills no build has seen)."""
    drills = []
    while len(drills) < n:
        item = make_item(rng, "drill")
        if item.key.startswith("lookup/"):
            drills.append(item)
    return drills


register_domain(
    "copying",
    make_item,
    verifiers={"drill": "exact_text"},
    descriptions={
        "drill": "warm-up only: repeat words, a record or an expression; look up an option letter"
    },
)
