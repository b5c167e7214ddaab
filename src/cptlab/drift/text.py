"""Tokenization and n-gram helpers shared by the response-drift and collapse analyses.

One deterministic word-level tokenizer for every lexical measure, so ROUGE-L, repetition rates and
n-gram counts of the same text agree. LaTeX commands (`\\boxed`) stay one token: a repeated
`\\boxed` is the artifact the collapse analysis looks for.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

_TOKEN = re.compile(r"\\[A-Za-z]+|\w+|[^\w\s]")


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens: LaTeX commands, runs of word characters, single punctuation marks.

    Whitespace is dropped, so the measures built on it ignore reformatting.
    """
    return _TOKEN.findall(text.lower())


def ngrams(tokens: Sequence[str], n: int) -> list[tuple[str, ...]]:
    """The consecutive n-grams of `tokens` (empty when there are fewer than n tokens)."""
    if n < 1:
        raise ValueError(f"n-gram size must be >= 1, got {n}")
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def repetition_rate(tokens: Sequence[str], n: int) -> float:
    """1 - distinct n-grams / n-grams: 0 when no n-gram repeats, -> 1 for a loop. 0 when the
    text has no n-gram at all."""
    grams = ngrams(tokens, n)
    return 1.0 - len(set(grams)) / len(grams) if grams else 0.0


def top_ngram_share(tokens: Sequence[str], n: int) -> float:
    """Share of the text's n-grams taken by its most frequent n-gram (0 without n-grams)."""
    grams = ngrams(tokens, n)
    if not grams:
        return 0.0
    return Counter(grams).most_common(1)[0][1] / len(grams)
