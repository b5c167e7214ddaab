"""`cptlab aggregate`: every evaluation of an experiment in one long table, and the
continual-learning metrics computed from it.

Inputs: the EVAL.json file of every (checkpoint, benchmark) that `cptlab evaluate` wrote
(cptlab.layout: the base as stage 0, then stages 1..K of every chain).

Outputs (each written atomically, where cptlab.layout puts them):

    scores.csv      SCORE_COLUMNS (`backend`: hf or vllm; `samples`: k of avg@k); stage 0 rows
                    (stage_domain "base") repeat the base's scores for every method and seed.
                    `accuracy` is the mean reward (all tests pass, for code); for benchmarks
                    whose verifier runs tests, `test_pass_fraction` (with its interval) is the
                    mean fraction of tests passed, the study's reported code metric; NaN
                    elsewhere. pass@1, pass@k and maj@k (k = `samples`) with their intervals
                    where k >= 2, NaN otherwise (cptlab.evaluation.scoring).
    trajectory.csv  every evaluated checkpoint of each chain in training order, within-stage
                    ones included (cptlab.results.trajectory).
    item_ledger.csv, transitions.csv   each item's success probability at each checkpoint, and
                    the right->wrong / wrong->right counts per transition, chance-adjusted
                    (cptlab.results.ledger).
    cl_metrics.csv  METRIC_COLUMNS, one row per (method, seed, stage, metric, benchmark); see
                    `cl_metric_rows` for the metrics. `note` says why a value is NaN.
    cl_summary.csv  SUMMARY_COLUMNS: mean over seeds with a t-based 95% interval (NaN interval
                    with a single seed).

The benchmarks are every `id` and `ood` name of `data.domains` (config order); a benchmark's
domain and split are its place in the config. Accuracies are fractions, relative measures %.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from cptlab.artifacts import atomic_write_text
from cptlab.errors import InputError
from cptlab.evaluation.scoring import PASS_FRACTION_KEYS, SAMPLED_KEYS
from cptlab.layout import Layout
from cptlab.plan import Plan
from cptlab.results import cl_metrics as clm
from cptlab.results.ledger import ledger_tables
from cptlab.results.trajectory import trajectory

SCORE_COLUMNS = [
    "method",
    "seed",
    "stage",
    "stage_domain",
    "benchmark",
    "benchmark_domain",
    "split",
    "accuracy",
    "n",
    "ci_low",
    "ci_high",
    "samples",
    "backend",
    "test_pass_fraction",
    "test_pass_fraction_ci_low",
    "test_pass_fraction_ci_high",
    *SAMPLED_KEYS,
]
METRIC_COLUMNS = [
    "method",
    "seed",
    "stage",
    "stage_domain",
    "metric",
    "benchmark",
    "value",
    "note",
]
SUMMARY_COLUMNS = [
    "method",
    "stage",
    "stage_domain",
    "metric",
    "benchmark",
    "mean",
    "std",
    "ci_low",
    "ci_high",
    "n_seeds",
]
# What a score row takes from its EVAL.json: `samples` and `backend` say how it was measured
# (avg@k; hf or vllm), so rows measured differently are never mixed unknowingly.
EVAL_KEYS = ("accuracy", "n", "ci_low", "ci_high", "samples", "backend")
BASE_NOTE = "base accuracy 0: relative performance undefined"


class AggregateError(InputError):
    """An evaluation file exists but does not hold what its path says."""


def _read_eval(path: Path, benchmark: str) -> dict:
    try:
        record = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise AggregateError(f"{path}: not valid JSON ({err})") from err
    if record.get("benchmark", benchmark) != benchmark:
        raise AggregateError(
            f"{path}: holds benchmark {record.get('benchmark')!r}, expected {benchmark!r}"
        )
    missing = [k for k in EVAL_KEYS if k not in record]
    if missing:
        raise AggregateError(f"{path}: missing keys {missing}")
    return record


def _number(value: object) -> float:
    return float("nan") if value is None else float(value)


def collect_scores(config: dict, layout: Layout) -> pd.DataFrame:
    """The long table of every (method, seed, stage, benchmark) accuracy (SCORE_COLUMNS).

    Raises FileNotFoundError naming the missing EVAL.json file(s)."""
    plan = Plan.from_config(config)
    wanted = [(None, None, 0, b) for b in plan.benchmarks]
    for method in plan.methods:
        for seed in plan.seeds:
            for stage in plan.stages[1:]:
                wanted += [(method, seed, stage, b) for b in plan.benchmarks]
    paths = {(m, s, k, b.name): layout.eval_file(b.name, m, s, k) for m, s, k, b in wanted}
    missing = [str(p) for p in paths.values() if not p.exists()]
    if missing:
        more = f" (and {len(missing) - 5} more)" if len(missing) > 5 else ""
        raise FileNotFoundError(f"missing evaluation file(s): {', '.join(missing[:5])}{more}")
    records = {key: _read_eval(path, key[3]) for key, path in paths.items()}
    rows = []
    for method in plan.methods:
        for seed in plan.seeds:
            for stage in plan.stages:
                for b in plan.benchmarks:
                    key = (None, None, 0, b.name) if stage == 0 else (method, seed, stage, b.name)
                    r = records[key]
                    rows.append(
                        {
                            "method": method,
                            "seed": seed,
                            "stage": stage,
                            "stage_domain": plan.stage_domain(stage),
                            "benchmark": b.name,
                            "benchmark_domain": b.domain,
                            "split": b.split,
                            "accuracy": float(r["accuracy"]),
                            "n": int(r["n"]),
                            "ci_low": float(r["ci_low"]),
                            "ci_high": float(r["ci_high"]),
                            "samples": int(r["samples"]),
                            "backend": r["backend"],
                            # optional in an EVAL.json (null, or absent from older ones)
                            **{k: _number(r.get(k)) for k in (*PASS_FRACTION_KEYS, *SAMPLED_KEYS)},
                        }
                    )
    return pd.DataFrame(rows, columns=SCORE_COLUMNS)


def cl_metric_rows(plan: Plan, acc: dict[int, dict[str, float]]) -> list[dict]:
    """The CL metrics of one run from its accuracies acc[stage][benchmark] (stage 0 = base).

    Per stage k (0..K), metric / benchmark:
      avg_accuracy / "all"              mean accuracy over every benchmark
      avg_accuracy / "id_trained"       over the id benchmarks of the domains trained in 1..k
                                        (NaN at stage 0)
      avg_accuracy / "ood"              over the OOD benchmarks
      relative / <benchmark>            100 (acc - acc_base) / acc_base, NaN when acc_base is 0
      gain, forgetting / <benchmark>    max(0, relative), max(0, -relative) (the paper's)
      relative / "ood_mean"             mean relative performance over the OOD benchmarks (those
                                        with a defined value; the note names any left out)
    Per stage k >= 2:
      cl_forgetting / <benchmark>       Chaudhry et al.: max over stages l in [t, k-1] of acc
                                        minus acc at k, t the first stage that trained the
                                        benchmark's domain; for every benchmark of the
                                        domains trained before k
      cl_forgetting / "id_mean"         mean of the above over id benchmarks
      bwt / "id"                        backward transfer over stages 1..k (tasks = stages;
                                        task accuracy = mean over the domain's id benchmarks)
      fwt / "id"                        forward transfer over stages 1..k (vs the base)
    """
    names = [b.name for b in plan.benchmarks]
    ood = [b.name for b in plan.of_split("ood")]
    base = acc[0]
    rows: list[dict] = []

    def add(stage: int, metric: str, benchmark: str, value: float, note: str = "") -> None:
        rows.append(
            {
                "stage": stage,
                "stage_domain": plan.stage_domain(stage),
                "metric": metric,
                "benchmark": benchmark,
                "value": float(value),
                "note": note,
            }
        )

    def domain_id_acc(domain: str, stage: int) -> float:
        ids = [b.name for b in plan.benchmarks if b.domain == domain and b.split == "id"]
        return clm.average_accuracy([acc[stage][n] for n in ids]) if ids else float("nan")

    first_trained = {}
    for k, domain in enumerate(plan.sequence, start=1):
        first_trained.setdefault(domain, k)

    for k in plan.stages:
        trained = set(plan.sequence[:k])
        add(k, "avg_accuracy", "all", clm.average_accuracy(acc[k][n] for n in names))
        seen_ids = [b.name for b in plan.of_split("id") if b.domain in trained]
        add(
            k,
            "avg_accuracy",
            "id_trained",
            clm.average_accuracy(acc[k][n] for n in seen_ids),
            "" if seen_ids else "no trained domain with an id benchmark yet",
        )
        add(k, "avg_accuracy", "ood", clm.average_accuracy(acc[k][n] for n in ood))
        relatives = {}
        for n in names:
            rel = clm.relative_performance(acc[k][n], base[n])
            relatives[n] = rel
            note = BASE_NOTE if np.isnan(rel) else ""
            add(k, "relative", n, rel, note)
            add(k, "gain", n, clm.gain(rel), note)
            add(k, "forgetting", n, clm.forgetting(rel), note)
        left_out = [n for n in ood if np.isnan(relatives[n])]
        add(
            k,
            "relative",
            "ood_mean",
            clm.nan_mean(relatives[n] for n in ood),
            f"left out (base accuracy 0): {' '.join(left_out)}" if left_out else "",
        )
        if k >= 2:
            id_values = []
            for b in plan.benchmarks:
                t = first_trained.get(b.domain)
                if t is None or t >= k:
                    continue
                f = clm.max_forgetting([acc[s][b.name] for s in range(t, k + 1)])
                add(k, "cl_forgetting", b.name, f)
                if b.split == "id":
                    id_values.append(f)
            add(k, "cl_forgetting", "id_mean", clm.nan_mean(id_values))
            tasks = plan.sequence[:k]
            matrix = [[domain_id_acc(d, s) for d in tasks] for s in range(1, k + 1)]
            base_tasks = [domain_id_acc(d, 0) for d in tasks]
            add(k, "bwt", "id", clm.backward_transfer(matrix))
            add(k, "fwt", "id", clm.forward_transfer(matrix, base_tasks))
    return rows


def compute_metrics(config: dict, scores: pd.DataFrame) -> pd.DataFrame:
    """cl_metrics.csv's table (METRIC_COLUMNS) from scores.csv's."""
    plan = Plan.from_config(config)
    out = []
    for (method, seed), run in scores.groupby(["method", "seed"], sort=False):
        acc: dict[int, dict[str, float]] = {}
        for stage, benchmark, value in run[["stage", "benchmark", "accuracy"]].itertuples(
            index=False
        ):
            acc.setdefault(int(stage), {})[benchmark] = float(value)
        for row in cl_metric_rows(plan, acc):
            out.append({"method": method, "seed": seed, **row})
    return pd.DataFrame(out, columns=METRIC_COLUMNS)


def summarise_seeds(metrics: pd.DataFrame) -> pd.DataFrame:
    """Mean over seeds of every metric with a t-based 95% interval (SUMMARY_COLUMNS)."""
    keys = ["method", "stage", "stage_domain", "metric", "benchmark"]
    out = []
    for key, group in metrics.groupby(keys, sort=False):
        mean, std, low, high, n = clm.mean_ci(group["value"].to_numpy())
        out.append(
            dict(zip(keys, key, strict=True))
            | {"mean": mean, "std": std, "ci_low": low, "ci_high": high, "n_seeds": n}
        )
    return pd.DataFrame(out, columns=SUMMARY_COLUMNS)


def write_csv(path: str | Path, frame: pd.DataFrame) -> Path:
    return atomic_write_text(path, frame.to_csv(index=False, na_rep="NaN", lineterminator="\n"))


def read_csv(path: str | Path) -> pd.DataFrame:
    """Read a table written by `write_csv` (empty notes stay empty strings)."""
    frame = pd.read_csv(path, keep_default_na=False, na_values=["NaN"])
    return frame


def aggregate(config: dict, layout: Layout) -> dict[str, Path]:
    """Write scores.csv, trajectory.csv, cl_metrics.csv, cl_summary.csv, item_ledger.csv and
    transitions.csv from the evaluation files of `layout`; returns their paths."""
    scores = collect_scores(config, layout)
    metrics = compute_metrics(config, scores)
    summary = summarise_seeds(metrics)
    ledger, transitions = ledger_tables(config, layout, seed=_bootstrap_seed(config))
    return {
        "scores": write_csv(layout.scores_csv, scores),
        "trajectory": write_csv(layout.trajectory_csv, trajectory(config, layout, _read_eval)),
        "cl_metrics": write_csv(layout.cl_metrics_csv, metrics),
        "cl_summary": write_csv(layout.cl_summary_csv, summary),
        "item_ledger": write_csv(layout.item_ledger_csv, ledger),
        "transitions": write_csv(layout.transitions_csv, transitions),
    }


def _bootstrap_seed(config: dict) -> int:
    """The ledger's bootstrap seed: the evaluation's, as its intervals use."""
    return int((config.get("evaluation") or {}).get("seed", 0))
