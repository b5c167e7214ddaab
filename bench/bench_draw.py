"""The token draw of compact sampling against `generate`'s, side by side in one run.

    .venv/bin/python bench/bench_draw.py

For each (rows, vocabulary) shape, the milliseconds of one draw from softmax probabilities with
`torch.multinomial` (what HF `generate` draws with) and with `draw_tokens` (the inverse of the
cumulative distribution at one uniform number, cptlab.train.compact_generation), one thread,
rounds alternating, and their ratio. 256 x 2,048 is an embedded rollout batch's first decode
step (32 prompts x 8 generations, the testbed's vocabulary).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from cptlab.train.compact_generation import draw_tokens


def milliseconds(draw, probs: torch.Tensor, repeats: int) -> float:
    draw(probs)
    started = time.perf_counter()
    for _ in range(repeats):
        draw(probs)
    return (time.perf_counter() - started) / repeats * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    draws = {
        "torch.multinomial": lambda p: torch.multinomial(p, num_samples=1).squeeze(1),
        "draw_tokens": draw_tokens,
    }
    print(f"{'rows x vocab':>14} {'multinomial ms':>15} {'draw_tokens ms':>15} {'ratio':>7}")
    for rows, vocab in ((256, 2048), (64, 2048), (8, 151_936)):
        probs = torch.softmax(3 * torch.randn(rows, vocab), dim=-1)
        times: dict[str, list[float]] = {name: [] for name in draws}
        for _ in range(args.rounds):
            for name, draw in draws.items():
                times[name].append(milliseconds(draw, probs, args.repeats))
        slow, fast = (statistics.median(times[name]) for name in draws)
        print(f"{rows:>6} x {vocab:<7} {slow:>15.3f} {fast:>15.3f} {slow / fast:>7.1f}")


if __name__ == "__main__":
    main()
