"""Fact tables for the MCQ domains (science, knowledge), fixed by the world seed."""

from __future__ import annotations

import random
from functools import cache

from cptlab.domains.embedded.common import WORLD_SEED, syllable_names

SCIENCE_ATTRIBUTES = {
    "color": ("red", "blue", "green", "white", "black", "yellow", "purple", "gray"),
    "class": ("metal", "salt", "acid", "gas", "crystal", "oxide"),
    "source": ("Mars", "Venus", "Titan", "Europa", "Io", "Ceres"),
}
KNOWLEDGE_ATTRIBUTES = ("capital", "river", "language")


@cache
def science_table(n_substances: int = 24) -> dict[str, dict[str, str]]:
    """substance -> {attribute: value}."""
    rng = random.Random(f"science/{WORLD_SEED}")
    names = syllable_names(rng, n_substances, ("vel", "or", "ite", "zan", "mo", "lux", "ka", "dri"))
    return {
        name: {attr: rng.choice(values) for attr, values in SCIENCE_ATTRIBUTES.items()}
        for name in names
    }


@cache
def knowledge_table(n_countries: int = 20) -> tuple[dict[str, dict[str, str]], dict[str, list]]:
    """country -> {attribute: value}, and attribute -> pool of values."""
    rng = random.Random(f"knowledge/{WORLD_SEED}")
    countries = syllable_names(rng, n_countries, ("bra", "nor", "ta", "lin", "sev", "ku", "mar"))
    pools = {
        "capital": syllable_names(rng, 20, ("po", "ri", "dan", "fel", "gro", "sum"), (2,)),
        "river": syllable_names(rng, 12, ("ash", "el", "by", "ron", "wi"), (2,)),
        "language": syllable_names(rng, 10, ("ish", "ek", "al", "ona", "ti"), (2,)),
    }
    pools = {attr: [v.capitalize() for v in values] for attr, values in pools.items()}
    table = {
        country.capitalize(): {attr: rng.choice(pools[attr]) for attr in KNOWLEDGE_ATTRIBUTES}
        for country in countries
    }
    return table, pools


def options_with(rng: random.Random, correct: str, pool, k: int = 4) -> tuple[list[str], int]:
    """k shuffled options containing `correct`, and its index."""
    distractors = rng.sample([v for v in pool if v != correct], k - 1)
    options = distractors + [correct]
    rng.shuffle(options)
    return options, options.index(correct)
