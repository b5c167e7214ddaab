"""Shared machinery of the synthetic domains: deterministic item streams split into disjoint
buckets, and the registration helper.

Every synthetic item has a canonical `key` (e.g. "47+38"). A hash of the key assigns it to one
bucket, so the evaluation, training and warm-up splits never share an item, whatever their
sizes and seeds:

    buckets 0-1 -> evaluation ("id" or "ood" test)   2-4 -> RL training   5-9 -> warm-up
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from cptlab.domains.registry import Benchmark, register_benchmark
from cptlab.errors import InputError

BUCKETS = {"id": range(0, 2), "ood": range(0, 2), "train": range(2, 5), "pretrain": range(5, 10)}
# World facts (fact tables, tool catalogues) are fixed like a real dataset's content; the
# `seed` of a split only chooses which items are drawn.
WORLD_SEED = 20260711


@dataclass(frozen=True)
class Item:
    """One synthetic problem before it becomes a canonical row.

    `solution` is one of several equivalent surface forms of the gold answer, drawn at random.
    The variety matters for the base model: in SDPO's reprompt form the target is the
    demonstration's exact form, which the question alone cannot predict, so the warm-up teaches
    the model to use a demonstration in every domain (and sampling has several right forms)."""

    key: str
    user: str
    answer: str
    solution: str
    system: str | None = None
    metadata: dict = field(default_factory=dict)


MakeItem = Callable[[random.Random, str], Item]


def bucket_of(key: str) -> int:
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % 10


def generate_rows(
    benchmark: str,
    domain: str,
    split: str,
    forms: tuple[str, ...],
    make_item: MakeItem,
    n: int,
    seed: int,
) -> list[dict]:
    """Draw `n` distinct items of the given forms (cycled) whose keys fall in `split`'s bucket."""
    rng = random.Random(f"{benchmark}/{seed}")
    bucket = BUCKETS[split]
    rows: list[dict] = []
    seen: set[str] = set()
    misses = 0  # draws since the last new item: many in a row means the space is exhausted
    while len(rows) < n:
        misses += 1
        if misses > 20_000:
            raise InputError(
                f"benchmark {benchmark}: only {len(rows)} distinct items found for n={n}; "
                "the item space of this domain is too small for that many rows"
            )
        form = forms[len(rows) % len(forms)]
        item = make_item(rng, form)
        full_key = f"{domain}/{form}/{item.key}"
        if full_key in seen or bucket_of(full_key) not in bucket:
            continue
        seen.add(full_key)
        misses = 0
        prompt = [{"role": "system", "content": item.system}] if item.system else []
        prompt.append({"role": "user", "content": item.user})
        rows.append(
            {
                "id": f"{benchmark}-{len(rows):05d}",
                "domain": domain,
                "benchmark": benchmark,
                "prompt": prompt,
                "answer": item.answer,
                "metadata": {**item.metadata, "form": form, "solution": item.solution},
            }
        )
    return rows


def register_domain(
    domain: str,
    make_item: MakeItem,
    verifiers: dict[str, str],
    descriptions: dict[str, str],
    reasoning: str | None = None,
) -> None:
    """Register a synthetic domain's splits.

    `verifiers` maps a form ("id", "ood") to its verifier. `reasoning` is the pattern of the
    reasoning in the id form's answers (`Benchmark.reasoning`), given to the train benchmark,
    whose rollouts are SDPO's demonstrations. A domain with an "id" form gets
    <domain>_train, <domain>_id and, if it has an "ood" form, <domain>_ood; one with only an
    "ood" form (never trained) gets <domain>_ood. Every domain gets <domain>_pretrain, the
    warm-up mixture of all its forms, whose rows carry their form's verifier in metadata.
    """
    forms = tuple(verifiers)
    splits = [("train", "id"), ("id", "id"), ("ood", "ood")]  # a "drill" form is warm-up only
    for split, form in splits:
        if form not in verifiers:
            continue
        name = f"{domain}_{split}"
        register_benchmark(
            Benchmark(
                name=name,
                domain=domain,
                split=split,
                verifier=verifiers[form],
                loader=_loader(name, domain, split, (form,), make_item),
                description=descriptions[form],
                reasoning=reasoning if split == "train" else None,
            )
        )
    name = f"{domain}_pretrain"
    # The trained (id) form gets two thirds of a domain's warm-up rows, its ood form one third.
    mixture = ("id", "id", "ood") if "id" in verifiers and "ood" in verifiers else forms
    register_benchmark(
        Benchmark(
            name=name,
            domain=domain,
            split="pretrain",
            verifier=verifiers[forms[0]],
            loader=_loader(name, domain, "pretrain", mixture, make_item, verifiers),
            description=f"warm-up mixture of the {domain} forms {list(forms)}",
        )
    )


def _loader(name, domain, split, forms, make_item, verifiers=None):
    def load(n: int | None = None, seed: int = 0) -> list[dict]:
        if n is None:
            raise InputError(f"benchmark {name}: synthetic data needs a size n")
        rows = generate_rows(name, domain, split, forms, make_item, n, seed)
        if verifiers:
            for row in rows:
                row["metadata"]["verifier"] = verifiers[row["metadata"]["form"]]
        return rows

    return load


def syllable_names(rng: random.Random, count: int, syllables: tuple[str, ...], parts=(2, 3)):
    """`count` distinct invented words, e.g. 'velorite'."""
    names: list[str] = []
    while len(names) < count:
        word = "".join(rng.choice(syllables) for _ in range(rng.choice(parts)))
        if word not in names:
            names.append(word)
    return names


NUMBER_WORDS = (
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
)


def number_word(n: int) -> str:
    """Small numbers spelled out: the model must know them, not copy digits from the prompt."""
    return NUMBER_WORDS[n] if 0 <= n < len(NUMBER_WORDS) else str(n)
