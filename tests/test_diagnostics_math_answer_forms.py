"""diagnostics/math_answer_forms.py sorts math answers by form and recovers each question's
ranking, which its reasoned answer names."""

import importlib.util
import sys
from pathlib import Path

import pytest

from cptlab.domains import load_benchmark

DIAGNOSTICS = Path(__file__).parents[1] / "diagnostics"
sys.path.insert(0, str(DIAGNOSTICS))  # the script imports its sibling sdpo_signal
spec = importlib.util.spec_from_file_location(
    "math_answer_forms", DIAGNOSTICS / "math_answer_forms.py"
)
math_answer_forms = importlib.util.module_from_spec(spec)
spec.loader.exec_module(math_answer_forms)


@pytest.mark.parametrize(
    "completion,form",
    [
        ("\\boxed{52}", "bare"),
        (" \\boxed{52}\n", "bare"),
        ("The answer is \\boxed{52}.", "plain"),
        ("The second largest is 52, so \\boxed{52}", "reasoned"),
        ("The smallest is 12, so \\boxed{13}", "reasoned"),  # the form, right or not
        ("The answer is 52.", "other"),
        ("52", "other"),
        ("\\boxed{52} \\boxed{52}", "other"),
    ],
)
def test_form_of(completion, form):
    assert math_answer_forms.form_of(completion) == form


def test_ranking_is_the_one_each_reasoned_reference_names():
    rows = load_benchmark("math_id", n=200, seed=0)
    reasoned = [
        r for r in rows if math_answer_forms.form_of(r["metadata"]["solution"]) == "reasoned"
    ]
    assert len(reasoned) > 50
    for row in reasoned:
        assert row["metadata"]["solution"].startswith(f"The {math_answer_forms.ranking(row)} is ")
    assert {math_answer_forms.ranking(r) for r in rows} == set(math_answer_forms.PHRASINGS)
