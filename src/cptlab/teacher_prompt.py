"""The SDPO teacher prompt: the student's prompt re-asked with a successful demonstration and,
optionally, environment feedback. Two template sets (`methods.<name>.teacher_templates`):
"trl", TRL's SDPOConfig defaults, which the embedded base model learns so that its SDPO teacher
sees a form it knows; and "study", the study's."""

from __future__ import annotations

import re

REPROMPT_TEMPLATE = "{prompt}{solution}{feedback}\n\nCorrectly solve the original question.\n"
SOLUTION_TEMPLATE = "\nCorrect solution:\n\n{successful_previous_attempt}\n\n"
FEEDBACK_TEMPLATE = (
    "\nThe following is feedback from your unsuccessful earlier attempt:\n\n{feedback_raw}\n\n"
)

# The study's templates: its Hydra block scalars (`|-`, no trailing newline) in Moenupa/SDPO-CL,
# verl/trainer/config/actor/actor.yaml (self_distillation.reprompt_template, solution_template,
# feedback_template).
STUDY_REPROMPT_TEMPLATE = "{prompt}{solution}{feedback}\n\nCorrectly solve the original question."
STUDY_SOLUTION_TEMPLATE = "\nCorrect solution:\n\n{successful_previous_attempt}"
STUDY_FEEDBACK_TEMPLATE = (
    "\nThe following is feedback from your unsuccessful earlier attempt:\n\n{feedback_raw}"
)

# (reprompt, solution, feedback) templates by name.
TEACHER_TEMPLATES = {
    "trl": (REPROMPT_TEMPLATE, SOLUTION_TEMPLATE, FEEDBACK_TEMPLATE),
    "study": (STUDY_REPROMPT_TEMPLATE, STUDY_SOLUTION_TEMPLATE, STUDY_FEEDBACK_TEMPLATE),
}


def strip_thinking(text: str, unopened: bool = False) -> str:
    """TRL's removal of `<think>...</think>` blocks; with `unopened`, also the study's second
    rule: a `</think>` without an opening tag ends reasoning that began at the start
    (Moenupa/SDPO-CL, verl/trainer/ppo/ray_trainer.py, `_remove_thinking_trace`)."""
    text = re.sub(r"<think>.*?</think>", "", text, flags=re.DOTALL).strip()
    return strip_unopened_thinking(text) if unopened else text


def strip_unopened_thinking(text: str) -> str:
    return re.sub(r"^.*?</think>\s*", "", text, flags=re.DOTALL)


def strip_reasoning(text: str, pattern: str) -> str:
    """Delete every match of a domain's reasoning pattern (`Benchmark.reasoning`): the
    counterpart of a `<think>` block in formats that reason without one."""
    return re.sub(pattern, "", text, flags=re.DOTALL).strip()


def teacher_messages(
    prompt: list[dict],
    demonstration: str | None,
    feedback: str | None = None,
    keep_thinking: bool = False,
    templates: str = "trl",
) -> list[dict]:
    """The teacher's chat messages, built exactly as TRL's SDPO builds them from `templates`."""
    reprompt_template, solution_template, feedback_template = TEACHER_TEMPLATES[templates]
    solution = ""
    if demonstration is not None:
        demo = (
            demonstration
            if keep_thinking
            else strip_thinking(demonstration, unopened=templates == "study")
        )
        solution = solution_template.format(successful_previous_attempt=demo)
    feedback_text = feedback_template.format(feedback_raw=feedback) if feedback else ""
    user = reprompt_template.format(
        prompt=prompt[-1]["content"], solution=solution, feedback=feedback_text
    )
    return [*prompt[:-1], {"role": "user", "content": user}]
