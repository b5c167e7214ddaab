"""`cptlab plan-hours`: every job's estimated workload against its SLURM time limit.

Per rule kind (train, evaluate, drift; build_base where the config builds one) the command
prints the jobs the workflow runs (cptlab.plan.Plan, as the rules count them), the work of one
job and of the kind (tokens generated and trained on, texts embedded, checkpoints read), the
hours one job takes at the config's throughputs, the GPU-hours of the kind (GPUs per job x
hours per job x jobs), the configured `runtime` and whether the estimate fits it (FLAG where it
does not), then every assumption it used, one per line.

The model:
  evaluate    per job, sum over its benchmarks (or its shard of one: evaluation.shards) of
              rows x evaluation.samples x expected new tokens (evaluation.max_new_tokens x
              expected_length_fraction), at decode_tokens_per_s per GPU.
  within-stage  the same per within-stage checkpoint (evaluation.within_stage: every `every`
              steps of each stage), one job on every benchmark's sample (min(rows, within_stage
              .rows) rows each); its GPU-hours are also given as a share of the stage ends'.
  train       steps x prompts_per_step x num_generations rollouts of expected_prompt_tokens +
              expected new tokens (training.max_completion_length x expected_length_fraction):
              the new tokens at decode_tokens_per_s, and every rollout token once through the
              update's forward and backward at train_tokens_per_s, per GPU (SFT: no rollouts,
              the update only).
  drift       per chain: every checkpoint read (parameter drift, seconds_per_checkpoint each)
              and the evaluation responses of each embedded (drift.completions_per_item per
              item, at embed_texts_per_s); dataset-distance: drift.max_samples prompts per data
              set embedded.
  build_base  base.sft.steps x batch_size x model.max_positions tokens at train_tokens_per_s.

Row counts are never invented: a benchmark's rows are its prepared file's
(results/<experiment>/data/<benchmark>.jsonl), else the count published for it
(`registry.Published`; the upper end where only a range is published), else the config's own
cap (evaluation.n, `data.sizes`), else unknown and left out of the sum, said so.

The throughput keys live under `resources.<kind>` and only this command reads them: the rules
pass on `threads`, `runtime`, `mem_mb`, the GPU and SLURM keys, so they are not part of any
job's command or provenance record. Their defaults are PLANNING_DEFAULTS.

Top-level imports stay light (cptlab.cli only): every `cptlab` call imports this module.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cptlab.cli import CONFIG, arg, command

if TYPE_CHECKING:
    from cptlab.plan import Plan

# Planning throughputs per rule kind when `resources.<kind>` does not state them. Rates are per
# GPU (a CPU-only job counts as one). Deliberately pessimistic: every completion runs to its
# limit. Replace them in the config with rates measured on the cluster.
PLANNING_DEFAULTS: dict[str, dict[str, float]] = {
    "train": {
        "decode_tokens_per_s": 1000.0,
        "train_tokens_per_s": 1000.0,
        "expected_length_fraction": 1.0,
        "expected_prompt_tokens": 512,
    },
    "evaluate": {"decode_tokens_per_s": 1000.0, "expected_length_fraction": 1.0},
    "build_base": {"train_tokens_per_s": 1000.0},
    "drift": {"embed_texts_per_s": 100.0, "seconds_per_checkpoint": 60.0},
}
UNKNOWN_ROWS = "unknown (prepare the data first: snakemake ... prepare_data targets)"


def planning(config: Mapping, kind: str) -> dict[str, Any]:
    """Rule kind `kind`'s resources (cptlab.resources) with its planning throughputs filled in."""
    from cptlab.resources import rule_resources

    return {**PLANNING_DEFAULTS[kind], **rule_resources(config, kind)}


@dataclass(frozen=True)
class Rows:
    """A benchmark's row count and where it came from (None: unknown)."""

    name: str
    rows: int | None
    source: str


@dataclass
class KindEstimate:
    """One line of the table: a rule (kind) with its jobs, work and hours."""

    kind: str
    jobs: int
    work_per_job: float  # the largest job's
    work_total: float
    unit: str
    hours_per_job: float  # the largest job's
    gpu_hours: float
    gpus_per_job: int
    limit_minutes: int
    over_limit: int  # jobs whose estimate exceeds the limit
    notes: list[str] = field(default_factory=list)
    unknown: int = 0  # benchmarks of unknown size, left out of the work

    @property
    def fits(self) -> bool:
        return self.over_limit == 0


def prepared_rows(path: Path) -> int:
    """Rows of a prepared JSONL file (its non-empty lines)."""
    with open(path, encoding="utf-8") as f:
        return sum(1 for line in f if line.strip())


def benchmark_rows(config: Mapping, data_dir: Path, name: str, cap: int | None = None) -> Rows:
    """Rows of benchmark `name`: the prepared file's, else the published count for its loader
    options (the upper end of a published range), else the config's caps (`cap`, e.g.
    evaluation.n, and data.sizes), else unknown. A cap bounds the others too."""
    path = data_dir / f"{name}.jsonl"
    if path.exists():
        rows = prepared_rows(path)
        if cap is not None and cap < rows:
            return Rows(name, cap, f"{rows} prepared, first {cap} (cap)")
        return Rows(name, rows, f"prepared ({path})")
    from cptlab.domains.prepare import EXPECTED_ROWS, data_settings, published_rows

    settings = data_settings(config, name)
    caps = [c for c in (cap, settings["size"]) if c is not None]
    options = {k: v for k, v in settings["options"].items() if k != EXPECTED_ROWS}
    published = published_rows(name, options)
    if published is not None:
        count = published.rows if published.rows is not None else published.high
        what = "published" if published.rows is not None else "at most, a published bound"
        if caps and min(caps) < count:
            return Rows(name, min(caps), f"{what} {count:,}, first {min(caps)} (cap)")
        return Rows(name, count, f"{what} ({published.source}; not prepared yet)")
    if caps:
        return Rows(name, min(caps), "at most, the config's cap (data not prepared)")
    return Rows(name, None, UNKNOWN_ROWS)


def _fit(
    kind: str, job_hours: list[float], spec: Mapping, unit: str, work: list[float]
) -> KindEstimate:
    gpus = int(spec["gpu"])
    limit = int(spec["runtime"])
    return KindEstimate(
        kind=kind,
        jobs=len(job_hours),
        work_per_job=max(work, default=0.0),
        work_total=sum(work),
        unit=unit,
        hours_per_job=max(job_hours, default=0.0),
        gpu_hours=sum(h * gpus for h in job_hours),
        gpus_per_job=gpus,
        limit_minutes=limit,
        over_limit=sum(1 for h in job_hours if h * 60 > limit),
    )


def note_unknown(estimate: KindEstimate, rows: list[Rows]) -> KindEstimate:
    """Mark `estimate` a lower bound when some benchmarks' sizes are unknown."""
    estimate.unknown = sum(1 for r in rows if r.rows is None)
    if estimate.unknown:
        estimate.notes.append(
            f"{estimate.unknown} benchmarks of unknown size left out: a lower bound"
        )
    return estimate


def evaluate_estimate(
    config: Mapping, plan: Plan, rows: list[Rows]
) -> tuple[KindEstimate, list[str]]:
    """The evaluation jobs of each checkpoint (the base and every trained stage): one on every
    benchmark that `evaluation.shards` does not split, and one per shard of each split one
    (its largest shard: ceil(rows / n) rows). `rows` are the benchmarks', in the plan's order."""
    from cptlab.evaluation.settings import EvalSettings

    spec = planning(config, "evaluate")
    ev = EvalSettings.from_config(config)
    new_tokens = ev.max_new_tokens * float(spec["expected_length_fraction"])
    rate = float(spec["decode_tokens_per_s"]) * max(1, int(spec["gpu"]))
    whole, _split = ev.split([r.name for r in rows])
    lines, whole_tokens, shard_jobs = [], 0.0, []
    for r in rows:
        count = ev.shard_count(r.name)
        if r.rows is None:
            lines.append(f"  {r.name}: {r.source}; left out of the sum")
            shard_jobs += [] if r.name in whole else [0.0] * count
            continue
        per_job = -(-r.rows // count)  # the largest shard's rows
        work = per_job * ev.samples * new_tokens
        jobs = "the checkpoint's job" if r.name in whole else f"{count} shard jobs, each <="
        lines.append(
            f"  {r.name}: {r.rows} rows ({r.source}); {jobs} {per_job} rows x {ev.samples} "
            f"samples x {new_tokens:,.0f} new tokens = {work:,.0f} tokens, "
            f"{work / rate / 3600:.2f} h"
        )
        if r.name in whole:
            whole_tokens += work
        else:
            shard_jobs += [work] * count
    if whole:
        lines.append(
            f"  the checkpoint's job ({len(whole)} benchmarks): {whole_tokens:,.0f} tokens, "
            f"{whole_tokens / rate / 3600:.2f} h"
        )
    per_checkpoint = ([whole_tokens] if whole else []) + shard_jobs
    work = per_checkpoint * (1 + len(plan.trained_stages))
    estimate = _fit("evaluate", [w / rate / 3600 for w in work], spec, "tokens", work)
    return note_unknown(estimate, rows), lines


def within_stage_estimate(
    config: Mapping, plan: Plan, rows: list[Rows], stage_ends: KindEstimate
) -> tuple[KindEstimate | None, list[str]]:
    """The within-stage checkpoints' evaluation jobs (None when evaluation.within_stage is off):
    one per checkpoint, on each benchmark's sample of rows; `stage_ends` is the evaluate kind's
    estimate, which the lines compare it with."""
    from cptlab.evaluation.settings import EvalSettings
    from cptlab.train.spec import resolve_stage

    ev = EvalSettings.from_config(config)
    if ev.within_stage is None:
        return None, []
    spec = planning(config, "evaluate")
    new_tokens = ev.max_new_tokens * float(spec["expected_length_fraction"])
    rate = float(spec["decode_tokens_per_s"]) * max(1, int(spec["gpu"]))
    sampled = [
        r.rows if ev.within_stage.rows is None else min(r.rows, ev.within_stage.rows)
        for r in rows
        if r.rows is not None
    ]
    tokens = sum(sampled) * ev.samples * new_tokens
    checkpoints = sum(
        len(ev.within_stage_steps(resolve_stage(dict(config), m, d).steps))
        for m, _seed, _stage, d in plan.trained_stages
    )
    estimate = _fit(
        "evaluate-within", [tokens / rate / 3600] * checkpoints, spec, "tokens",
        [tokens] * checkpoints,
    )  # fmt: skip
    note_unknown(estimate, rows)
    share = estimate.gpu_hours / stage_ends.gpu_hours if stage_ends.gpu_hours else float("nan")
    line = (
        f"  within-stage: {checkpoints} checkpoints (every {ev.within_stage.every} steps), each "
        f"{sum(sampled):,} rows x {ev.samples} samples x {new_tokens:,.0f} new tokens = "
        f"{tokens:,.0f} tokens, {tokens / rate / 3600:.2f} h; {estimate.gpu_hours:.1f} GPU-h, "
        f"{100 * share:.1f} % of the stage ends' evaluation"
    )
    estimate.notes.append(f"{100 * share:.1f} % of the stage ends' evaluation GPU-hours")
    return estimate, [line]


def train_estimate(config: Mapping, plan: Plan) -> tuple[KindEstimate, list[str]]:
    """The training jobs: one per (method, seed, stage)."""
    from cptlab.train.spec import resolve_stage

    spec = planning(config, "train")
    gpus = max(1, int(spec["gpu"]))
    decode_rate = float(spec["decode_tokens_per_s"]) * gpus
    train_rate = float(spec["train_tokens_per_s"]) * gpus
    hours, work, lines = [], [], []
    seen: set[tuple] = set()
    for method, _seed, _stage, domain in plan.trained_stages:
        stage = resolve_stage(dict(config), method, domain)
        t = stage.training
        rollouts = stage.steps * int(t.prompts_per_step)
        if stage.trainer != "sft":
            rollouts *= int(t.num_generations)
        prompt = min(float(spec["expected_prompt_tokens"]), float(t.max_prompt_length))
        new = float(t.max_completion_length) * float(spec["expected_length_fraction"])
        generated = 0.0 if stage.trainer == "sft" else rollouts * new
        updated = rollouts * (prompt + new)
        h = (generated / decode_rate + updated / train_rate) / 3600
        hours.append(h)
        work.append(generated + updated)
        if (stage.trainer, stage.steps) not in seen:
            seen.add((stage.trainer, stage.steps))
            lines.append(
                f"  {stage.trainer}, {stage.steps} steps: {rollouts:,} sequences x "
                f"({prompt:,.0f} prompt + {new:,.0f} new tokens): {generated:,.0f} decoded + "
                f"{updated:,.0f} trained tokens, {h:.2f} h"
            )
    return _fit("train", hours, spec, "tokens", work), lines


def drift_estimates(
    config: Mapping, plan: Plan, rows: list[Rows], data_dir: Path
) -> tuple[list[KindEstimate], list[str]]:
    """drift-chain (one job per chain, over the evaluation's responses on the benchmarks of
    `rows`) and dataset-distance (one job), on drift's resources."""
    from cptlab.drift.settings import DriftSettings
    from cptlab.evaluation.settings import EvalSettings
    from cptlab.plan import datasets

    spec = planning(config, "drift")
    drift = DriftSettings.from_config(config)
    ev = EvalSettings.from_config(config)
    per_item = min(drift.completions_per_item or ev.samples, ev.samples)
    rate = float(spec["embed_texts_per_s"]) * max(1, int(spec["gpu"]))
    known = sum(r.rows for r in rows if r.rows is not None)
    checkpoints = len(plan.stages)  # the base and every stage of the chain
    texts = checkpoints * known * per_item
    seconds = checkpoints * float(spec["seconds_per_checkpoint"]) + texts / rate
    chains = len(plan.chains)
    chain = _fit("drift-chain", [seconds / 3600] * chains, spec, "texts", [texts] * chains)
    lines = [
        f"  drift-chain: {checkpoints} checkpoints x {float(spec['seconds_per_checkpoint']):.0f} s"
        f" + {checkpoints} x {known:,} rows x {per_item} completions = {texts:,.0f} texts"
        f" embedded, {seconds / 3600:.2f} h"
    ]
    note_unknown(chain, rows)
    sets = datasets(config)
    prompts = 0
    for d in sets:
        r = benchmark_rows(config, data_dir, d.name)
        prompts += min(r.rows, drift.max_samples) if r.rows is not None else drift.max_samples
    distance = _fit("drift-datasets", [prompts / rate / 3600], spec, "texts", [float(prompts)])
    lines.append(
        f"  dataset-distance: {len(sets)} data sets x at most {drift.max_samples} prompts ="
        f" {prompts:,} texts embedded, {prompts / rate / 3600:.2f} h"
    )
    return [chain, distance], lines


def build_base_estimate(config: Mapping) -> tuple[KindEstimate, list[str]]:
    """The embedded base build: its warm-up SFT."""
    from cptlab.base_model.settings import BaseSettings

    spec = planning(config, "build_base")
    base = BaseSettings.from_config(config)
    sft, positions = base.sft, base.model.max_positions
    tokens = float(sft.steps * sft.batch_size * positions)
    rate = float(spec["train_tokens_per_s"]) * max(1, int(spec["gpu"]))
    hours = tokens / rate / 3600
    line = (
        f"  build_base: {sft.steps} SFT steps x {sft.batch_size} rows x at most "
        f"{positions} tokens = {tokens:,.0f} tokens, {hours:.2f} h"
    )
    return _fit("build_base", [hours], spec, "tokens", [tokens]), [line]


def estimates(config: Mapping, data_dir: Path) -> tuple[list[KindEstimate], list[str]]:
    """Every rule kind's estimate and the lines of work behind them."""
    from cptlab.evaluation.settings import EvalSettings
    from cptlab.plan import Plan, builds_base

    plan = Plan.from_config(config)
    cap = EvalSettings.from_config(config).n
    rows = [benchmark_rows(config, data_dir, b.name, cap) for b in plan.benchmarks]
    kinds: list[KindEstimate] = []
    details: list[str] = []
    if builds_base(config):
        estimate, lines = build_base_estimate(config)
        kinds.append(estimate)
        details += lines
    estimate, lines = train_estimate(config, plan)
    kinds.append(estimate)
    details += ["train, per job:", *lines]
    estimate, lines = evaluate_estimate(config, plan, rows)
    kinds.append(estimate)
    details += ["evaluate, per checkpoint:", *lines]
    within, lines = within_stage_estimate(config, plan, rows, estimate)
    if within is not None:
        kinds.append(within)
        details += lines
    drift, lines = drift_estimates(config, plan, rows, data_dir)
    kinds += drift
    details += ["drift, per job:", *lines]
    return kinds, details


def _amount(value: float) -> str:
    return f"{value:.3g}" if value < 1e3 else f"{value:.2e}"


def table(kinds: list[KindEstimate]) -> list[str]:
    """The table's lines: one per rule kind."""
    head = (
        f"{'kind':<18} {'jobs':>5} {'work/job':>9} {'work/kind':>9} {'unit':<10} "
        f"{'h/job':>7} {'GPU-h':>8} {'limit h':>7}  fits"
    )
    out = [head, "-" * len(head)]
    for k in kinds:
        if not k.fits:
            fits = f"FLAG: {k.over_limit} of {k.jobs} jobs over the limit"
        elif k.unknown:
            fits = "unknown (rows missing)"
        else:
            fits = "yes"
        out.append(
            f"{k.kind:<18} {k.jobs:>5} {_amount(k.work_per_job):>9} {_amount(k.work_total):>9} "
            f"{k.unit:<10} {k.hours_per_job:>7.2f} {k.gpu_hours:>8.1f} "
            f"{k.limit_minutes / 60:>7.2f}  {fits}"
        )
        out += [f"{'':<18} note: {note}" for note in k.notes]
    return out


def assumptions(config: Mapping) -> list[str]:
    """The assumptions behind the estimates, one per line."""
    from cptlab.plan import builds_base

    kinds = [k for k in PLANNING_DEFAULTS if k != "build_base" or builds_base(config)]
    spec = {kind: planning(config, kind) for kind in kinds}
    lines = [
        f"resources.{kind}.{key}: {spec[kind][key]:g}"
        + ("" if key in ((config.get("resources") or {}).get(kind) or {}) else " (default)")
        for kind in kinds
        for key in PLANNING_DEFAULTS[kind]
    ]
    return lines + [
        "rates are per GPU and scale linearly with a job's GPUs (a CPU job counts as one GPU)",
        "every generated sequence is max_new_tokens (max_completion_length) x "
        "expected_length_fraction tokens long",
        "evaluation prefill, model loading and the engine's start-up are not counted; "
        "prompts over max_prompt_length, which evaluation drops, are counted",
        "training: each rollout passes once through the update's forward and backward; "
        "reference, teacher and EMA forwards (SDPO) and reward computation are not counted",
        "the first attempt's limit: a retry gets runtime x attempt",
        "rows: the prepared data's, else the published count (a published range's upper end), "
        "else the config's cap (an upper bound), else unknown",
    ]


def report(config: Mapping, data_dir: Path, source: str) -> tuple[list[str], bool]:
    """The command's lines and whether every job fits its limit."""
    kinds, details = estimates(config, data_dir)
    lines = [f"plan-hours: {source} (experiment {config['experiment']}, data: {data_dir})", ""]
    lines += table(kinds)
    lines += ["", "work behind the estimates:", *details, "", "assumptions:"]
    lines += [f"  {line}" for line in assumptions(config)]
    return lines, all(k.fits for k in kinds)


@command(
    "plan-hours",
    "estimate each rule kind's jobs, GPU-hours and whether they fit their runtime limit",
    CONFIG,
    arg("--results-dir", default=None, help="the experiment's folder (default: results/<exp>)"),
)
def plan_hours(args: argparse.Namespace) -> None:
    from cptlab.layout import Layout
    from cptlab.validation import load_config

    config = load_config(args.config)
    layout = Layout(Path(args.results_dir)) if args.results_dir else Layout.of(config)
    lines, _fits = report(config, layout.data_dir, str(args.config))
    print("\n".join(lines))  # exit 0 either way: the FLAGs are in the table
