"""Where the two reward sets disagree, measured on the study's real rows.

For each dataset of ../shared/study-data with a study reward function (SciKnowEval, ToolAlpaca)
and for BFCL, this builds completions of each kind (the reference answer, every wrong option,
format variants, perturbed calls) and counts the rows on which `data.rewards: study` and
`data.rewards: strict` give each pair of rewards. The table of docs/rewards.md is its output.

    .venv/bin/python diagnostics/reward_sets.py [../shared/study-data]
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from cptlab.domains.registry import get_benchmark, load_benchmark
from cptlab.verifiers import score


def decisions(name: str, rows: list[dict], make: Callable[[dict], list[str]]) -> Counter:
    """(study, strict) reward pairs over every completion `make` builds for each row."""
    benchmark = get_benchmark(name)
    study, strict = benchmark.verifier_for("study"), benchmark.verifier_for("strict")
    return Counter(
        (score(study, c, row).reward, score(strict, c, row).reward)
        for row in rows
        for c in make(row)
    )


def react(calls: list[dict]) -> str:
    steps = [
        f"Thought: t\nAction: {c['name']}\nAction Input: {json.dumps(c['arguments'])}"
        for c in calls
    ]
    return "\n".join(steps) + "\nFinal Answer: done"


def _letters(row: dict) -> str:
    return "ABCDEFGHIJ"[: len(row["metadata"]["options"])]


def _changed(row: dict) -> list[str]:
    calls = json.loads(row["answer"])
    if not any(c["arguments"] for c in calls):
        return []
    return [
        react([dict(c, arguments={k: f"{v}!" for k, v in c["arguments"].items()}) for c in calls])
    ]


SCIKNOWEVAL_KINDS: dict[str, Callable[[dict], list[str]]] = {
    "reference `<answer>\\nB\\n</answer>`": lambda r: [f"<answer>\n{r['answer']}\n</answer>"],
    "every other option letter": lambda r: [
        f"<answer>{x}</answer>" for x in _letters(r) if x != r["answer"]
    ],
    "unclosed `<answer>B`": lambda r: [f"<answer>{r['answer']}"],
    "bare letter `B`": lambda r: [r["answer"]],
    "`<answer>(B)</answer>`": lambda r: [f"<answer>({r['answer']})</answer>"],
    "lower case `<answer>b</answer>`": lambda r: [f"<answer>{r['answer'].lower()}</answer>"],
}
TOOLALPACA_KINDS: dict[str, Callable[[dict], list[str]]] = {
    "reference calls, ReAct": lambda r: [react(json.loads(r["answer"]))],
    "one input value changed": _changed,
    "an extra call": lambda r: [react(json.loads(r["answer"]) + [{"name": "x", "arguments": {}}])],
    "calls in reverse order": lambda r: [react(json.loads(r["answer"])[::-1])],
}
HEADS = ("study 1, strict 1", "study 0, strict 0", "study 1, strict 0", "study 0, strict 1")


def main(root: Path) -> None:
    ske = [
        row
        for domain in ("biology", "chemistry", "physics")
        for row in load_benchmark(
            "sciknoweval_test",
            path=str(root / "sdpo-cl/sciknoweval" / domain / "test.json"),
            holdout=None,
        )
    ]
    tool = load_benchmark("toolalpaca_test", path=str(root / "toolalpaca/eval_simulated.json"))
    kinds = [("sciknoweval", kind, ske, make) for kind, make in SCIKNOWEVAL_KINDS.items()]
    kinds += [("toolalpaca", kind, tool, make) for kind, make in TOOLALPACA_KINDS.items()]
    print("| dataset | completions | rows | " + " | ".join(HEADS) + " |")
    print("|---|---|---|---|---|---|---|")
    for dataset, kind, rows, make in kinds:
        name = "sciknoweval_test" if dataset == "sciknoweval" else "toolalpaca_test"
        counts = decisions(name, rows, make)
        cells = [counts[(1.0, 1.0)], counts[(0.0, 0.0)], counts[(1.0, 0.0)], counts[(0.0, 1.0)]]
        print(f"| {dataset} | {kind} | {len(rows)} | " + " | ".join(str(c) for c in cells) + " |")


if __name__ == "__main__":
    main(
        Path(
            sys.argv[1]
            if len(sys.argv) > 1
            else Path(__file__).resolve().parents[2] / "shared/study-data"
        )
    )
