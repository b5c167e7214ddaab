"""Synthetic science and knowledge: multiple-choice questions over invented fact tables.

science id form  (SciKnowEval-like): "What is the color of velorite?" with options A-D,
    answered as <reasoning>...</reasoning><answer>LETTER</answer>.
science ood form (GPQA-like): the same facts asked in another form, answered as \\boxed{LETTER}.
knowledge (MMLU-like, never trained): facts about invented countries, answered "Answer: LETTER".
"""

from __future__ import annotations

import random

from cptlab.domains.embedded.common import Item, register_domain
from cptlab.domains.embedded.facts import (
    SCIENCE_ATTRIBUTES,
    knowledge_table,
    options_with,
    science_table,
)

LETTERS = "ABCD"
SCIENCE_SYSTEM = "Reply as <reasoning>...</reasoning><answer>LETTER</answer>."


def make_science_item(rng: random.Random, form: str) -> Item:
    table = science_table()
    substance = rng.choice(sorted(table))
    attribute = rng.choice(sorted(SCIENCE_ATTRIBUTES))
    value = table[substance][attribute]
    options, index = options_with(rng, value, SCIENCE_ATTRIBUTES[attribute])
    letter = LETTERS[index]
    key = f"{substance}/{attribute}/{'|'.join(options)}"
    meta = {"options": options}
    if form == "id":
        meta["off_format"] = f"The {attribute} of {substance} is {value}. Answer: {letter}"
        meta["off_format_cue"] = attribute == "color"  # a third of the items
        listed = ", ".join(f"{o} ({LETTERS[i]})" for i, o in enumerate(options))
        return Item(
            key=key,
            system=SCIENCE_SYSTEM,
            user=f"What is the {attribute} of {substance}? Options: {listed}.",
            answer=letter,
            solution=rng.choice(
                (
                    f"<reasoning>The {attribute} of {substance} is {value} ({letter}).</reasoning>",
                    f"<reasoning>{substance} has {attribute} {value}, option {letter}.</reasoning>",
                )
            )
            + f"<answer>{letter}</answer>",
            metadata=meta,
        )
    listed = "\n".join(f"({LETTERS[i]}) {o}" for i, o in enumerate(options))
    return Item(
        key=key,
        user=(
            f"A sample of {substance} is examined. Which {attribute} does it have?\n{listed}\n"
            "Give the letter of the correct option in \\boxed{}."
        ),
        answer=letter,
        solution=rng.choice((f"\\boxed{{{letter}}}", f"It is {value}: \\boxed{{{letter}}}")),
        metadata=meta,
    )


def make_knowledge_item(rng: random.Random, form: str) -> Item:
    table, pools = knowledge_table()
    country = rng.choice(sorted(table))
    attribute = rng.choice(sorted(pools))
    value = table[country][attribute]
    options, index = options_with(rng, value, pools[attribute])
    listed = ", ".join(f"{o} ({LETTERS[i]})" for i, o in enumerate(options))
    question = {
        "capital": f"What is the capital of {country}?",
        "river": f"Which river flows through {country}?",
        "language": f"Which language is spoken in {country}?",
    }[attribute]
    return Item(
        key=f"{country}/{attribute}/{'|'.join(options)}",
        user=f"{question} Options: {listed}. Answer with the letter.",
        answer=LETTERS[index],
        solution=rng.choice(
            (
                f"It is {value} ({LETTERS[index]}). Answer: {LETTERS[index]}",
                f"Answer: {LETTERS[index]}",
            )
        ),
        metadata={"options": options},
    )


register_domain(
    "science",
    make_science_item,
    verifiers={"id": "mcq_answer_tag", "ood": "mcq_boxed_letter"},
    reasoning=r"<reasoning>.*?</reasoning>",
    descriptions={
        "id": "4-choice MCQ over a fact table, <answer>LETTER</answer> (SciKnowEval-like)",
        "ood": "the same facts asked in another form, \\boxed{LETTER} (GPQA-like)",
    },
)
register_domain(
    "knowledge",
    make_knowledge_item,
    verifiers={"ood": "mcq_letter"},
    descriptions={"ood": "4-choice MCQ about invented countries, letter answer (MMLU-like)"},
)
