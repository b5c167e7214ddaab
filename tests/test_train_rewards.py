"""The reward function tells the verifiers which completions were truncated, as the study does
(verl/workers/reward_manager/naive.py:84 @ d277934: no end token among the response's ids)."""

from __future__ import annotations

import pytest

from cptlab.train.rewards import VerifierReward
from cptlab.verifiers import score
from cptlab.verifiers.study import STUDY_MATH_FORMAT_FEEDBACK, STUDY_MATH_TRUNCATED_FEEDBACK

EOS, OTHER_END = 7, 8  # the tokenizer's end token, and another of the generation config's


def math_rows() -> list[dict]:
    return [{"id": "m0", "benchmark": "x", "answer": "34", "metadata": {"verifier": "study_math"}}]


def call(reward: VerifierReward, texts: list[str], ids: list[list[int]] | None) -> list[float]:
    completions = [[{"role": "assistant", "content": t}] for t in texts]
    extra = {} if ids is None else {"completion_ids": ids}
    return reward(prompts=[None] * len(texts), completions=completions,
                  row_index=[0] * len(texts), **extra)  # fmt: skip


def test_a_completion_without_the_end_token_is_truncated() -> None:
    reward = VerifierReward(math_rows(), eos_token_id=EOS)
    texts = ["\\boxed{34}", "\\boxed{34}", "no box", "no box", "\\boxed{34}"]
    ids = [[1, 2, EOS], [1, 2, 3], [1, EOS], [1, 2], [1, OTHER_END]]
    # truncation changes the feedback only, never the reward
    assert call(reward, texts, ids) == [1.0, 1.0, 0.0, 0.0, 1.0]
    assert reward.feedback_for_last() == [
        None,
        STUDY_MATH_TRUNCATED_FEEDBACK,  # right, but cut: the study still says so
        STUDY_MATH_FORMAT_FEEDBACK,
        STUDY_MATH_TRUNCATED_FEEDBACK,  # the format text only when not truncated
        STUDY_MATH_TRUNCATED_FEEDBACK,  # ended on another end token: not the tokenizer's
    ]


def test_without_an_end_token_id_nothing_is_truncated() -> None:
    reward = VerifierReward(math_rows())
    assert call(reward, ["\\boxed{34}", "no box"], None) == [1.0, 0.0]
    assert reward.feedback_for_last() == [None, STUDY_MATH_FORMAT_FEEDBACK]


def test_missing_completion_ids_are_an_error_naming_them() -> None:
    reward = VerifierReward(math_rows(), eos_token_id=EOS)
    with pytest.raises(ValueError, match="completion_ids for 2 completions, got none"):
        call(reward, ["a", "b"], None)
    with pytest.raises(ValueError, match="completion_ids for 2 completions, got 1"):
        call(reward, ["a", "b"], [[EOS]])


TRUNCATION_CASES = [  # (verifier, completion, row)
    ("study_math", "So \\boxed{34}", math_rows()[0]),
    ("study_math", "no box", math_rows()[0]),
    ("study_code", "no code", {"metadata": {"tests": [{"input": "1\n", "output": "1\n"}]}}),
    ("study_code", "```python\nprint(input())\n```", {"metadata": {"tests": [
        {"input": "1\n", "output": "1\n"}, {"input": "2\n", "output": "3\n"}]}}),
]  # fmt: skip


@pytest.mark.parametrize(("verifier", "completion", "row"), TRUNCATION_CASES)
def test_truncation_never_changes_a_reward_or_a_pass_fraction(
    verifier: str, completion: str, row: dict
) -> None:
    """Why evaluation scores every completion as finished (evaluation/evaluate.py)."""
    cut, whole = (score(verifier, completion, row, truncated=t) for t in (True, False))
    assert (cut.reward, cut.test_pass_fraction) == (whole.reward, whole.test_pass_fraction)
