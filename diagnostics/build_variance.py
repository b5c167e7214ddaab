"""Does one RL stage learn on more than one build of the embedded base?

For each base seed: prepare the data, build the base (`cptlab build-base`, 2 threads), train
one stage per method x RL seed from it (`cptlab train-stage`, two 1-thread jobs side by side)
and evaluate each checkpoint on the stage domain's first id benchmark (`cptlab evaluate`, the
config's evaluation settings: greedy on 100 items by default). The same CLI commands as the
workflow's jobs, so a build's base seed 0 with the default config reproduces `make run`'s stage 1
(config/learning.yaml). Prints, per build, the base's accuracy and each method's accuracies and
gain (mean +- sd over RL seeds); writes everything to `--out`/summary.json.

    .venv/bin/python diagnostics/build_variance.py --config config/config.yaml \
        --base-seeds 0 1 2 --out results/build_variance        # ~13 min per build on 2 cores

A build's base also depends on thread count (float reductions), so builds here use the
workflow's 2 threads.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

from cptlab.plan import base_measure_benchmarks
from cptlab.validation import load_config


def cptlab(*args: str, threads: int, log: Path) -> None:
    """Run one cptlab command with `threads` torch threads; its output goes to `log`."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    command = [str(Path(sys.executable).parent / "cptlab"), *args]  # the venv's console script
    with open(log, "w") as out:
        if subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, env=env).returncode:
            raise SystemExit(f"failed: {' '.join(command)} (see {log})")


def accuracy(config_file: Path, checkpoint: Path, data: Path, out: Path) -> float:
    cptlab(
        "evaluate", "--config", str(config_file), "--checkpoint", str(checkpoint),
        "--data", str(data), "--benchmark", data.stem, "--out", str(out),
        "--responses", str(out.with_suffix(".responses.jsonl")), "--threads", "1",
        threads=1, log=out.with_suffix(".log"),
    )  # fmt: skip
    return json.loads(out.read_text())["accuracy"]


def one_build(config: dict, base_seed: int, args: argparse.Namespace) -> dict:
    folder = args.out / f"base_seed{base_seed}"
    data, logs = folder / "data", folder / "logs"
    for path in (data, logs):
        path.mkdir(parents=True, exist_ok=True)
    config = {**config, "base": {**config["base"], "seed": base_seed}}
    config_file = folder / "config.yaml"
    # Key order matters: the warm-up rows follow the order of `data.domains`.
    config_file.write_text(yaml.safe_dump(config, sort_keys=False))

    spec = config["data"]["domains"][args.domain]
    benchmarks = [f"{d}_pretrain" for d in config["data"]["domains"]]
    benchmarks += base_measure_benchmarks(config) + [spec["train"], spec["id"][0]]
    for name in dict.fromkeys(benchmarks):
        if (data / f"{name}.jsonl").exists():  # a rerun resumes, like the base and runs below
            continue
        cptlab(
            "prepare-data", "--config", str(config_file), "--benchmark", name,
            "--out", str(data / f"{name}.jsonl"), threads=1, log=logs / f"prepare_{name}.log",
        )  # fmt: skip
    base = folder / "base"
    if not (base / "manifest.json").exists():
        cptlab(
            "build-base", "--config", str(config_file), "--data-dir", str(data),
            "--out", str(base), "--threads", "2", threads=2, log=logs / "build_base.log",
        )  # fmt: skip
    test = data / f"{spec['id'][0]}.jsonl"
    result = {
        "base": json.loads((base / "manifest.json").read_text())["measurements"],
        "start": accuracy(config_file, base, test, folder / "eval_base.json"),
    }

    def stage(job: tuple[str, int]) -> float:
        method, seed = job
        run = folder / "runs" / f"{method}_seed{seed}"
        if not (run / "manifest.json").exists():
            cptlab(
                "train-stage", "--config", str(config_file), "--method", method,
                "--domain", args.domain, "--seed", str(seed), "--start-from", str(base),
                "--out", str(run), "--state-dir", str(folder / "state" / f"{method}_seed{seed}"),
                "--anchor", str(base), "--data", str(data / f"{spec['train']}.jsonl"),
                "--threads", "1",
                threads=1, log=logs / f"train_{method}_seed{seed}.log",
            )  # fmt: skip
        return accuracy(config_file, run, test, folder / f"eval_{method}_seed{seed}.json")

    jobs = [(method, seed) for method in args.methods for seed in args.seeds]
    with ThreadPoolExecutor(args.parallel) as pool:
        accuracies = dict(zip(jobs, pool.map(stage, jobs), strict=True))
    result["methods"] = {
        method: [accuracies[method, seed] for seed in args.seeds] for method in args.methods
    }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--base-seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="RL seeds")
    parser.add_argument("--methods", nargs="+", default=["grpo", "sdpo_frozen"])
    parser.add_argument("--domain", default="math")
    parser.add_argument("--parallel", type=int, default=2, help="training jobs side by side")
    parser.add_argument("--out", type=Path, default=Path("results/build_variance"))
    args = parser.parse_args()

    config = load_config(args.config)
    summary = {}
    for base_seed in args.base_seeds:
        build = summary[base_seed] = one_build(config, base_seed, args)
        print(f"base seed {base_seed}: {args.domain} id {build['start']:.2f}", flush=True)
        for method, values in build["methods"].items():
            gains = [100 * (v - build["start"]) for v in values]
            spread = statistics.stdev(gains) if len(gains) > 1 else 0.0
            listed = " / ".join(f"{v:.2f}" for v in values)
            print(f"  {method:<14} {listed}   gain {statistics.mean(gains):+.1f} +- {spread:.1f}")
        (args.out / "summary.json").write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
