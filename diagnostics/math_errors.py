"""What the embedded math answers get wrong, and whether the model can copy a number's second
digit once it has the first.

For each checkpoint, greedy on the first `--n` items of math_id:
- answer categories: correct; the operand ranked next to the answer (the largest where the
  second largest was asked, or the third); another number of the question; the answer's tens
  digit with a wrong units digit; other numbers; no `\\boxed{}`;
- the copy probe, for tokenizers that spell a number digit by digit (`max_digits_per_token: 1`;
  with 3 a 2-digit number is one token and there is no second digit to copy): the prompt, then
  `\\boxed{` and the answer's tens digit given (teacher forcing); is the next greedy token the
  answer's units digit, another operand's units digit, or something else? A model that finds
  the tens digit in the question and copies the digit after it (an induction head) scores near
  1; one that guesses among the operands' units digits scores near 1/3.

    .venv/bin/python diagnostics/math_errors.py --data results/embedded/data/math_id.jsonl \
        results/embedded/base results/embedded/runs/grpo/seed0/stage1_math
"""

from __future__ import annotations

import argparse
import re
from collections import Counter

import torch

from cptlab.checkpoints import load_checkpoint
from cptlab.evaluation.generation import generate
from cptlab.evaluation.settings import Sampling
from cptlab.rows import read_jsonl
from cptlab.verifiers.math import last_boxed, normalize_answer


def operands(row: dict) -> list[str]:
    return re.findall(r"\b\d\d\b", row["prompt"][-1]["content"])


def answer_category(row: dict, completion: str) -> str:
    boxed = last_boxed(completion)  # what the math_boxed verifier reads
    if boxed is None:
        return "no boxed answer"
    value, answer = normalize_answer(boxed), row["answer"]
    if value == answer:
        return "correct"
    ranked = sorted(operands(row), key=int)
    if value in ranked:
        distance = abs(ranked.index(value) - ranked.index(answer))
        return "neighbouring rank" if distance == 1 else "another operand"
    if len(value) == 2 and value[0] == answer[0]:
        return "right tens, wrong units"
    return "other number"


def spells_digits(tokenizer) -> bool:
    return len(tokenizer("47", add_special_tokens=False)["input_ids"]) == 2


@torch.no_grad()
def copy_probe(model, tokenizer, row: dict) -> str:
    answer = row["answer"]
    prefix = tokenizer.apply_chat_template(
        row["prompt"], tokenize=False, add_generation_prompt=True
    )
    ids = tokenizer(prefix + "\\boxed{" + answer[0], return_tensors="pt", add_special_tokens=False)
    token = tokenizer.decode([int(model(**ids).logits[0, -1].argmax())]).strip()
    if token == answer[1]:
        return "units copied"
    if token in [n[1] for n in operands(row) if n != answer]:
        return "another operand's units"
    return "other"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoints", nargs="+")
    parser.add_argument("--data", default="results/embedded/data/math_id.jsonl")
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rows = read_jsonl(args.data)[: args.n]
    for path in args.checkpoints:
        model, tokenizer = load_checkpoint(path)
        model.eval()
        completions = generate(
            model, tokenizer, [r["prompt"] for r in rows], Sampling(n=1, temperature=0.0)
        )
        answers = Counter(answer_category(r, c[0]) for r, c in zip(rows, completions, strict=True))
        print(f"{path} ({len(rows)} items)")
        print("  greedy answers:", dict(answers.most_common()))
        if spells_digits(tokenizer):
            copies = Counter(copy_probe(model, tokenizer, r) for r in rows)
            print("  copy probe:    ", dict(copies.most_common()))


if __name__ == "__main__":
    main()
