"""Where one training step's time goes, per method and domain, as shares of the step.

    .venv/bin/python bench/bench_step_profile.py --results results/embedded \
        --methods grpo sdpo_frozen --domains math tool code --steps 6

With `--toggle KEY` (a boolean `training` key, e.g. shared_prompt_forward), every run is made
with KEY off and then on, and the on/off ratio of the step time is printed per run.

Each (method, domain) trains `--steps` steps of its stage from the embedded base with the
config's settings (the config in the results folder, as the workflow ran it); the first
`--skip` steps are not counted. The trainer's own methods are wrapped with timers, counted
exclusively (a phase's time excludes the phases inside it):

    generation          rollouts (HF generate)                  trainer._generate
    reward              the verifier, the code sandbox included trainer._calculate_rewards
    rollout, other      advantages, teacher prompts, log-probs  trainer._prepare_inputs
    policy forward      the loss's student forward              trainer.compute_loss
    teacher forward     SDPO's teacher forward                  trainer._forward_logits
    backward            loss.backward                           accelerator.backward
    optimizer           clipping, AdamW, scheduler              the optimizer-step callbacks
    logging and probes  the step's log line, KL probe, collapse trainer.log
    other               the rest of the step (data loading, hooks)
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
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import TrainerCallback  # noqa: E402

from cptlab.layout import Layout  # noqa: E402
from cptlab.rows import read_jsonl  # noqa: E402
from cptlab.train.spec import resolve_stage  # noqa: E402
from cptlab.train.stage import build_trainer  # noqa: E402

PHASES = (
    "generation", "reward", "rollout, other", "policy forward", "teacher forward", "backward",
    "optimizer", "logging and probes", "other",
)  # fmt: skip


class Timers:
    """Exclusive time per phase: a phase entered inside another is not counted in it."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = defaultdict(float)
        self.stack: list[list] = []  # [name, start, time spent in nested phases]

    def enter(self, name: str) -> None:
        self.stack.append([name, time.perf_counter(), 0.0])

    def leave(self) -> None:
        name, start, nested = self.stack.pop()
        elapsed = time.perf_counter() - start
        self.totals[name] += elapsed - nested
        if self.stack:
            self.stack[-1][2] += elapsed

    def wrap(self, owner, attribute: str, name) -> None:
        """Time every call of owner.attribute as phase `name` (or name(args, kwargs))."""
        original = getattr(owner, attribute)

        def timed(*args, **kwargs):
            self.enter(name(args, kwargs) if callable(name) else name)
            try:
                return original(*args, **kwargs)
            finally:
                self.leave()

        setattr(owner, attribute, timed)


class OptimizerTimer(TrainerCallback):
    def __init__(self, timers: Timers) -> None:
        self.timers = timers

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        self.timers.enter("optimizer")

    def on_optimizer_step(self, args, state, control, **kwargs):
        self.timers.leave()


def profile(config: dict, layout: Layout, method: str, domain: str, args, work: Path) -> dict:
    settings = resolve_stage(config, method, domain)
    rows = read_jsonl(layout.data_file(settings.train_benchmark))
    timers = Timers()
    trainer = build_trainer(
        settings, rows, layout.base_dir, work / f"{method}-{domain}", seed=0,
        anchor_path=None, callbacks=[OptimizerTimer(timers)],
    )  # fmt: skip
    teacher = getattr(trainer, "teacher_model", None)
    timers.wrap(trainer, "_generate", "generation")
    timers.wrap(trainer, "_calculate_rewards", "reward")
    timers.wrap(trainer, "_prepare_inputs", "rollout, other")
    timers.wrap(trainer, "compute_loss", "policy forward")
    if hasattr(trainer, "_forward_logits"):
        timers.wrap(
            trainer,
            "_forward_logits",
            lambda a, k: (
                "teacher forward"
                if k.get("model", a[0] if a else None) is teacher
                else "policy forward"
            ),
        )
    timers.wrap(trainer.accelerator, "backward", "backward")
    timers.wrap(trainer, "log", "logging and probes")
    steps: list[dict[str, float]] = []
    seen: dict[str, float] = {}

    class StepEnd(TrainerCallback):
        def on_step_end(self, cb_args, state, control, **kwargs):
            now = {k: timers.totals[k] for k in PHASES}
            steps.append({k: now[k] - seen.get(k, 0.0) for k in PHASES})
            seen.update(now)

    trainer.add_callback(StepEnd())
    trainer.train()
    step_seconds = [r["step_seconds"] for r in trainer.state.log_history if "step_seconds" in r]
    counted = steps[args.skip :]
    total = statistics.mean(step_seconds[args.skip :])
    shares = {k: statistics.mean(s[k] for s in counted) for k in PHASES if k != "other"}
    shares["other"] = max(0.0, total - sum(shares.values()))
    lengths = [
        r["completions/mean_length"] for r in trainer.state.log_history if "step_seconds" in r
    ]
    return {"step_seconds": total, "phases": shares, "mean_length": statistics.mean(lengths)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", type=Path, required=True, help="results/<experiment>")
    parser.add_argument("--methods", nargs="+", default=["grpo", "sdpo_frozen"])
    parser.add_argument("--domains", nargs="+", default=["math", "tool", "code"])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--skip", type=int, default=1, help="first steps not counted")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    parser.add_argument("--toggle", default=None, help="a boolean training key: run off, then on")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    transformers.logging.set_verbosity_error()
    layout = Layout(args.results)
    config = json.loads(layout.config_file.read_text())
    config["training"] = {**config.get("training", {}), "steps": args.steps, "save_steps": 10**6}
    config["training"]["domain_steps"] = {}
    work = Path(tempfile.mkdtemp(prefix="bench_step_profile_"))
    settings = [("", config)]
    if args.toggle:
        settings = [
            (
                f" {args.toggle}={value}",
                {**config, "training": {**config["training"], args.toggle: value}},
            )
            for value in (False, True)
        ]
    results = {}
    try:
        for domain in args.domains:
            for method in args.methods:
                for label, run_config in settings:
                    run = f"{method}/{domain}{label}"
                    results[run] = profile(run_config, layout, method, domain, args, work)
                    print(f"done {run}", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    counted = args.steps - args.skip
    print(f"{counted} steps counted per run, {args.threads} thread(s); shares of a step")
    width = max(20, *(len(run) for run in results))
    print(
        f"{'run':{width}s} {'s/step':>7s} {'len':>5s} " + " ".join(f"{p[:10]:>10s}" for p in PHASES)
    )
    for run, r in results.items():
        shares = " ".join(f"{r['phases'][p] / r['step_seconds']:10.1%}" for p in PHASES)
        print(f"{run:{width}s} {r['step_seconds']:7.2f} {r['mean_length']:5.1f} {shares}")
    if args.toggle:
        print(f"step time with {args.toggle} on / off, measured side by side:")
        for domain in args.domains:
            for method in args.methods:
                off = results[f"{method}/{domain} {args.toggle}=False"]["step_seconds"]
                on = results[f"{method}/{domain} {args.toggle}=True"]["step_seconds"]
                print(f"  {method}/{domain}: {on / off:.2f}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
