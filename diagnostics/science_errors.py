"""What the embedded science answers get wrong: the fact, or the letter of the option that
holds it.

A science_id item asks for an attribute of an invented substance among four options
(`What is the color of velorite? Options: red (A), green (B), ...`); the reference writes the
fact, then the letter (`<reasoning>The color of velorite is green (B).</reasoning>
<answer>B</answer>`). For each checkpoint, on the first `--n` items, greedy and `--k` samples at
temperature 1:
- the fact: is the true value the first option value the reasoning names?
- the answer category: correct; the stated value's letter where that value is wrong (a wrong
  fact, consistently answered); a letter other than the stated value's (a binding error: the
  fact was not carried to its letter); no stated option value; no `<answer>` letter.
RL can sharpen what samples already contain: a base whose right facts are bound to wrong
letters has reachable errors; one that states wrong facts at chance has none.
It also scores the warm-up's option-lookup drill (`Options: gas (A), Lima (B), 7 (C), blue (D).
Which letter is 7?`, cptlab.domains.embedded.copying) on fresh drills, which no build has seen:
the lookup the science answer needs, without the fact.

    .venv/bin/python diagnostics/science_errors.py --data results/embedded/data/science_id.jsonl \
        results/embedded/base
"""

from __future__ import annotations

import argparse
import random
import re
from collections import Counter

import torch

from cptlab.checkpoints import load_checkpoint
from cptlab.domains.embedded.copying import lookup_drills
from cptlab.evaluation.generation import generate
from cptlab.evaluation.settings import Sampling
from cptlab.rows import read_jsonl

LETTERS = "ABCD"
ANSWER = re.compile(r"<answer>\s*([A-D])\s*</answer>")


def stated_value(row: dict, completion: str) -> str | None:
    """The first option value the completion's reasoning names (before its answer tag)."""
    reasoning = completion.split("<answer>", 1)[0]
    found = [
        (match.start(), value)
        for value in row["metadata"]["options"]
        for match in [re.search(rf"\b{re.escape(value)}\b", reasoning)]
        if match
    ]
    return min(found)[1] if found else None


def category(row: dict, completion: str) -> tuple[str, bool]:
    """(answer category, whether the stated fact is true)."""
    options = row["metadata"]["options"]
    truth = options[LETTERS.index(row["answer"])]
    value = stated_value(row, completion)
    letters = ANSWER.findall(completion)
    fact_right = value == truth
    if not letters:
        return "no answer letter", fact_right
    letter = letters[-1]
    if letter == row["answer"]:
        return "correct", fact_right
    if value is None:
        return "wrong, no option value stated", fact_right
    if letter == LETTERS[options.index(value)]:
        return "wrong fact, its letter", fact_right
    return "letter not the stated value's (binding)", fact_right


def report(name: str, rows: list[dict], greedy: list[list[str]], sampled: list[list[str]]) -> None:
    greedy_kinds = [category(r, outs[0]) for r, outs in zip(rows, greedy, strict=True)]
    sampled_kinds = [[category(r, c) for c in outs] for r, outs in zip(rows, sampled, strict=True)]
    k = len(sampled[0])
    facts = sum(fact for _, fact in greedy_kinds)
    print(f"{name}: greedy over {len(rows)} items; the true fact stated in {facts}")
    for kind, count in Counter(kind for kind, _ in greedy_kinds).most_common():
        print(f"  {kind}: {count}")
    flat = [kind for kinds in sampled_kinds for kind in kinds]
    wrong = [i for i, (kind, _) in enumerate(greedy_kinds) if kind != "correct"]
    reachable = sum(any(kind == "correct" for kind, _ in sampled_kinds[i]) for i in wrong)
    print(
        f"  samples (k={k}, T=1): correct {sum(c == 'correct' for c, _ in flat) / len(flat):.3f},"
        f" true fact {sum(f for _, f in flat) / len(flat):.3f}; greedy-wrong items with a"
        f" correct sample: {reachable} of {len(wrong)}"
    )
    for kind, count in Counter(kind for kind, _ in flat).most_common():
        print(f"    {kind}: {count}")


def fresh_lookup_drills(n: int, seed: int) -> list[tuple[list[dict], str]]:
    """n option-lookup drills (prompt, letter) from a seed the data preparation never uses."""
    drills = lookup_drills(random.Random(f"science_errors/{seed}"), n)
    return [([{"role": "user", "content": d.user}], d.answer) for d in drills]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoints", nargs="+")
    parser.add_argument("--data", required=True, help="science_id.jsonl")
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--k", type=int, default=8, help="samples per item at temperature 1")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rows = read_jsonl(args.data)[: args.n]
    prompts = [r["prompt"] for r in rows]
    for checkpoint in args.checkpoints:
        model, tokenizer = load_checkpoint(checkpoint)
        greedy = generate(model, tokenizer, prompts, Sampling(1, 0.0, 1.0, 64), seed=0)
        sampled = generate(model, tokenizer, prompts, Sampling(args.k, 1.0, 1.0, 64), seed=0)
        report(checkpoint, rows, greedy, sampled)
        drills = fresh_lookup_drills(args.n, seed=0)
        answers = generate(model, tokenizer, [p for p, _ in drills], Sampling(1, 0.0, 1.0, 8))
        right = sum(a[0].strip() == letter for a, (_, letter) in zip(answers, drills, strict=True))
        print(f"  option-lookup drill, fresh items: {right} of {len(drills)} (chance 1/4)")


if __name__ == "__main__":
    main()
