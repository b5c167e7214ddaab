"""`cptlab headline`: what a finished run shows in the terminal, as lm-evaluation-harness prints its
results table: per method and stage, the gain on the stage's own domain and the forgetting of
the domains trained before it, with the share of items that flipped right -> wrong; then each
finding's verdict; then where the report is.

    gain        the stage's own id benchmark(s): accuracy after the stage minus before it, points
    forgetting  the id benchmarks of the domains trained in earlier stages: accuracy at the end
                of each one's own stage minus after this stage, mean over them, points
                (above 0: forgotten; none in stage 1)
    r->w        of every benchmark's items, the chance-adjusted share that went right -> wrong
                over the stage (transitions.csv, kind `stage`), %

Each is the mean over seeds, with the t-based 95% interval where there are several. Reads
scores.csv, transitions.csv and findings.csv.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from cptlab.layout import Layout
from cptlab.plan import Plan
from cptlab.results import cl_metrics as clm
from cptlab.results.aggregate import read_csv


def _stage_values(scores: pd.DataFrame, plan: Plan, method: str, seed: int) -> dict:
    """stage -> (gain, forgetting) of one chain, points."""
    table = scores[(scores.method == method) & (scores.seed == seed)]
    accuracy = {
        (int(k), b): float(a) for k, b, a in table[["stage", "benchmark", "accuracy"]].values
    }
    first: dict[str, int] = {}
    values = {}
    for k, domain in enumerate(plan.sequence, start=1):
        first.setdefault(domain, k)
        own = [b.name for b in plan.of_split("id") if b.domain == domain]
        gain = clm.nan_mean(100 * (accuracy[(k, b)] - accuracy[(k - 1, b)]) for b in own)
        earlier = [
            (b.name, first[b.domain])
            for b in plan.of_split("id")
            if b.domain in first and first[b.domain] < k and b.domain != domain
        ]
        forgetting = clm.nan_mean(100 * (accuracy[(t, b)] - accuracy[(k, b)]) for b, t in earlier)
        values[k] = (gain, forgetting)
    return values


def _flips(transitions: pd.DataFrame, method: str, seed: int) -> dict[int, float]:
    """stage -> the chance-adjusted share of items gone right -> wrong over it, %."""
    rows = transitions[
        (transitions.method == method)
        & (transitions.seed == seed)
        & (transitions.kind == "stage")
        & (transitions.benchmark == "all")
    ]
    return {int(k): 100 * float(v) for k, v in rows[["to_stage", "right_to_wrong_adjusted"]].values}


def _cell(values: list[float], signed: bool = True) -> str:
    mean, _, low, high, n = clm.mean_ci(values)
    if n == 0:
        return "—"
    text = f"{mean:+.1f}" if signed else f"{mean:.1f}"
    return text if n < 2 or not np.isfinite(low) else f"{text} [{low:.1f}, {high:.1f}]"


def headline(config: dict, layout: Layout) -> list[str]:
    """The lines of the headline table, the findings' verdicts and the report's path."""
    plan = Plan.from_config(config)
    scores = read_csv(layout.scores_csv)
    transitions = read_csv(layout.transitions_csv)
    seeds = f"{len(plan.seeds)} seed{'s' if len(plan.seeds) > 1 else ''}"
    head = ["method", "stage", "gain (pts)", "forgetting (pts)", "right->wrong (%)"]
    body = []
    for method in plan.methods:
        per_seed = {s: _stage_values(scores, plan, method, s) for s in plan.seeds}
        flips = {s: _flips(transitions, method, s) for s in plan.seeds}
        for k, domain in enumerate(plan.sequence, start=1):
            gains = [per_seed[s][k][0] for s in plan.seeds]
            losses = [per_seed[s][k][1] for s in plan.seeds]
            flipped = [flips[s].get(k, math.nan) for s in plan.seeds]
            body.append(
                [method, f"{k} {domain}", _cell(gains), _cell(losses), _cell(flipped, False)]
            )
    widths = [max(len(row[i]) for row in [head, *body]) for i in range(len(head))]
    rule = "|".join("-" * (w + 2) for w in widths)

    def line(row: list[str]) -> str:
        return "|".join(f" {c:<{w}} " for c, w in zip(row, widths, strict=True))

    lines = [
        f"cptlab: {config['experiment']}, {', '.join(plan.methods)}, {seeds} "
        "(mean over seeds [95% CI])",
        "",
        line(head),
        rule,
        *(line(row) for row in body),
        "",
    ]
    if layout.findings_csv.is_file():
        lines += ["findings:", *_verdicts(read_csv(layout.findings_csv)), ""]
    lines.append(f"report: {layout.report}")
    return lines


def _verdicts(findings: pd.DataFrame) -> list[str]:
    lines = []
    for row in findings.to_dict("records"):
        value = row["value"]
        shown = "—" if not np.isfinite(value) else f"{value:.3g}"
        if np.isfinite(value) and np.isfinite(row["ci_low"]):
            shown += f" [{row['ci_low']:.3g}, {row['ci_high']:.3g}]"
        name = f"{row['finding']} {row['part']}".strip()
        lines.append(f"  {name:<13} {row['verdict']:<13} {shown:<24} {row['claim']}")
    return lines
