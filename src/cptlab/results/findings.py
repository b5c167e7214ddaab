"""The study's six findings ("Denser ≠ Better", arXiv 2607.01763; each claim is stated in words
in PARTS below), each scored on this run, plus the testbed's two checks: every stage learns
(GRPO and SDPO_0), and SFT forgets (the positive control), and the comparison of pass@1 with
pass@k by method ("sharpening": does a dense teacher raise pass@1 while pass@k falls?), where the
evaluation draws k >= 2 samples per item.

Every finding is one or more *parts*: a quantity measured per seed (most are paired
differences between two methods on the same seed), its mean with a t-based 95% interval over
seeds, and the direction the study reports. The verdict of a part:

    agrees          the interval lies on the study's side of the null value
    contradicts     it lies on the other side
    inconclusive    it covers the null value, or there is one seed (no interval)
    not measured    a method it needs is not in run.methods (or its outputs are missing)

Methods play roles (`findings.methods` in the config: which method is GRPO, SDPO_0, ...). A
row's `comparison` says how its methods were matched: at their configured settings (the same
steps and learning rate), or at a matched movement when each ends every stage at the same KL to
the stage start (`training.kl_budget`); a stage that reached its step cap first is named in the
row's note.

Inputs: scores.csv, cl_metrics.csv, each stage's train_log.jsonl, and per chain the drift
folder's params_summary.csv, responses_summary.csv and artifact_trend_log.csv
(cptlab.drift.chain). Output: findings.csv
(COLUMNS) and findings.html, the report's first table.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from cptlab.artifacts import MANIFEST, atomic_write_text, read_json_lines, read_manifest
from cptlab.config import schema_file
from cptlab.layout import Layout
from cptlab.plan import Plan
from cptlab.results import cl_metrics as clm
from cptlab.results.aggregate import read_csv, write_csv
from cptlab.train.spec import method_settings, training_section

ROLES = {  # the schema's defaults of findings.methods
    role: spec["default"]
    for role, spec in schema_file()["properties"]["findings"]["properties"]["methods"][
        "properties"
    ].items()
}
COLUMNS = [
    "finding",
    "part",
    "claim",
    "quantity",
    "methods",
    "value",
    "ci_low",
    "ci_high",
    "n_seeds",
    "null",
    "study_direction",
    "verdict",
    "comparison",
    "note",
]
FORMAT_METRIC = "collapse/format/{token}/repeated_share"
CONTROL_LOSS = -10.0  # points an earlier domain must lose under SFT (the control's bound)
LEARNING_GAIN = 10.0  # points each stage must add to its own domain (the learning criterion)
LEARNERS = {"a": "grpo", "b": "sdpo_0"}  # the methods the learning criterion holds for


@dataclass(frozen=True)
class Part:
    """One measured quantity of a finding.

    finding, part   e.g. "5", "b"
    claim           the study's finding, in words
    quantity        what is measured, in words (units included)
    roles           the method roles it needs (ROLES' keys)
    per_seed        (run, seed) -> the quantity on that seed (NaN when it cannot be measured)
    direction       +1: the study reports a value above `null`; -1: below
    null            the value of no effect (0 for differences, 1 for ratios)
    """

    finding: str
    part: str
    claim: str
    quantity: str
    roles: tuple[str, ...]
    per_seed: Callable[[RunTables, int], float]
    direction: int
    null: float = 0.0


class RunTables:
    """What the findings read of one experiment's results folder."""

    def __init__(self, config: dict, layout: Layout, methods: dict[str, str]) -> None:
        self.plan = Plan.from_config(config)
        self.layout = layout
        self.methods = methods
        self.metrics = read_csv(layout.cl_metrics_csv)
        self.scores = read_csv(layout.scores_csv)
        self.last = max(self.plan.stages)
        self.format_tokens = list(training_section(config).collapse.format_tokens)
        self.kl_budgets = {
            name: method_settings(config, name)[2].kl_budget for name in config.get("methods") or {}
        }
        # Read once: every row of a method with a budget names the stages that missed it.
        self.capped = {
            m: self._capped_stages(m) for m in self.plan.methods if self.kl_budgets.get(m)
        }

    def metric(self, role: str, seed: int, stage: int, metric: str, benchmark: str) -> float:
        m = self.metrics
        rows = m[
            (m.method == self.methods[role])
            & (m.seed == seed)
            & (m.stage == stage)
            & (m.metric == metric)
            & (m.benchmark == benchmark)
        ]
        return float(rows["value"].iloc[0]) if len(rows) else math.nan

    def drift(self, role: str, seed: int, name: str) -> pd.DataFrame | None:
        path = self.layout.drift_chain_dir(self.methods[role], seed) / f"{name}.csv"
        return pd.read_csv(path) if path.is_file() else None

    def seeds(self) -> list[int]:
        return list(self.plan.seeds)

    def comparison(self, roles: tuple[str, ...]) -> tuple[str, str]:
        """(how the methods of `roles` are compared, a note naming the stages that missed the
        match): a matched movement when each method ends every stage at the same kl_budget."""
        budgets = {self.kl_budgets.get(self.methods[role]) for role in roles}
        if len(budgets) != 1 or None in budgets:
            return "configured settings", ""
        capped = [stage for role in roles for stage in self.capped.get(self.methods[role], [])]
        note = f"stopped at the step cap below the budget: {', '.join(capped)}" if capped else ""
        return f"matched movement: KL {budgets.pop():g} to each stage's start", note

    def _capped_stages(self, method: str) -> list[str]:
        """The stages of `method` that reached their step cap before the KL budget."""
        capped = []
        for seed in self.seeds():
            for k, domain in enumerate(self.plan.sequence, start=1):
                stage = self.layout.stage_dir(method, seed, k, domain)
                if (stage / MANIFEST).is_file() and read_manifest(stage)["kl_budget"][
                    "reached"
                ] is None:
                    capped.append(f"{method} seed {seed} stage {k}")
        return capped


# ----- the quantities ---------------------------------------------------------------------------


def _id_accuracy(run: RunTables, role: str, seed: int) -> float:
    """Mean accuracy (points) over the id benchmarks of the trained domains, after the last
    stage."""
    return 100 * run.metric(role, seed, run.last, "avg_accuracy", "id_trained")


def _ood_relative(run: RunTables, role: str, seed: int, trained: bool) -> float:
    """Mean relative performance (%) after the last stage over the OOD benchmarks of the
    trained domains (source-like) or of the domains never trained (partly related)."""
    domains = set(run.plan.sequence)
    names = [b.name for b in run.plan.of_split("ood") if (b.domain in domains) == trained]
    return clm.nan_mean(run.metric(role, seed, run.last, "relative", n) for n in names)


def _forgetting(run: RunTables, role: str, seed: int) -> float:
    """Chaudhry forgetting (points) after the last stage, mean over the earlier id benchmarks."""
    return 100 * run.metric(role, seed, run.last, "cl_forgetting", "id_mean")


def _nss(run: RunTables, role: str, seed: int) -> float:
    table = run.drift(role, seed, "params_summary")
    if table is None:
        return math.nan
    rows = table[(table.stage == run.last) & (table.reference == "base")]
    return float(rows["nss"].iloc[0]) if len(rows) else math.nan


def _similarity(run: RunTables, role: str, seed: int) -> float:
    """Median similarity (%) of the last stage's responses to the base's, over every benchmark
    (embedding cosine; ROUGE-L where the run has no embedder)."""
    table = run.drift(role, seed, "responses_summary")
    if table is None:
        return math.nan
    rows = table[(table.stage == run.last) & (table.benchmark == "all")]
    if not len(rows):
        return math.nan
    cosine = float(rows["cosine_median"].iloc[0])
    return cosine if np.isfinite(cosine) else float(rows["rouge_l_median"].iloc[0])


def _movement(run: RunTables, role: str, seed: int) -> float:
    """KL to the stage start at the end of each stage (the train log's last `kl_to_start`), mean
    over the stages; NaN when a log or its probe is missing."""
    values = []
    for k, domain in enumerate(run.plan.sequence, start=1):
        path = run.layout.train_log(run.methods[role], seed, k, domain)
        if not path.is_file():
            return math.nan
        records = read_json_lines(path)
        values.append(float(records[-1].get("kl_to_start", math.nan)) if records else math.nan)
    return clm.nan_mean(values)


def _format_share(run: RunTables, role: str, seed: int) -> float:
    """The share of training completions repeating a format token (`\\boxed`), mean over a
    stage's steps, at the stage (and token) where it is highest."""
    table = run.drift(role, seed, "artifact_trend_log")
    if table is None or table.empty:
        return math.nan
    columns = [FORMAT_METRIC.format(token=t) for t in run.format_tokens]
    columns = [c for c in columns if c in table]
    if not columns:
        return math.nan
    return float(table.groupby("stage")[columns].mean().max().max())


def _accuracies(run: RunTables, role: str, seed: int) -> dict[tuple[int, str], float]:
    """(stage, benchmark) -> accuracy of one chain, the base as stage 0."""
    method = run.methods[role]
    table = run.scores[(run.scores.method == method) & (run.scores.seed == seed)]
    return {(int(k), b): float(a) for k, b, a in table[["stage", "benchmark", "accuracy"]].values}


def _earlier_drops(run: RunTables, role: str, seed: int) -> dict[str, float]:
    """Per id benchmark of a domain trained before the last stage: its accuracy after the last
    stage minus after the stage that first trained its domain, points."""
    accuracy = _accuracies(run, role, seed)
    drops = {}
    for k, domain in enumerate(run.plan.sequence[:-1], start=1):
        for b in run.plan.of_split("id"):
            if b.domain == domain and b.name not in drops:
                end, trained = accuracy.get((run.last, b.name)), accuracy.get((k, b.name))
                if end is not None and trained is not None:
                    drops[b.name] = 100 * (end - trained)
    return drops


def _stage_gains(run: RunTables, role: str, seed: int) -> dict[str, float]:
    """Per stage: its domain's id accuracy after the stage minus after the stage before (the
    base for stage 1), points, keyed by id benchmark."""
    accuracy = _accuracies(run, role, seed)
    gains = {}
    for k, domain in enumerate(run.plan.sequence, start=1):
        for b in run.plan.of_split("id"):
            after, before = accuracy.get((k, b.name)), accuracy.get((k - 1, b.name))
            if b.domain == domain and after is not None and before is not None:
                gains[f"stage {k} {b.name}"] = 100 * (after - before)
    return gains


def _lowest_mean(per_seed: list[dict[str, float]]) -> str | None:
    """The key with the lowest mean over the seeds' values (`per_seed`, one dict per seed): the
    earlier benchmark that drops most, the stage that gains least."""
    names = {n for values in per_seed for n in values}
    if not names:
        return None
    return min(sorted(names), key=lambda n: clm.nan_mean(v.get(n, math.nan) for v in per_seed))


def _sampled_change(run: RunTables, role: str, seed: int, metric: str) -> float:
    """`metric` (pass_at_1, pass_at_k, or "gap": pass@k minus pass@1) after the last stage minus
    the base's, mean over the benchmarks evaluated with k >= 2 samples, points; NaN without."""
    method = run.methods[role]
    table = run.scores[(run.scores.method == method) & (run.scores.seed == seed)]
    if metric == "gap":
        values = table["pass_at_k"] - table["pass_at_1"]
    else:
        values = table[metric]
    by_stage = table.assign(value=values).pivot_table(
        index="benchmark", columns="stage", values="value"
    )
    if run.last not in by_stage or 0 not in by_stage:
        return math.nan
    return 100 * clm.nan_mean(by_stage[run.last] - by_stage[0])


def _sharpening(metric: str):
    return lambda run, role, seed: _sampled_change(run, role, seed, metric)


def _paired(a: str, b: str, quantity) -> Callable[[RunTables, int], float]:
    return lambda run, seed: quantity(run, a, seed) - quantity(run, b, seed)


def _ratio(a: str, b: str, quantity) -> Callable[[RunTables, int], float]:
    """a's quantity over b's on the same seed; NaN where b's is 0 (no movement to compare)."""

    def per_seed(run: RunTables, seed: int) -> float:
        denominator = quantity(run, b, seed)
        return quantity(run, a, seed) / denominator if denominator else math.nan

    return per_seed


PARTS = (
    Part(
        "1",
        "",
        "Teacher stability: a frozen teacher beats a fast-moving EMA teacher",
        "SDPO_0 minus SDPO_5%: mean id accuracy over the trained domains after the last stage, "
        "points",
        ("sdpo_0", "sdpo_5"),
        _paired("sdpo_0", "sdpo_5", _id_accuracy),
        +1,
    ),
    Part(
        "2",
        "",
        "CoT distillation: keeping the chain of thought in the demonstration adds noise",
        "SDPO_0^CoT minus SDPO_0: mean id accuracy over the trained domains after the last "
        "stage, points",
        ("sdpo_0_cot", "sdpo_0"),
        _paired("sdpo_0_cot", "sdpo_0", _id_accuracy),
        -1,
    ),
    Part(
        "3",
        "a",
        "OOD generalisation: SDPO helps source-like benchmarks",
        "SDPO_0: mean relative performance on the trained domains' OOD benchmarks after the last "
        "stage, %",
        ("sdpo_0",),
        lambda run, seed: _ood_relative(run, "sdpo_0", seed, trained=True),
        +1,
    ),
    Part(
        "3",
        "b",
        "OOD generalisation: SDPO hurts partly related benchmarks",
        "SDPO_0: mean relative performance on the OOD benchmarks of the domains never trained "
        "after the last stage, %",
        ("sdpo_0",),
        lambda run, seed: _ood_relative(run, "sdpo_0", seed, trained=False),
        -1,
    ),
    Part(
        "4",
        "",
        "Continual learning: SDPO accumulates forgetting across domains; GRPO preserves them",
        "SDPO_0 minus GRPO: forgetting (max earlier accuracy minus final) after the last stage, "
        "mean over the earlier id benchmarks, points",
        ("sdpo_0", "grpo"),
        _paired("sdpo_0", "grpo", _forgetting),
        +1,
    ),
    Part(
        "5",
        "a",
        "Drift: SDPO moves parameters much further than GRPO",
        "SDPO_0 over GRPO: normalised spectral shift (NSS) against the base after the last "
        "stage, ratio",
        ("sdpo_0", "grpo"),
        _ratio("sdpo_0", "grpo", _nss),
        +1,
        null=1.0,
    ),
    Part(
        "5",
        "b",
        "Drift: SDPO moves responses much further than GRPO",
        "GRPO minus SDPO_0: median similarity of the last stage's responses to the base's, points",
        ("grpo", "sdpo_0"),
        _paired("grpo", "sdpo_0", _similarity),
        +1,
    ),
    Part(
        "5",
        "c",
        "Drift: SDPO moves the policy further than GRPO (how far each method moved)",
        "SDPO_0 over GRPO: KL to the stage start at the end of each stage, mean over the stages, "
        "ratio",
        ("sdpo_0", "grpo"),
        _ratio("sdpo_0", "grpo", _movement),
        +1,
        null=1.0,
    ),
    Part(
        "6",
        "",
        "Collapse: self-distillation amplifies a frequent formatting artifact (repeated \\boxed)",
        "SDPO_0 minus GRPO: share of training completions repeating a format token, mean over "
        "a stage's steps at its highest stage",
        ("sdpo_0", "grpo"),
        _paired("sdpo_0", "grpo", _format_share),
        +1,
    ),
    Part(
        "sharpening",
        "a",
        "Sharpening (a hypothesis, not the study's): RL narrows the gap between pass@k and pass@1",
        "GRPO: (pass@k minus pass@1) after the last stage minus the base's, mean over the "
        "benchmarks evaluated with k >= 2 samples, points",
        ("grpo",),
        lambda run, seed: _sampled_change(run, "grpo", seed, "gap"),
        -1,
    ),
    Part(
        "sharpening",
        "b",
        "Sharpening (a hypothesis, not the study's): denser supervision narrows it",
        "SDPO_0: (pass@k minus pass@1) after the last stage minus the base's, mean over the "
        "benchmarks evaluated with k >= 2 samples, points",
        ("sdpo_0",),
        lambda run, seed: _sampled_change(run, "sdpo_0", seed, "gap"),
        -1,
    ),
    Part(
        "sharpening",
        "c",
        "Sharpening: a dense teacher raises pass@1 more than GRPO",
        "SDPO_0 minus GRPO: pass@1 after the last stage minus the base's, mean over the "
        "benchmarks evaluated with k >= 2 samples, points",
        ("sdpo_0", "grpo"),
        _paired("sdpo_0", "grpo", _sharpening("pass_at_1")),
        +1,
    ),
    Part(
        "sharpening",
        "d",
        "Sharpening: ... while its pass@k falls below GRPO's",
        "SDPO_0 minus GRPO: pass@k after the last stage minus the base's, mean over the "
        "benchmarks evaluated with k >= 2 samples, points",
        ("sdpo_0", "grpo"),
        _paired("sdpo_0", "grpo", _sharpening("pass_at_k")),
        -1,
    ),
)


def verdict(low: float, high: float, n: int, direction: int, null: float) -> str:
    if n < 2 or not (np.isfinite(low) and np.isfinite(high)):
        return "inconclusive"
    # Equal values on every seed give a zero-width interval; rounding must not make a zero
    # difference (two saturated medians) a side of no effect.
    tolerance = 1e-9 * max(1.0, abs(null))
    above, below = low > null + tolerance, high < null - tolerance
    if (above and direction > 0) or (below and direction < 0):
        return "agrees"
    if above or below:
        return "contradicts"
    return "inconclusive"


def _row(part: Part, values: list[float], run: RunTables, note: str = "") -> dict:
    methods = run.methods
    comparison, unmatched = run.comparison(part.roles)
    note = _with_note(note, unmatched)
    mean, _, low, high, n = clm.mean_ci(values)
    finite = [v for v in values if np.isfinite(v)]
    if not finite:
        status = "not measured"
    else:
        status = verdict(low, high, n, part.direction, part.null)
    if n == 1:
        note = _with_note(note, "one seed: no interval over seeds")
    return {
        "finding": part.finding,
        "part": part.part,
        "claim": part.claim,
        "quantity": part.quantity,
        "methods": " ".join(f"{r}={methods[r]}" for r in part.roles if r in methods),
        "value": mean,
        "ci_low": low,
        "ci_high": high,
        "n_seeds": n,
        "null": part.null,
        "study_direction": "above" if part.direction > 0 else "below",
        "verdict": status,
        "comparison": comparison,
        "note": note,
    }


def _with_note(note: str, more: str) -> str:
    return "; ".join(filter(None, [note, more]))


def _control_row(run: RunTables, present: set[str]) -> dict:
    """The positive control: the earlier domain SFT forgets most (chosen on the mean over
    seeds), its per-seed drops paired with the same seeds' accuracies at the end of its stage.
    It passes (agrees) when the interval is below 0 and the mean at or below CONTROL_LOSS."""
    methods = run.methods
    ran = methods["sft"] in present
    drops = {s: _earlier_drops(run, "sft", s) for s in run.seeds()} if ran else {}
    worst = _lowest_mean(list(drops.values()))
    control = Part(
        "control",
        "",
        "The testbed can show forgetting: under SFT an earlier domain loses at least "
        f"{-CONTROL_LOSS:.0f} points by the end of the sequence",
        "SFT: an earlier domain's id accuracy after the last stage minus after its own stage, "
        f"points ({worst or 'the domain that loses most'})",
        ("sft",),
        lambda run, seed: drops[seed].get(worst, math.nan),
        -1,
    )
    if worst is None:
        return _row(control, [], run, f"needs {methods['sft']} over two stages or more")
    row = _row(control, [control.per_seed(run, s) for s in run.seeds()], run)
    if row["verdict"] == "agrees" and not row["value"] <= CONTROL_LOSS:
        row["verdict"] = "inconclusive"
        row["note"] = _with_note(row["note"], f"a loss under {-CONTROL_LOSS:.0f} points")
    return row


def _learning_row(run: RunTables, present: set[str], part: str) -> dict:
    """The learning criterion for one method: its stage with the smallest gain (chosen on the
    mean over seeds). It passes (agrees) when the interval is above 0 and the mean at or above
    LEARNING_GAIN."""
    methods = run.methods
    role = LEARNERS[part]
    gains = {s: _stage_gains(run, role, s) for s in run.seeds()} if methods[role] in present else {}
    smallest = _lowest_mean(list(gains.values()))
    learning = Part(
        "learning",
        part,
        "The testbed learns: every stage raises its own domain's id accuracy by at least "
        f"{LEARNING_GAIN:.0f} points (mean over seeds)",
        f"{methods[role]}: the smallest gain of a stage on its own domain's id benchmark, "
        f"points ({smallest or 'each stage'})",
        (role,),
        lambda run, seed: gains[seed].get(smallest, math.nan),
        +1,
    )
    if smallest is None:
        return _row(learning, [], run, f"needs {methods[role]}")
    row = _row(learning, [learning.per_seed(run, s) for s in run.seeds()], run)
    if row["verdict"] == "agrees" and not row["value"] >= LEARNING_GAIN:
        row["verdict"] = "inconclusive"
        row["note"] = _with_note(row["note"], f"a gain under {LEARNING_GAIN:.0f} points")
    return row


def score_findings(config: dict, layout: Layout) -> pd.DataFrame:
    """findings.csv's table: every Part, then the testbed's checks: the learning criterion
    (GRPO, SDPO_0) and the SFT forgetting control."""
    methods = {**ROLES, **(config.get("findings", {}).get("methods") or {})}
    run = RunTables(config, layout, methods)
    present = set(run.plan.methods)
    rows = []
    sampled = bool(run.scores["pass_at_k"].notna().any())
    for part in PARTS:
        missing = [r for r in part.roles if methods[r] not in present]
        if missing:
            rows.append(_row(part, [], run, "needs " + ", ".join(methods[r] for r in missing)))
            continue
        if part.finding == "sharpening" and not sampled:
            note = "needs evaluation.samples >= 2 (pass@k); this run decodes one sample"
            rows.append(_row(part, [], run, note))
            continue
        rows.append(_row(part, [part.per_seed(run, s) for s in run.seeds()], run))
    rows += [_learning_row(run, present, part) for part in LEARNERS]
    rows.append(_control_row(run, present))
    return pd.DataFrame(rows, columns=COLUMNS)


VERDICT_COLOURS = {
    "agrees": "#d8f0d8",
    "contradicts": "#f6d5d5",
    "inconclusive": "#f0ecd8",
    "not measured": "#e8e8e8",
}


def _interval(row: dict) -> str:
    if not np.isfinite(row["value"]):
        return "—"
    if not np.isfinite(row["ci_low"]):
        return f"{row['value']:.3g}"
    return f"{row['value']:.3g} [{row['ci_low']:.3g}, {row['ci_high']:.3g}]"


def findings_html(table: pd.DataFrame) -> str:
    """The findings as one HTML table (the report's first result)."""
    head = [
        "finding",
        "the study",
        "measured here",
        "methods",
        "value [95% CI]",
        "seeds",
        "verdict",
        "comparison",
        "note",
    ]
    lines = [
        "<html><head><meta charset='utf-8'><title>Findings</title></head><body>",
        "<h2>The study's findings, scored on this run</h2>",
        "<p>Values are means over seeds with a t-based 95% interval; a verdict agrees when the "
        "interval lies on the study's side of no effect. The comparison column says whether the "
        "methods ran at their configured settings (the same steps and learning rate) or at a "
        "matched movement (each stage ended at the same KL to its start).</p>",
        "<table border='1' cellpadding='4' style='border-collapse:collapse'>",
        "<tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>",
    ]
    for row in table.to_dict("records"):
        cells = [
            f"{row['finding']}{row['part']}",
            row["claim"],
            f"{row['quantity']} (study: {row['study_direction']} {row['null']:g})",
            row["methods"],
            _interval(row),
            str(row["n_seeds"]),
            row["verdict"],
            row["comparison"],
            row["note"],
        ]
        colour = VERDICT_COLOURS.get(row["verdict"], "#ffffff")
        lines.append(
            f"<tr style='background:{colour}'>"
            + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells)
            + "</tr>"
        )
    lines += ["</table></body></html>", ""]
    return "\n".join(lines)


def write_findings(config: dict, layout: Layout) -> dict[str, Path]:
    """Write findings.csv and findings.html; returns their paths."""
    table = score_findings(config, layout)
    return {
        "findings": write_csv(layout.findings_csv, table),
        "html": atomic_write_text(layout.findings_html, findings_html(table)),
    }
