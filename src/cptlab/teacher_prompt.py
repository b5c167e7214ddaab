"""The SDPO teacher prompt: the student's prompt re-asked with a successful demonstration and,
optionally, environment feedback. The templates are TRL's SDPOConfig defaults, so the embedded
base model learns the exact form its SDPO teacher will see."""

from __future__ import annotations

import re

REPROMPT_TEMPLATE = "{prompt}{solution}{feedback}\n\nCorrectly solve the original question.\n"
SOLUTION_TEMPLATE = "\nCorrect solution:\n\n{successful_previous_attempt}\n\n"
FEEDBACK_TEMPLATE = (
    "\nThe following is feedback from your unsuccessful earlier attempt:\n\n{feedback_raw}\n\n"
)


def strip_thinking(text: str) -> str:
    return re.sub(r"<think>.*?</think>", "", text, flags=re.DOTALL).strip()


def teacher_messages(
    prompt: list[dict],
    demonstration: str | None,
    feedback: str | None = None,
    keep_thinking: bool = False,
) -> list[dict]:
    """The teacher's chat messages, built exactly as TRL's SDPO builds them."""
    solution = ""
    if demonstration is not None:
        demo = demonstration if keep_thinking else strip_thinking(demonstration)
        solution = SOLUTION_TEMPLATE.format(successful_previous_attempt=demo)
    feedback_text = FEEDBACK_TEMPLATE.format(feedback_raw=feedback) if feedback else ""
    user = REPROMPT_TEMPLATE.format(
        prompt=prompt[-1]["content"], solution=solution, feedback=feedback_text
    )
    return [*prompt[:-1], {"role": "user", "content": user}]
