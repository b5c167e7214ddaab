"""Which form does a math answer take, and which form does SDPO_0's teacher ask for?

A math answer is bare (`\\boxed{52}`), plain (`The answer is \\boxed{52}.`) or reasoned
(`The second largest is 52, so \\boxed{52}`); the reasoned one is the most often right. SDPO_0
strips the reasoning from its demonstrations, so its teacher sees `\\boxed{52}` whichever form
succeeded. Two measurements:
- `--responses`: from a results folder's evaluation responses (no model is loaded), per
  checkpoint, how many math_id answers (items without the off-convention cue) take each form,
  and how many of those are right.
- `--checkpoint`: the probability of each complete form (with the item's value, and its ranking
  in the reasoned one), normalised over the three, mean over the first `--n` such items: under
  the student, under the teacher shown the whole reasoned demonstration, the same stripped
  (SDPO_0's), and the plain one.

    .venv/bin/python diagnostics/math_answer_forms.py --responses results/study \
        base grpo/seed0/stage1 sdpo_frozen/seed0/stage1
    .venv/bin/python diagnostics/math_answer_forms.py --checkpoint results/study/base \
        --data results/study/data/math_id.jsonl --n 150
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import torch
from sdpo_signal import responses_or_checkpoint, token_logps

from cptlab.checkpoints import load_checkpoint
from cptlab.domains import get_benchmark
from cptlab.domains.embedded.math import PHRASINGS
from cptlab.rows import read_jsonl
from cptlab.teacher_prompt import teacher_messages

FORMS = ("bare", "plain", "reasoned")
REASONING = get_benchmark("math_train").reasoning  # the step SDPO_0 strips


def form_of(completion: str) -> str:
    text = completion.strip()
    if re.fullmatch(r"\\boxed\{[^}]*\}", text):
        return "bare"
    if text.startswith("The answer is \\boxed{"):
        return "plain"
    if re.match(REASONING + r"\\boxed\{", text):
        return "reasoned"
    return "other"


def ranking(row: dict) -> str:
    """The ranking the question asks for, from its phrasing."""
    question = row["prompt"][-1]["content"]
    for kind, phrasings in PHRASINGS.items():
        if any(question.startswith(p.split("{l}")[0]) for p in phrasings):
            return kind
    raise ValueError(f"{row['id']}: no math phrasing matches {question!r}")


def uncued(rows: list[dict]) -> list[dict]:
    return [r for r in rows if not r["metadata"].get("off_format_cue")]


def responses_table(results: Path, checkpoints: list[str]) -> None:
    rows = {r["id"]: r for r in uncued(read_jsonl(results / "data" / "math_id.jsonl"))}
    print("checkpoint | " + " | ".join(f"{f} (right)" for f in (*FORMS, "other")))
    for checkpoint in checkpoints:
        counts, right = Counter(), Counter()
        path = results / "eval" / checkpoint / "math_id.responses.jsonl"
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if record["id"] not in rows:
                continue
            form = form_of(record["completions"][0])
            counts[form] += 1
            right[form] += record["rewards"][0] == 1.0
        cells = [f"{counts[f]} ({right[f]})" for f in (*FORMS, "other")]
        print(f"{checkpoint} | " + " | ".join(cells))


def forms_table(checkpoint: str, data: str, n: int) -> None:
    model, tokenizer = load_checkpoint(checkpoint)
    share = {context: Counter() for context in ("student", "whole", "stripped", "plain")}
    items = uncued(list(read_jsonl(data)))[:n]
    for row in items:
        value = row["answer"]
        answers = {
            "bare": f"\\boxed{{{value}}}",
            "plain": f"The answer is \\boxed{{{value}}}.",
            "reasoned": f"The {ranking(row)} is {value}, so \\boxed{{{value}}}",
        }
        contexts = {
            "student": row["prompt"],
            "whole": teacher_messages(row["prompt"], answers["reasoned"]),
            "stripped": teacher_messages(row["prompt"], answers["bare"]),
            "plain": teacher_messages(row["prompt"], answers["plain"]),
        }
        for context, messages in contexts.items():
            logps = torch.tensor(
                [token_logps(model, tokenizer, messages, answers[f])[0].sum() for f in FORMS]
            )
            for form, p in zip(FORMS, torch.softmax(logps, 0).tolist(), strict=True):
                share[context][form] += p / len(items)
    print(f"{len(items)} items | " + " | ".join(FORMS))
    for context, shares in share.items():
        print(f"{context} | " + " | ".join(f"{shares[f]:.3f}" for f in FORMS))


def main() -> None:
    responses_or_checkpoint(__doc__, responses_table, forms_table, n=150)


if __name__ == "__main__":
    main()
