"""float32 against bfloat16 autocast on this CPU, for the embedded model's three hot loops, measured
side by side in one run: a warm-up (SFT) step, a training forward/backward at the RL batch, and
batched greedy generation.

    .venv/bin/python bench/bench_bf16.py --base results/embedded/base --threads 1

Rounds alternate the two precisions; the median of each is printed with the ratio. The CPU's
bf16 support (AMX, AVX-512-bf16) decides whether autocast pays off for matrices this small, so
this measures it rather than assuming it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

from cptlab.checkpoints import load_checkpoint  # noqa: E402


def autocast(bf16: bool):
    return torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()


def batch(tokenizer, rows: int, prompt: int, completion: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(10, len(tokenizer) - 10, (rows, prompt + completion), generator=generator)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def time_train_step(model, inputs, bf16: bool, optimizer) -> float:
    start = time.perf_counter()
    with autocast(bf16):
        logits = model(**inputs).logits
        loss = torch.nn.functional.cross_entropy(
            logits[:, :-1].reshape(-1, logits.size(-1)).float(),
            inputs["input_ids"][:, 1:].reshape(-1),
        )
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return time.perf_counter() - start


@torch.no_grad()
def time_generate(model, tokenizer, inputs, bf16: bool, tokens: int) -> float:
    start = time.perf_counter()
    with autocast(bf16):
        model.generate(
            **inputs, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False,
            pad_token_id=tokenizer.pad_token_id,
        )  # fmt: skip
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", type=Path, required=True, help="a checkpoint folder")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model, tokenizer = load_checkpoint(args.base)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
    loads = {
        "warm-up step (32 x 60 tokens)": lambda bf16: time_train_step(
            model.train(), batch(tokenizer, 32, 40, 20), bf16, optimizer
        ),
        "RL forward/backward (256 x 100 tokens)": lambda bf16: time_train_step(
            model.train(), batch(tokenizer, 256, 60, 40), bf16, optimizer
        ),
        "greedy generation (64 prompts x 32 tokens)": lambda bf16: time_generate(
            model.eval(), tokenizer, batch(tokenizer, 64, 40, 0), bf16, 32
        ),
    }
    print(f"{args.threads} thread(s), {args.rounds} rounds, median seconds")
    print(f"{'load':44s} {'float32':>9s} {'bf16':>9s} {'bf16/fp32':>10s}")
    for name, run in loads.items():
        times: dict[bool, list[float]] = {False: [], True: []}
        run(False), run(True)  # warm up both paths
        for _ in range(args.rounds):
            for bf16 in (False, True):
                times[bf16].append(run(bf16))
        fp32, bf16 = statistics.median(times[False]), statistics.median(times[True])
        print(f"{name:44s} {fp32:9.3f} {bf16:9.3f} {bf16 / fp32:10.2f}")


if __name__ == "__main__":
    main()
