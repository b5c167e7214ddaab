"""Where SDPO's sampled-token signal points: for each prompt, `--rollouts` student samples at
temperature 1; each rollout with a successful sibling gets that sibling as its demonstration
(TRL's rule: never its own), and every completion token gets

    log p_teacher(token) - log p_student(token)

(teacher = the same model on SDPO's reprompt). Sampled-token reverse KL raises a token's
probability where this is positive and lowers it where it is negative. Printed separately for
successful and failed rollouts, and for digit tokens (the answer, in math) and the others.

A second table gives, for the same tokens, the full-logit divergences the `full_logits` mode
minimises: forward KL(teacher || student) (distillation_alpha 0) and the Jensen-Shannon
divergence (alpha 0.5), each as mean, max and share of the batch's total. Forward KL is
unbounded, so a few positions where the teacher is sure of a token the student gives ~0 carry
much of the total; JSD is at most log 2 per token.

    .venv/bin/python diagnostics/sdpo_signal.py --checkpoint results/embedded/base \
        --benchmark results/embedded/data/math_id.jsonl --prompts 60
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import torch

from cptlab.base_model.warmup import encode_example
from cptlab.checkpoints import load_checkpoint
from cptlab.evaluation.generation import generate
from cptlab.evaluation.scoring import score_completions
from cptlab.evaluation.settings import Sampling
from cptlab.rows import read_jsonl
from cptlab.teacher_prompt import teacher_messages


def token_logps(model, tokenizer, messages: list[dict], completion: str):
    """Log-probability of each completion token (and <|im_end|>) after `messages`, the full
    next-token log-distributions at those positions, and the token pieces; encoded as the
    warm-up encodes an example."""
    ids, labels = encode_example(tokenizer, messages, completion)
    start = labels.count(-100)
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, start - 1 : -1]
    tokens = torch.tensor(ids[start:])
    distributions = torch.log_softmax(logits.float(), -1)
    logps = distributions.gather(1, tokens[:, None])[:, 0]
    return logps, distributions, [tokenizer.decode([t]) for t in ids[start:]]


def responses_or_checkpoint(doc: str, responses_table, checkpoint_table, n: int) -> None:
    """The command line of a probe with two measurements: `--responses RESULTS checkpoints...`
    reads a results folder's evaluation responses (`responses_table(results, checkpoints)`);
    `--checkpoint DIR --data ROWS --n N` loads a model (`checkpoint_table(dir, rows, n)`)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--responses", type=Path, help="a results folder")
    parser.add_argument("checkpoints", nargs="*", help="eval/ subfolders: base, grpo/seed0/stage1")
    parser.add_argument("--checkpoint", help="a checkpoint folder")
    parser.add_argument("--data", help="the benchmark's rows (.jsonl)")
    parser.add_argument("--n", type=int, default=n)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.responses:
        responses_table(args.responses, args.checkpoints or ["base"])
    if args.checkpoint:
        checkpoint_table(args.checkpoint, args.data, args.n)


def divergences(teacher: torch.Tensor, student: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per-position forward KL(teacher || student) and Jensen-Shannon divergence of two rows of
    log-distributions."""
    forward = (teacher.exp() * (teacher - student)).sum(-1)
    mixture = torch.logsumexp(torch.stack([teacher, student]), 0) - torch.log(torch.tensor(2.0))
    jsd = 0.5 * (teacher.exp() * (teacher - mixture)).sum(-1)
    jsd = jsd + 0.5 * (student.exp() * (student - mixture)).sum(-1)
    return {"forward KL": forward, "JSD": jsd}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--benchmark", required=True, help="a canonical-rows .jsonl file")
    parser.add_argument("--prompts", type=int, default=60)
    parser.add_argument("--rollouts", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model, tokenizer = load_checkpoint(args.checkpoint)
    rows = read_jsonl(args.benchmark)[: args.prompts]
    sampling = Sampling(n=args.rollouts, temperature=1.0, max_new_tokens=64)
    completions = generate(model, tokenizer, [r["prompt"] for r in rows], sampling)
    verdicts = score_completions(rows, completions)

    signal: dict[tuple[str, str], list[float]] = {}
    divergence: dict[str, dict[tuple[str, str], list[float]]] = {"forward KL": {}, "JSD": {}}
    for row, group, scored in zip(rows, completions, verdicts, strict=True):
        success = [v.reward >= 1.0 for v in scored]
        for i, completion in enumerate(group):
            sibling = next((j for j, ok in enumerate(success) if ok and j != i), None)
            if sibling is None:
                continue  # no demonstration: SDPO leaves this rollout out
            student, student_rows, pieces = token_logps(model, tokenizer, row["prompt"], completion)
            teacher_prompt = teacher_messages(row["prompt"], group[sibling])
            teacher, teacher_rows, _ = token_logps(model, tokenizer, teacher_prompt, completion)
            outcome = "successful" if success[i] else "failed"
            kinds = ["digit" if p.strip().lstrip("-").isdigit() else "other" for p in pieces]
            for kind, gap in zip(kinds, (teacher - student).tolist(), strict=True):
                signal.setdefault((outcome, kind), []).append(gap)
            for name, values in divergences(teacher_rows, student_rows).items():
                for kind, value in zip(kinds, values.tolist(), strict=True):
                    divergence[name].setdefault((outcome, kind), []).append(value)

    print(f"{args.benchmark}: {len(rows)} prompts x {args.rollouts} rollouts")
    print(f"{'rollouts':<11} {'tokens':<6} {'count':>6} {'mean':>7} {'sum':>8}")
    for (outcome, kind), gaps in sorted(signal.items()):
        mean, total = statistics.mean(gaps), sum(gaps)
        print(f"{outcome:<11} {kind:<6} {len(gaps):>6} {mean:>+7.2f} {total:>+8.0f}")
    for name, table in divergence.items():
        grand = sum(sum(values) for values in table.values())
        print(f"\n{name} per token (full logits)")
        print(f"{'rollouts':<11} {'tokens':<6} {'mean':>7} {'max':>7} {'share':>6}")
        for (outcome, kind), values in sorted(table.items()):
            mean, top, share = statistics.mean(values), max(values), sum(values) / grand
            print(f"{outcome:<11} {kind:<6} {mean:>7.3f} {top:>7.2f} {share:>6.2f}")


if __name__ == "__main__":
    main()
