"""Evaluation throughput: batched HF generation vs one prompt at a time (and vLLM when it
imports), measured side by side in one run on the same prompts and model.

    OMP_NUM_THREADS=1 .venv/bin/python bench/bench_eval.py            # random embedded-size model
    .venv/bin/python bench/bench_eval.py --model results/embedded/base --threads 2

Without --model the script trains a byte-level BPE tokenizer on the embedded math prompts and
builds a random Qwen2 model of the embedded default's size (config/config.yaml `base.model`),
saved to a temporary folder (vLLM loads it from there). Prompts: the first --prompts items of
the embedded `math_id` benchmark; greedy decoding, --max-new-tokens per completion. Tokens
generated count each completion up to and including its end token. The batched and the
one-at-a-time runs must give the same completions (greedy, left padding): the script says so.
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
    return p.parse_args()


def build_random(folder: Path, rows: list[dict]) -> Path:
    config = yaml.safe_load(Path("config/config.yaml").read_text())
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
    rows = load_benchmark("math_id", n=args.prompts, seed=0)
    prompts = [r["prompt"] for r in rows]
    sampling = Sampling(max_new_tokens=args.max_new_tokens)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.model) if args.model else build_random(Path(tmp) / "model", rows)
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
        if "vllm" in rate:
            print(f"vllm / hf batched throughput: {rate['vllm'] / rate['hf batched']:.1f}x")
        same = results["hf batched"][2] == results["hf one-at-a-time"][2]
        print(f"batched and one-at-a-time completions identical: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
