"""Every evaluated checkpoint of a chain, in training order: the base, then per stage its
within-stage checkpoints (`evaluation.within_stage`) and its end; and trajectory.csv, their
scores one row per (checkpoint, benchmark).

A checkpoint's `chain_step` counts rollout batches from the base across the chain's stages (the
x axis of the CL curves); `step` counts them within its stage (the stage's steps at its end, 0
for the base). A within-stage checkpoint is scored on each benchmark's sample of rows
(`within_stage.rows`); `n` says how many.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from cptlab.evaluation.scoring import SAMPLED_KEYS
from cptlab.evaluation.settings import EvalSettings
from cptlab.layout import Layout
from cptlab.plan import Plan
from cptlab.train.spec import resolve_stage

BASE, WITHIN, END = "base", "within", "end"  # a checkpoint's kind
TRAJECTORY_COLUMNS = [
    "method",
    "seed",
    "stage",
    "stage_domain",
    "step",
    "chain_step",
    "checkpoint",
    "benchmark",
    "benchmark_domain",
    "split",
    "accuracy",
    "n",
    "ci_low",
    "ci_high",
    "samples",
    *SAMPLED_KEYS,
]


@dataclass(frozen=True)
class Checkpoint:
    """One evaluated checkpoint of a chain.

    stage:      0 (the base) or the stage k it belongs to
    step:       rollout batches into its stage (the stage's steps at its end, 0 for the base)
    chain_step: rollout batches from the base
    kind:       BASE, WITHIN or END
    """

    stage: int
    step: int
    chain_step: int
    kind: str

    @property
    def within(self) -> int | None:
        """The step that names a within-stage checkpoint's files (None: the base or an end)."""
        return self.step if self.kind == WITHIN else None


def chain_checkpoints(config: dict, method: str) -> list[Checkpoint]:
    """The checkpoints of a chain of `method`, in training order."""
    plan = Plan.from_config(config)
    evaluation = EvalSettings.from_config(config)
    found, offset = [Checkpoint(0, 0, 0, BASE)], 0
    for k, domain in enumerate(plan.sequence, start=1):
        steps = resolve_stage(config, method, domain).steps
        found += [
            Checkpoint(k, s, offset + s, WITHIN) for s in evaluation.within_stage_steps(steps)
        ]
        found.append(Checkpoint(k, steps, offset + steps, END))
        offset += steps
    return found


def eval_path(layout: Layout, kind: str, benchmark: str, method: str, seed: int, at: Checkpoint):
    """`kind` (eval_file or responses_file) of one (checkpoint, benchmark) of a chain."""
    return getattr(layout, kind)(benchmark, method, seed, at.stage, at.within)


def trajectory(config: dict, layout: Layout, read_eval) -> pd.DataFrame:
    """trajectory.csv's table (TRAJECTORY_COLUMNS); `read_eval(path, benchmark)` reads one
    EVAL.json (cptlab.results.aggregate)."""
    plan = Plan.from_config(config)
    rows = []
    for method, seed in plan.chains:
        for at in chain_checkpoints(config, method):
            for b in plan.benchmarks:
                record = read_eval(eval_path(layout, "eval_file", b.name, method, seed, at), b.name)
                rows.append(
                    {
                        "method": method,
                        "seed": seed,
                        "stage": at.stage,
                        "stage_domain": plan.stage_domain(at.stage),
                        "step": at.step,
                        "chain_step": at.chain_step,
                        "checkpoint": at.kind,
                        "benchmark": b.name,
                        "benchmark_domain": b.domain,
                        "split": b.split,
                        **{k: record[k] for k in ("accuracy", "n", "ci_low", "ci_high", "samples")},
                        **{k: _number(record.get(k)) for k in SAMPLED_KEYS},
                    }
                )
    return pd.DataFrame(rows, columns=TRAJECTORY_COLUMNS)


def _number(value: object) -> float:
    return float("nan") if value is None else float(value)
