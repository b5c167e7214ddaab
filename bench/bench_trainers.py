"""Seconds per step of GRPO and each SDPO variant at the same batch, measured in one run.

    .venv/bin/python bench/bench_trainers.py                      # the tiny world (built here)
    .venv/bin/python bench/bench_trainers.py --base /tmp/exp1/base --data /tmp/exp1/data \
        --domain math

Every method trains `--steps` steps from the same start with the same seed, prompts and
generation settings; methods run round-robin for `--rounds` rounds and the median step time
(after `--skip` warm-up steps of each run) is reported with the SDPO/GRPO ratio. The KL probe
and checkpoints are off: this times the trainers. The methods are config/config.yaml's entries;
`sdpo_frozen_trl` is SDPO_0 with TRL's default loss (sampled-token reverse KL) and
`sdpo_frozen_trlpath` is the default SDPO_0 through TRL's own loss path
(`skip_inactive_rows: false`), i.e. TRL as shipped plus cptlab's logging.

In the tiny world the `tiny_parity` verifier makes about half of the rollouts succeed, so
almost every rollout gets a teacher reprompt (SDPO's worst case for cost); with a real base
early in training few rollouts succeed and SDPO skips most teacher/student forwards.
"""

from __future__ import annotations

import argparse
import copy
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the tests' tiny world
from tiny_world import tiny_config, tiny_world  # noqa: E402

from cptlab.rows import read_jsonl  # noqa: E402
from cptlab.train.spec import resolve_stage  # noqa: E402
from cptlab.train.stage import build_trainer  # noqa: E402
from cptlab.validation import load_config  # noqa: E402

# The embedded default's method entries (config/config.yaml: every SDPO method shares its
# full-logit loss), plus TRL's default loss and TRL's own loss path for comparison.
PROJECT_METHODS = load_config(Path(__file__).resolve().parents[1] / "config" / "config.yaml")[
    "methods"
]
METHODS = {
    name: PROJECT_METHODS[name]
    for name in ("grpo", "sdpo_frozen", "sdpo_ema5", "sdpo_frozen_cot", "sdpo_frozen_trl")
}
METHODS["sdpo_frozen_trlpath"] = {**METHODS["sdpo_frozen"], "skip_inactive_rows": False}


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--base", help="start model folder (default: build the tiny world)")
    p.add_argument("--data", help="folder of <train benchmark>.jsonl (with --base)")
    p.add_argument("--domain", default="math")
    p.add_argument("--prompts", type=int, default=8, help="prompts per step")
    p.add_argument("--generations", type=int, default=8, help="rollouts per prompt")
    p.add_argument("--max-tokens", type=int, default=32, help="max completion tokens")
    p.add_argument("--steps", type=int, default=6, help="steps per run")
    p.add_argument("--skip", type=int, default=1, help="warm-up steps not timed")
    p.add_argument("--rounds", type=int, default=2, help="round-robin repetitions")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--methods", nargs="+", default=list(METHODS))
    return p.parse_args()


def main() -> int:
    args = parse()
    work = Path(tempfile.mkdtemp(prefix="bench_trainers_"))
    try:
        return run(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(args: argparse.Namespace, work: Path) -> int:
    torch.set_num_threads(args.threads)
    transformers.logging.set_verbosity_error()
    if args.base:
        base, data = Path(args.base), Path(args.data)
        config = tiny_config()
        config["data"]["domains"] = {args.domain: {"train": f"{args.domain}_train"}}
    else:
        config, base, data = tiny_world(work / "world")
    config["methods"] = copy.deepcopy(METHODS)
    config["training"].update(
        steps=args.steps,
        prompts_per_step=args.prompts,
        num_generations=args.generations,
        max_completion_length=args.max_tokens,
        max_prompt_length=512,
        learning_rate=1e-5,
        save_steps=10**6,
        kl_probe={"prompts": 0},
        collapse={"thresholds": {}},
    )
    seconds: dict[str, list[float]] = {m: [] for m in args.methods}
    extra: dict[str, list[tuple[float, float]]] = {m: [] for m in args.methods}
    for round_ in range(args.rounds):
        for method in args.methods:
            settings = resolve_stage(config, method, args.domain)
            rows = read_jsonl(data / f"{settings.train_benchmark}.jsonl")
            trainer = build_trainer(settings, rows, base, work / f"{method}-{round_}", seed=0)
            t0 = time.perf_counter()
            trainer.train()
            wall = time.perf_counter() - t0
            logs = [r for r in trainer.state.log_history if "step_seconds" in r][args.skip :]
            seconds[method] += [r["step_seconds"] for r in logs]
            extra[method] += [
                (
                    r.get("self_distillation/reprompt_sample_fraction", float("nan")),
                    r["completions/mean_length"],
                )
                for r in logs
            ]
            print(
                f"round {round_} {method:16s} {wall:6.1f} s for {args.steps} steps", file=sys.stderr
            )

    grpo = statistics.median(seconds["grpo"]) if "grpo" in seconds else float("nan")
    print(
        f"\nbatch: {args.prompts} prompts x {args.generations} rollouts, <= {args.max_tokens} "
        f"tokens, {args.threads} thread(s), base {base}"
    )
    print(f"{'method':18s} {'s/step':>8s} {'vs GRPO':>8s} {'reprompt':>9s} {'len':>6s}  (median)")
    for method, values in seconds.items():
        med = statistics.median(values)
        reprompt = statistics.median(x for x, _ in extra[method])
        length = statistics.median(y for _, y in extra[method])
        print(f"{method:18s} {med:8.3f} {med / grpo:8.2f} {reprompt:9.2f} {length:6.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
