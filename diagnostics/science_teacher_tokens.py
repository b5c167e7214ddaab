"""Does SDPO's teacher keep the question's entity and attribute in a science answer?

A science_id answer names the question's entity and attribute before the fact and its letter
(`<reasoning>The source of velzan is Mars (A).</reasoning><answer>A</answer>`). The entity and
attribute are copied from the question; the student is sure of them. Full-logit distillation
pulls the student's whole next-token distribution towards the teacher's at every position, so
wherever the teacher is less sure of them than the student, it teaches the student to name
another entity or attribute.

Two measurements:
- `--responses`: from a results folder's evaluation responses (no model is loaded), per
  checkpoint, the share of science_id answers (items without the off-convention cue) whose
  reasoning names the question's attribute, its entity, and the true option value.
- `--checkpoint`: on that checkpoint's own greedy answers (first `--n` such items whose
  reasoning names the true value), the mean probability of each token kind (attribute, entity,
  fact, letter, other) under the student, the teacher with the whole demonstration and the
  teacher with the demonstration stripped of its reasoning (SDPO_0's), with the Jensen-Shannon
  divergence to the student; then the stripped teacher's own greedy answers.

    .venv/bin/python diagnostics/science_teacher_tokens.py --responses results/study \
        base grpo/seed0/stage2 sdpo_frozen/seed0/stage2
    .venv/bin/python diagnostics/science_teacher_tokens.py --checkpoint results/study/base \
        --data results/study/data/science_id.jsonl --n 120
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

from sdpo_signal import divergences, responses_or_checkpoint, token_logps

from cptlab.checkpoints import load_checkpoint
from cptlab.domains.registry import get_benchmark
from cptlab.evaluation.generation import generate
from cptlab.evaluation.settings import Sampling
from cptlab.rows import read_jsonl
from cptlab.teacher_prompt import strip_reasoning, teacher_messages

QUESTION = re.compile(r"What is the (\w+) of (\w+)\?")
ANSWER = re.compile(r"<reasoning>(.*)</reasoning><answer>([A-D])</answer>$", re.DOTALL)


def _parts(row: dict) -> tuple[str, str, str]:
    """(attribute, entity, true option value) of a science item."""
    attribute, entity = QUESTION.match(row["prompt"][-1]["content"]).groups()
    true = row["metadata"]["options"][ord(row["answer"]) - ord("A")]
    return attribute, entity, true


def _uncued(rows: list[dict]) -> list[dict]:
    return [r for r in rows if not r["metadata"].get("off_format_cue")]


def names_table(results: Path, checkpoints: list[str]) -> None:
    rows = {r["id"]: r for r in _uncued(read_jsonl(results / "data" / "science_id.jsonl"))}
    print("checkpoint                     n  attribute  entity  fact  accuracy")
    for checkpoint in checkpoints:
        counts = dict.fromkeys(["n", "attribute", "entity", "fact", "right"], 0)
        path = results / "eval" / checkpoint / "science_id.responses.jsonl"
        for record in map(json.loads, path.read_text().splitlines()):
            if record["id"] not in rows:
                continue
            attribute, entity, true = _parts(rows[record["id"]])
            match = ANSWER.match(record["completions"][0])
            reasoning = match.group(1) if match else ""
            counts["n"] += 1
            counts["attribute"] += attribute in reasoning
            counts["entity"] += re.search(rf"\b{entity}\b", reasoning) is not None
            counts["fact"] += true in reasoning
            counts["right"] += record["rewards"][0]
        n = max(counts["n"], 1)
        shares = "  ".join(
            f"{counts[k] / n:.2f}".rjust(w)
            for k, w in [("attribute", 9), ("entity", 6), ("fact", 4), ("right", 8)]
        )
        print(f"{checkpoint:28s} {counts['n']:4d}  {shares}")


def token_table(checkpoint: str, data: str, n: int) -> None:
    model, tokenizer = load_checkpoint(checkpoint)
    pattern = get_benchmark("science_train").reasoning
    rows = _uncued(read_jsonl(data))
    greedy = Sampling(n=1, temperature=0.0, max_new_tokens=64)
    answers = [c[0] for c in generate(model, tokenizer, [r["prompt"] for r in rows], greedy)]
    kept = [(r, a) for r, a in zip(rows, answers, strict=True) if _parts(r)[2] in a][:n]
    values: dict[tuple[str, str], list[float]] = {}
    for row, answer in kept:
        attribute, entity, true = _parts(row)
        solution = row["metadata"]["solution"]
        models = {
            "student": row["prompt"],
            "whole": teacher_messages(row["prompt"], solution),
            "stripped": teacher_messages(row["prompt"], strip_reasoning(solution, pattern)),
        }
        logps, dists = {}, {}
        for name, messages in models.items():
            logps[name], dists[name], pieces = token_logps(model, tokenizer, messages, answer)
        letter = ANSWER.match(answer).group(2) if ANSWER.match(answer) else None
        starts = {
            "attribute": answer.find(attribute),
            "entity": answer.find(entity),
            "fact": answer.find(true),
            "letter": answer.rfind(f">{letter}<") + 1 if letter else -1,
        }
        offset = 0
        for j, piece in enumerate(pieces[: len(pieces) - 1]):  # the last is <|im_end|>
            end = offset + len(piece)
            kind = next((k for k, s in starts.items() if offset <= s < end), "other")
            offset = end
            for name in models:
                values.setdefault((kind, name), []).append(logps[name][j].exp().item())
            for name in ("whole", "stripped"):
                jsd = divergences(dists[name][j], dists["student"][j])["JSD"].item()
                values.setdefault((kind, f"JSD {name}"), []).append(jsd)
    print(f"{len(kept)} greedy answers that name the true value; mean per token kind")
    columns = ["student", "whole", "stripped", "JSD whole", "JSD stripped"]
    print("kind       " + "".join(c.rjust(14) for c in columns) + "  tokens")
    for kind in ["attribute", "entity", "fact", "letter", "other"]:
        cells = "".join(f"{statistics.mean(values[kind, c]):14.3f}" for c in columns)
        print(f"{kind:10s} {cells}  {len(values[kind, 'student'])}")
    stripped = [
        teacher_messages(r["prompt"], strip_reasoning(r["metadata"]["solution"], pattern))
        for r, _ in kept
    ]
    own = [c[0] for c in generate(model, tokenizer, stripped, greedy)]
    counts = dict.fromkeys(["attribute", "entity", "fact", "letter"], 0)
    for (row, _), answer in zip(kept, own, strict=True):
        attribute, entity, true = _parts(row)
        counts["attribute"] += attribute in answer
        counts["entity"] += re.search(rf"\b{entity}\b", answer) is not None
        counts["fact"] += true in answer
        counts["letter"] += answer.endswith(f"<answer>{row['answer']}</answer>")
    print(
        "stripped teacher's own greedy answers naming the question's "
        + ", ".join(f"{k} {v / max(len(kept), 1):.2f}" for k, v in counts.items())
    )


def main() -> None:
    responses_or_checkpoint(__doc__, names_table, token_table, n=120)


if __name__ == "__main__":
    main()
