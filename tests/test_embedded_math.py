"""The embedded math domain: the largest, smallest, second largest or second smallest of a list
of 2-digit numbers."""

import re
from collections import Counter

import pytest

from cptlab.domains import load_benchmark
from cptlab.verifiers import score


@pytest.mark.parametrize("benchmark,count", [("math_id", 5), ("math_ood", 8)])
def test_answer_is_the_asked_rank_of_the_listed_numbers(benchmark, count):
    kinds = Counter()
    for row in load_benchmark(benchmark, n=80, seed=0):
        question = row["prompt"][-1]["content"]
        numbers = [int(n) for n in re.findall(r"\b\d+\b", question)]
        assert len(numbers) == count == len(set(numbers)), question
        assert all(10 <= n <= 99 for n in numbers), question
        wants_max = any(w in question for w in ("largest", "maximum", "greatest", "highest"))
        wants_min = any(w in question for w in ("smallest", "minimum", "least", "lowest"))
        assert wants_max != wants_min, question
        rank = 1 if "second" in question else 0
        kinds[wants_max, rank] += 1
        assert int(row["answer"]) == sorted(numbers, reverse=wants_max)[rank], question
    assert set(kinds) == {(True, 0), (True, 1), (False, 0), (False, 1)}, kinds


def test_gold_solutions_score_one_and_off_format_answers_zero():
    for row in load_benchmark("math_id", n=30, seed=0):
        assert score("math_boxed", row["metadata"]["solution"], row).reward == 1.0
        assert score("math_boxed", row["metadata"]["off_format"], row).reward == 0.0
