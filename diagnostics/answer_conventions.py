"""Does a stage's gain come from answering in the requested convention, or from answering right?

Reads a results folder's evaluation responses (no model is loaded). For each checkpoint and id
benchmark of the embedded domains: the share of greedy answers in the convention the prompt
asks for (`\\boxed{}` for math, `<answer>` for science, a ReAct `Action:` line for tool, a
`def` for code), the accuracy, and the accuracy among the answers in that convention. A stage
that only teaches the convention raises the first and the second and leaves the third.

    .venv/bin/python diagnostics/answer_conventions.py results/study --methods grpo sdpo_frozen
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

REQUESTED = {
    "math_id": re.compile(r"\\boxed\{"),
    "science_id": re.compile(r"<answer>"),
    "tool_id": re.compile(r"(^|\n)Action:"),
    "code_id": re.compile(r"\bdef \w+\(x\)"),
}


def convention_table(responses: Path, pattern: re.Pattern) -> dict[str, float]:
    """n, share in the requested convention, accuracy, and accuracy within the convention."""
    n = in_convention = right = right_in_convention = 0
    for line in responses.read_text().splitlines():
        record = json.loads(line)
        for completion, reward in zip(record["completions"], record["rewards"], strict=True):
            follows = bool(pattern.search(completion))
            n += 1
            in_convention += follows
            right += reward
            right_in_convention += reward * follows
    return {
        "n": n,
        "requested_share": in_convention / n,
        "accuracy": right / n,
        "accuracy_in_convention": right_in_convention / in_convention if in_convention else 0.0,
    }


def evaluation_folders(results: Path, methods: list[str]) -> list[tuple[str, Path]]:
    found = [("base", results / "eval" / "base")]
    for method in methods:
        for seed_dir in sorted((results / "eval" / method).glob("seed*")):
            for stage_dir in sorted(seed_dir.glob("stage*")):
                found.append((f"{method}/{seed_dir.name}/{stage_dir.name}", stage_dir))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--methods", nargs="+", default=["grpo", "sdpo_frozen"])
    args = parser.parse_args()
    print("checkpoint\tbenchmark\tn\trequested_share\taccuracy\taccuracy_in_convention")
    for name, directory in evaluation_folders(args.results, args.methods):
        for benchmark, pattern in REQUESTED.items():
            responses = directory / f"{benchmark}.responses.jsonl"
            if not responses.exists():
                continue
            row = convention_table(responses, pattern)
            print(
                f"{name}\t{benchmark}\t{row['n']}\t{row['requested_share']:.3f}\t"
                f"{row['accuracy']:.3f}\t{row['accuracy_in_convention']:.3f}"
            )


if __name__ == "__main__":
    main()
