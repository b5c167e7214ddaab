"""Synthetic code: small integer programs described in words, checked by running them.

id form (Dolci-like): "Write a Python function f(x) that returns x plus four, then times three."
    scored by unit tests (assert statements) run in the sandbox.
ood form (LiveCodeBench-like): the same arithmetic as a stdin/stdout program.
"""

from __future__ import annotations

import random

from cptlab.domains.embedded.common import Item, number_word, register_domain

STEPS = (
    ("plus {n}", "{e} + {n}"),
    ("minus {n}", "{e} - {n}"),
    ("times {n}", "{e} * {n}"),
    ("modulo {n}", "{e} % {n}"),
    ("integer-divided by {n}", "{e} // {n}"),
    ("squared", "{e} * {e}"),
    ("doubled", "{e} * 2"),
    ("negated", "-({e})"),
    ("at least {n}", "max({e}, {n})"),
    ("at most {n}", "min({e}, {n})"),
)
FUNCTION_NAMES = ("f", "g", "calc", "transform")
TEST_INPUTS = (0, 1, 3, 7, 12, -4)


def _program(rng: random.Random) -> tuple[str, str]:
    """(description, Python expression in x), one to three steps applied in order."""
    words, expression = ["x"], "x"
    for step in range(rng.choice((1, 2, 2, 3))):
        text, template = rng.choice(STEPS)
        n = rng.randint(2, 12)
        operand = f"({expression})" if step else expression
        expression = template.format(e=operand, n=n)
        words.append(("then " if step else "") + text.format(n=number_word(n)))
    return ", ".join([" ".join(words[:2])] + words[2:]), expression


def make_item(rng: random.Random, form: str) -> Item:
    description, expression = _program(rng)
    inputs = rng.sample(TEST_INPUTS, 4 if form == "id" else 3)
    evaluate = lambda x: eval(expression, {"x": x})  # noqa: E731,S307  (our own expression)
    if form == "id":
        name = rng.choice(FUNCTION_NAMES)
        return Item(
            key=f"{name}:{expression}",
            user=f"Write a Python function {name}(x) that returns {description}.",
            answer=f"def {name}(x):\n    return {expression}",
            solution=rng.choice(
                (
                    f"```python\ndef {name}(x):\n    return {expression}\n```",
                    f"```python\ndef {name}(x):\n    y = {expression}\n    return y\n```",
                    f"def {name}(x):\n    return {expression}",
                )
            ),
            metadata={
                "tests": [f"assert {name}({x}) == {evaluate(x)}" for x in inputs],
                "off_format": f"x = int(input())\nprint({expression})",
                "off_format_cue": name in ("calc", "transform"),
            },
        )
    return Item(
        key=expression,
        user=(
            "Write a Python program that reads an integer x from standard input and prints "
            f"{description}."
        ),
        answer=f"x = int(input())\nprint({expression})",
        solution=rng.choice(
            (
                f"```python\nx = int(input())\nprint({expression})\n```",
                f"x = int(input())\nprint({expression})",
            )
        ),
        metadata={"tests": [{"input": f"{x}\n", "output": f"{evaluate(x)}\n"} for x in inputs]},
    )


register_domain(
    "code",
    make_item,
    verifiers={"id": "python_unit_tests", "ood": "stdio_tests"},
    descriptions={
        "id": "one- or two-step integer function from a description, unit tests (Dolci-like)",
        "ood": "the same arithmetic as a stdin/stdout program (LiveCodeBench-like)",
    },
)
