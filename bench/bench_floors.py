"""Each training job kind against its compute floor: what this CPU's matrix units allow for the
model's shapes, measured side by side with the real loops in one run.

    .venv/bin/python bench/bench_floors.py --results results/embedded \
        --methods grpo sdpo_frozen --domains math science tool code --steps 5

1. **The rate.** The model's linear layers (every attention and MLP projection of every layer,
   and the output head), forward and backward, on `--tokens` rows at once: FLOPs (6 per
   parameter per token) over seconds. This is the rate the floors use, at 1 thread (the
   training jobs') and at the base build's threads.
2. **The base build's warm-up step** (`cptlab.base_model.warmup`, the build's own batches,
   collation, loss, clipping and AdamW), against its floor: 6 FLOPs per parameter per token
   through the layers (padding excluded), the head only on the labelled tokens, at the rate
   above with the build's threads (`resources.build_base.threads`).
3. **A training step per (method, domain)** (`bench_step_profile.profile`: the stage's own
   trainer from the results' base), against its floor: every distinct prompt and every
   completion token once through the policy's forward and backward (6 FLOPs per parameter per
   token), once through generation (2), and for SDPO once more through the teacher's forward
   (2), at the 1-thread rate. The reward is left out of the floor: the code sandbox's floor is
   `bench_sandbox_floor.py`'s. Attention's own FLOPs (under 5 % at these lengths) are not
   counted, so the floor is a lower bound.

Ratios are now / floor: 1.0 would be a loop that does nothing but the matrix products. With
`--toggle KEY` (a boolean training key) each training step is measured with KEY off, then on.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402

from cptlab.base_model.build import reasoning_patterns  # noqa: E402
from cptlab.base_model.settings import BaseSettings  # noqa: E402
from cptlab.base_model.warmup import (  # noqa: E402
    collate_examples,
    completion_loss,
    length_bucketed_batches,
)
from cptlab.base_model.weights import warmup_inputs  # noqa: E402
from cptlab.checkpoints import load_checkpoint  # noqa: E402
from cptlab.layout import Layout  # noqa: E402
from cptlab.rows import read_jsonl  # noqa: E402
from cptlab.train.spec import resolve_stage  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from bench_step_profile import profile  # noqa: E402


def linear_shapes(model) -> list[tuple[int, int]]:
    """(in, out) of every linear map a token goes through: the layers', then the head."""
    shapes = [
        (m.in_features, m.out_features)
        for name, m in model.named_modules()
        if isinstance(m, torch.nn.Linear) and name != "lm_head"
    ]
    head = model.get_output_embeddings().weight
    return shapes + [(head.shape[1], head.shape[0])]


def gemm_rate(shapes: list[tuple[int, int]], tokens: int, threads: int, rounds: int = 5) -> float:
    """FLOP/s of the forward and backward of `shapes` on `tokens` rows, `threads` threads."""
    torch.set_num_threads(threads)
    weights = [torch.randn(o, i, requires_grad=True) for i, o in shapes]
    inputs = [torch.randn(tokens, i, requires_grad=True) for i, _ in shapes]
    grads = [torch.randn(tokens, o) for _, o in shapes]
    flops = sum(6 * tokens * i * o for i, o in shapes)

    def once() -> float:
        start = time.perf_counter()
        for x, w, g in zip(inputs, weights, grads, strict=True):
            torch.nn.functional.linear(x, w).backward(g)
        return time.perf_counter() - start

    once()
    return flops / statistics.median(once() for _ in range(rounds))


def warmup_step(config: dict, layout: Layout, model, threads: int, steps: int) -> dict:
    """Seconds and floor FLOPs of the base build's warm-up steps (its own batches) on `model`
    (the base: its shapes matter, not its weights, which these steps change)."""
    torch.set_num_threads(threads)
    spec, domains = BaseSettings.from_config(config), list(config["data"]["domains"])
    inputs = warmup_inputs(spec, domains, reasoning_patterns(config), layout.data_dir)
    model.train()
    generator = torch.Generator().manual_seed(inputs.spec.seed)
    batches = length_bucketed_batches(
        [len(ids) for ids, _ in inputs.examples], inputs.spec.sft.batch_size, generator
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    shapes = linear_shapes(model)
    layers = sum(i * o for i, o in shapes[:-1])
    head = shapes[-1][0] * shapes[-1][1]
    seconds, flops = [], []
    for step in range(steps + 2):
        start = time.perf_counter()
        batch = collate_examples(
            [inputs.examples[i] for i in next(batches)], inputs.tokenizer.pad_token_id
        )
        loss = completion_loss(model, batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        loss.item()
        if step >= 2:  # the first steps warm the allocator up
            seconds.append(time.perf_counter() - start)
            tokens = int(batch["attention_mask"].sum())
            labelled = int((batch["labels"][:, 1:] != -100).sum())
            flops.append(6 * (layers * tokens + head * labelled))
    return {"seconds": statistics.mean(seconds), "flops": statistics.mean(flops)}


def step_flops(
    config: dict, layout: Layout, method: str, domain: str, result: dict, tokenizer, per_token: int
) -> float:
    """The floor FLOPs of one RL step of (method, domain), `per_token` FLOPs per parameter
    pass of a token: see the module docstring."""
    settings = resolve_stage(config, method, domain)
    t = settings.training
    rows = read_jsonl(layout.data_file(settings.train_benchmark))
    prompt_tokens = statistics.mean(
        len(tokenizer.apply_chat_template(r["prompt"], add_generation_prompt=True, tokenize=True,
                                          **t.chat_template_kwargs))
        for r in rows[:200]
    )  # fmt: skip
    tokens = t.prompts_per_step * (prompt_tokens + t.num_generations * result["mean_length"])
    passes = 6 + 2 + (2 if settings.trainer == "sdpo" else 0)
    return passes * per_token * tokens


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", type=Path, required=True, help="results/<experiment>")
    parser.add_argument("--methods", nargs="+", default=["grpo", "sdpo_frozen"])
    parser.add_argument("--domains", nargs="+", default=["math", "science", "tool", "code"])
    parser.add_argument("--steps", type=int, default=5, help="training steps per run")
    parser.add_argument("--skip", type=int, default=1, help="first training steps not counted")
    parser.add_argument("--warmup-steps", type=int, default=30)
    parser.add_argument("--tokens", type=int, default=2048, help="rows of the rate measurement")
    parser.add_argument(
        "--toggle", default=None, help="a boolean training key: each step run off, then on"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args()
    transformers.logging.set_verbosity_error()
    layout = Layout(args.results)
    config = json.loads(layout.config_file.read_text())
    build_threads = int(config["resources"]["build_base"]["threads"])
    model, tokenizer = load_checkpoint(layout.base_dir)
    shapes = linear_shapes(model)
    per_token = sum(i * o for i, o in shapes)
    rate = {n: gemm_rate(shapes, args.tokens, n) for n in sorted({1, build_threads})}
    out: dict = {"rate_gflops": {str(n): r / 1e9 for n, r in rate.items()}}
    print(f"the model's linear maps, forward and backward on {args.tokens} tokens:")
    for n, r in rate.items():
        print(f"  {n} thread(s): {r / 1e9:.1f} GFLOP/s")

    warm = warmup_step(config, layout, model, build_threads, args.warmup_steps)
    floor = warm["flops"] / rate[build_threads]
    out["warmup"] = {**warm, "floor": floor, "ratio": warm["seconds"] / floor}
    print(
        f"base warm-up step ({build_threads} threads): {warm['seconds'] * 1e3:.1f} ms, floor "
        f"{floor * 1e3:.1f} ms ({warm['flops'] / 1e9:.2f} GFLOP): "
        f"ratio {warm['seconds'] / floor:.2f}"
    )

    torch.set_num_threads(1)
    config["training"] = {**config.get("training", {}), "steps": args.steps, "save_steps": 10**6}
    config["training"]["domain_steps"] = {}
    work = Path(tempfile.mkdtemp(prefix="bench_floors_"))
    print("training step (1 thread): s/step, floor, ratio; without the reward")
    out["steps"] = {}
    variants = [("", config)]
    if args.toggle:
        training = config["training"]
        variants = [
            (f" {args.toggle}={on}", {**config, "training": {**training, args.toggle: on}})
            for on in (False, True)
        ]
    try:
        for domain in args.domains:
            for method in args.methods:
                for label, run_config in variants:
                    result = profile(run_config, layout, method, domain, args, work)
                    flops = step_flops(
                        run_config, layout, method, domain, result, tokenizer, per_token
                    )
                    floor = flops / rate[1]
                    compute = result["step_seconds"] - result["phases"]["reward"]
                    run = f"{method}/{domain}{label}"
                    out["steps"][run] = {**result, "floor": floor}
                    print(
                        f"  {run}: {result['step_seconds']:.2f} s, floor {floor:.3f} s, "
                        f"ratio {result['step_seconds'] / floor:.1f}; "
                        f"without the reward {compute:.2f} s, ratio {compute / floor:.1f}",
                        flush=True,
                    )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
