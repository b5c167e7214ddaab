"""Can the embedded architecture learn the option-lookup drill at all, given nothing else?

Trains a freshly initialised model of the config's `base.model` shape, with a built base's
tokenizer, on fresh option-lookup drills only (`Options: gas (A), Lima (B), 7 (C), blue (D).
Which letter is 7?` -> `C`, cptlab.domains.embedded.copying; new drills every step, so nothing
can be memorised), at a constant rate, and prints the greedy accuracy on 200 held-out drills
every `--every` steps. Chance is 50 of 200. The lookup needs an induction head: a sudden rise
after a long plateau is its formation.

    .venv/bin/python diagnostics/lookup_learning.py --config config/config.yaml \
        --tokenizer results/embedded/base --steps 9000 --lr 3e-4
"""

from __future__ import annotations

import argparse
import random
import time

import torch

from cptlab.base_model.architecture import build_model
from cptlab.base_model.settings import BaseSettings
from cptlab.base_model.warmup import collate_examples, completion_loss, encode_example
from cptlab.checkpoints import load_tokenizer
from cptlab.domains.embedded.copying import lookup_drills
from cptlab.validation import load_config


def drills(rng: random.Random, n: int) -> list[tuple[list[dict], str]]:
    """n fresh option-lookup drills as (prompt, letter)."""
    return [([{"role": "user", "content": d.user}], d.answer) for d in lookup_drills(rng, n)]


@torch.no_grad()
def accuracy(model, tokenizer, drills: list[tuple[list[dict], str]]) -> int:
    model.eval()
    right = 0
    for prompt, letter in drills:
        ids, labels = encode_example(tokenizer, prompt, letter)
        first = labels.index(next(x for x in labels if x != -100))  # the answer's first token
        logits = model(torch.tensor([ids[:first]])).logits[0, -1]
        right += tokenizer.decode([int(logits.argmax())]).strip() == letter
    model.train()
    return right


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="its base.model is the architecture")
    parser.add_argument("--tokenizer", required=True, help="a built base's folder")
    parser.add_argument("--steps", type=int, default=9000)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--every", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    tokenizer = load_tokenizer(args.tokenizer)
    model = build_model(BaseSettings.from_config(load_config(args.config)).model, tokenizer, 0)
    # Two streams that never meet; seed 0 gives the run in docs/notebook/testbed.md.
    held_out = drills(random.Random(999 + args.seed), 200)
    stream = random.Random(1 + args.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    started = time.perf_counter()
    model.train()
    for step in range(1, args.steps + 1):
        examples = [encode_example(tokenizer, p, a) for p, a in drills(stream, args.batch_size)]
        loss = completion_loss(model, collate_examples(examples, tokenizer.pad_token_id))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % args.every == 0:
            right = accuracy(model, tokenizer, held_out)
            seconds = time.perf_counter() - started
            print(f"step {step}: loss {loss.item():.3f}, held-out {right} of 200, {seconds:.0f} s")


if __name__ == "__main__":
    main()
