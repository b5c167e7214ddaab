"""Evaluation throughput: batched HF generation vs one prompt at a time (and vLLM when it
imports), measured side by side in one run on the same prompts and model.

    OMP_NUM_THREADS=1 .venv/bin/python bench/bench_eval.py            # random embedded-size model
    .venv/bin/python bench/bench_eval.py --model results/embedded/base --threads 2
    .venv-vllm/bin/python bench/bench_eval.py --head-dim 32            # with vLLM's CPU build

Without --model the script trains a byte-level BPE tokenizer on the embedded math prompts and
builds a random Qwen2 model of the embedded default's size (config/config.yaml `base.model`;
`--head-dim 32` for vLLM's CPU attention), saved to a temporary folder (vLLM loads it from
there). Prompts: the first --prompts items of an embedded benchmark (`--benchmark`, math_id);
greedy decoding, --max-new-tokens per completion. Tokens generated count each completion up to
and including its end token. Backends: HF `generate` batched as evaluation runs it, the same
batches through the training loop's compact decode loop (`evaluation.compact_generation`), HF
one prompt at a time, and vLLM where it imports (the .venv-vllm environment). The script says
how many completions differ from the batched HF ones (greedy: none should, up to float ties).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import torch  # noqa: E402
import yaml  # noqa: E402

from cptlab.base_model.architecture import build_model, count_parameters  # noqa: E402
from cptlab.base_model.settings import ArchitectureSettings
from cptlab.base_model.tokenizer import train_tokenizer  # noqa: E402
from cptlab.checkpoints import load_checkpoint  # noqa: E402
from cptlab.domains import load_benchmark  # noqa: E402
from cptlab.evaluation.generation import generate  # noqa: E402
from cptlab.evaluation.settings import Sampling  # noqa: E402


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", help="checkpoint folder (default: build a random embedded model)")
    p.add_argument("--prompts", type=int, default=64)
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--batch-size", type=int, default=64, help="sequences per batched call")
    p.add_argument("--rounds", type=int, default=2, help="repetitions (median reported)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--no-vllm", action="store_true", help="skip vLLM even if it imports")
    p.add_argument(
        "--head-dim",
        type=int,
        default=None,
        help="the random model's head size (hidden_size / heads); vLLM's CPU attention needs 32",
    )
    p.add_argument("--benchmark", default="math_id", help="the embedded benchmark of the prompts")
    return p.parse_args()


def build_random(folder: Path, rows: list[dict], head_dim: int | None = None) -> Path:
    config = yaml.safe_load(Path("config/config.yaml").read_text())
    if head_dim:
        shape = config["base"]["model"]
        heads = shape["hidden_size"] // head_dim
        shape.update(num_heads=heads, num_kv_heads=min(shape["num_kv_heads"], heads))
    texts = [m["content"] for r in rows for m in r["prompt"]]
    texts += [r["metadata"].get("solution", r["answer"]) for r in rows]
    tokenizer = train_tokenizer(texts, config["base"]["tokenizer"]["vocab_size"])
    model = build_model(ArchitectureSettings(**config["base"]["model"]), tokenizer, seed=0)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def timed(fn, rounds: int):
    seconds, result = [], None
    for _ in range(rounds):
        stats: dict = {"tokens_generated": 0}
        start = time.perf_counter()
        result = fn(stats)
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), stats["tokens_generated"], result


def main() -> int:
    args = parse()
    torch.set_num_threads(args.threads)
    rows = load_benchmark(args.benchmark, n=args.prompts, seed=0)
    prompts = [r["prompt"] for r in rows]
    sampling = Sampling(max_new_tokens=args.max_new_tokens)
    with tempfile.TemporaryDirectory() as tmp:
        folder = (
            Path(args.model)
            if args.model
            else build_random(Path(tmp) / "model", rows, args.head_dim)
        )
        model, tokenizer = load_checkpoint(folder)
        print(
            f"model {folder} ({count_parameters(model) / 1e6:.2f} M parameters), "
            f"{len(prompts)} prompts, greedy, max {args.max_new_tokens} new tokens, "
            f"torch threads {torch.get_num_threads()}, {args.rounds} round(s), median"
        )
        results = {}

        def hf(batch_size):
            return lambda stats: generate(model, tokenizer, prompts, sampling, 0, batch_size, stats)

        results["hf batched"] = timed(hf(args.batch_size), args.rounds)
        results["compact"] = timed(
            lambda stats: generate(
                model, tokenizer, prompts, sampling, 0, args.batch_size, stats, compact=True
            ),
            args.rounds,
        )
        results["hf one-at-a-time"] = timed(hf(1), args.rounds)
        if not args.no_vllm:
            try:
                import vllm  # noqa: F401
            except ImportError:
                print("vllm: not importable, skipped")
            else:
                from cptlab.evaluation.vllm_backend import build_llm, generate_vllm

                llm = build_llm(folder, {"gpu_memory_utilization": 0.3}, seed=0)
                results["vllm"] = timed(
                    lambda stats: generate_vllm(llm, prompts, sampling, 0, stats), args.rounds
                )
        print(f"{'backend':<18}{'seconds':>9}{'tokens':>8}{'tokens/s':>10}")
        rate = {}
        for name, (seconds, tokens, _) in results.items():
            rate[name] = tokens / seconds
            print(f"{name:<18}{seconds:>9.2f}{tokens:>8d}{rate[name]:>10.1f}")
        print(
            f"batched / one-at-a-time throughput: "
            f"{rate['hf batched'] / rate['hf one-at-a-time']:.1f}x"
        )
        print(f"compact / hf batched throughput: {rate['compact'] / rate['hf batched']:.2f}x")
        if "vllm" in rate:
            print(f"vllm / hf batched throughput: {rate['vllm'] / rate['hf batched']:.1f}x")
            print(f"vllm / compact throughput: {rate['vllm'] / rate['compact']:.1f}x")
        batched = results["hf batched"][2]
        for name in ("hf one-at-a-time", "compact"):
            differ = sum(a != b for a, b in zip(batched, results[name][2], strict=True))
            print(f"{name}: {differ} of {len(batched)} completions differ from hf batched")
    return 0


if __name__ == "__main__":
    sys.exit(main())
