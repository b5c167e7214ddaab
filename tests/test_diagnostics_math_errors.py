"""diagnostics/math_errors.py sorts greedy math answers into the categories the README reports."""

import importlib.util
from pathlib import Path

import pytest

from cptlab.base_model.tokenizer import train_tokenizer

SCRIPT = Path(__file__).parents[1] / "diagnostics" / "math_errors.py"
spec = importlib.util.spec_from_file_location("math_errors", SCRIPT)
math_errors = importlib.util.module_from_spec(spec)
spec.loader.exec_module(math_errors)

ROW = {
    "prompt": [{"role": "user", "content": "What is the second largest of 47, 38, 12, 90 and 52? "
                "Put the final answer in \\boxed{}."}],
    "answer": "52",
}  # fmt: skip


@pytest.mark.parametrize(
    "completion,category",
    [
        ("\\boxed{52}", "correct"),
        ("The answer is \\boxed{1}. The answer is \\boxed{52}.", "correct"),  # the last box counts
        ("\\boxed{90}", "neighbouring rank"),
        ("\\boxed{47}", "neighbouring rank"),
        ("\\boxed{12}", "another operand"),
        ("\\boxed{57}", "right tens, wrong units"),
        ("\\boxed{93}", "other number"),
        ("52", "no boxed answer"),
    ],
)
def test_answer_category(completion, category):
    assert math_errors.answer_category(ROW, completion) == category


def test_operands_are_the_question_numbers_not_the_instruction():
    assert math_errors.operands(ROW) == ["47", "38", "12", "90", "52"]


@pytest.mark.parametrize("max_digits,spelled", [(1, True), (3, False)])
def test_copy_probe_runs_only_where_numbers_are_spelled_digit_by_digit(max_digits, spelled):
    texts = ["What is the largest of 47, 38 and 52? \\boxed{52}"] * 50
    tokenizer = train_tokenizer(texts, 400, split_words=False, max_digits_per_token=max_digits)
    assert math_errors.spells_digits(tokenizer) is spelled
