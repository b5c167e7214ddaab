"""The embedded math domain: the largest or smallest of a list of 2-digit numbers."""

import re

import pytest

from cptlab.domains import load_benchmark
from cptlab.verifiers import score


@pytest.mark.parametrize("benchmark,count", [("math_id", 3), ("math_ood", 5)])
def test_answer_is_the_asked_extreme_of_the_listed_numbers(benchmark, count):
    for row in load_benchmark(benchmark, n=60, seed=0):
        question = row["prompt"][-1]["content"]
        numbers = [int(n) for n in re.findall(r"\b\d+\b", question)]
        assert len(numbers) == count == len(set(numbers)), question
        assert all(10 <= n <= 99 for n in numbers), question
        wants_max = any(w in question for w in ("largest", "maximum", "greatest"))
        wants_min = any(w in question for w in ("smallest", "minimum", "least"))
        assert wants_max != wants_min, question
        assert int(row["answer"]) == (max(numbers) if wants_max else min(numbers)), question


def test_gold_solutions_score_one_and_off_format_answers_zero():
    for row in load_benchmark("math_id", n=30, seed=0):
        assert score("math_boxed", row["metadata"]["solution"], row).reward == 1.0
        assert score("math_boxed", row["metadata"]["off_format"], row).reward == 0.0
