# Helpers shared by the rules: the config, the results layout, resources, and each job's
# provenance (what decides its reruns). Parsing writes nothing under results/: a dry run, a lint
# or a report with any config leaves the results folder as it was (cptlab.provenance).
import atexit
import os
import sys
from dataclasses import asdict
from functools import cache
from pathlib import Path

from cptlab.artifacts import MANIFEST
from cptlab.base_model.settings import BaseSettings
from cptlab.claims import RUN_ENV, ClaimConflict, ClaimsFolder, PlannedJob, SharedRun
from cptlab.errors import ConfigError
from cptlab.validation import load_config
from cptlab.domains.prepare import data_settings as data_section
from cptlab.drift.settings import ChainSettings, DriftSettings
from cptlab.evaluation.settings import EvalSettings
from cptlab.layout import BASE_JOB, Layout
from cptlab.locks import lock_holder, record_lock_owner, release_stale_lock
from cptlab.plan import Plan, base_measure_benchmarks, builds_base, datasets, eval_benchmarks
from cptlab.provenance import SourceTree, accept, render, stage, staged_job, write_if_changed
from cptlab.site import site_problems
from cptlab.slurm import start_controller_watch
from cptlab.resources import (
    RESOURCE_DEFAULTS,
    computes_in_half_precision,
    cptlab_invocation,
    rule_resources,
    snakemake_resources,
)
from cptlab.train.spec import resolve_stage, training_section

# The config as the CLI reads it: the --configfile (default: the embedded one) with its
# `extends:` chain and the --config overrides, with every check cptlab makes. A bad config
# stops here, before any job, with the one line cptlab would print. `--configfile other.yaml`
# replaces the default rather than merging into it (a merge would keep the default's domains
# and methods).
try:
    _config = load_config(
        workflow.overwrite_configfiles or ["config/config.yaml"],
        dict(workflow.config_settings.config),
    )
    PLAN = Plan.from_config(_config)
except ConfigError as err:
    print(f"cptlab: error: {err}", file=sys.stderr)
    sys.exit(2)
config.clear()
config.update(_config)

# A run killed with -9 leaves its lock: free it when its process is gone (cptlab.locks).
if (_freed := release_stale_lock()) is not None:
    print(_freed, file=sys.stderr)


LAYOUT = Layout.of(config)
SEQUENCE = PLAN.sequence
DOMAINS = config["data"]["domains"]
EVAL_BENCHMARKS = [b.name for b in eval_benchmarks(config)]
# Benchmarks evaluated together in each checkpoint's one job, and those split in shards
# (evaluation.shards), each shard a job of its own, merged into the benchmark's files.
EVALUATION = EvalSettings.from_config(config)
WHOLE_BENCHMARKS, SPLIT_BENCHMARKS = EVALUATION.split(EVAL_BENCHMARKS)
# Within-stage evaluation: each stage exports the weights of its trainer saves
# (cptlab.train.within_stage), and the checkpoints every `within_stage.every` steps are evaluated.
EXPORT_SAVES = EVALUATION.within_stage is not None
# The effective config every job reads. Only a run that executes jobs writes it (onstart, under
# Snakemake's lock, before the first job), so a dry run with another config cannot change what a
# running or later job reads. Key order is kept: domain order decides the warm-up mixture's
# order (and the tokenizer's merges), so a sorted copy would build another base.
CONFIG_FILE = str(LAYOUT.config_file)
# The sources beside this Snakefile, hashed per subcommand (cptlab.provenance).
SOURCES = SourceTree(Path(workflow.basedir) / "src" / "cptlab")


def on_slurm():
    """Whether this run's jobs go to SLURM (known once the run starts, not while parsing)."""
    return workflow.executor_plugin is not None and workflow.executor_plugin.name == "slurm"


# What the run still needs of this machine (data files, the base, SLURM partitions), checked
# before the first job: a placeholder left in the config stops a run at once, key by key, not
# hours in (cptlab.site). A dry run names the same problems as warnings.
def site_check_lines(level):
    return [f"cptlab: {level}: {p}" for p in site_problems(config, LAYOUT, slurm=on_slurm())]


if workflow.is_main_process and workflow.output_settings.dryrun:
    for _line in site_check_lines("warning"):
        print(_line, file=sys.stderr)


onstart:
    if _site_errors := site_check_lines("error"):
        print("\n".join(_site_errors), file=sys.stderr)
        sys.exit(2)
    record_lock_owner()
    if (_shared := shared_run()) is not None:
        try:
            _shared.claim(planned_jobs())
        except ClaimConflict as err:
            print(f"cptlab: error: {err}", file=sys.stderr)
            sys.exit(2)
        os.environ[RUN_ENV] = _shared.run  # the jobs join this run's claims
    write_if_changed(CONFIG_FILE, config, sort_keys=False)
    # The executor plugin says nothing useful while SLURM's controller is down (cptlab.slurm).
    if on_slurm():
        start_controller_watch()
    if _shared is not None:
        _shared.planned()


onsuccess:
    if (_shared := shared_run()) is not None:
        _shared.release()


onerror:
    if (_shared := shared_run()) is not None:
        _shared.release()


wildcard_constraints:
    benchmark=r"[A-Za-z0-9_.-]+",
    method=r"[A-Za-z0-9_.-]+",
    seed=r"\d+",
    stage=r"[1-9]\d*",
    domain=r"[A-Za-z0-9_-]+",


def provenance(job, command, settings=lambda wc: {}):
    """Input function: the staged provenance of `job` (a pattern of the rule's wildcards), the
    settings it reads (`settings(wildcards)`) and the code hash of `command` as this invocation
    wants them; stale, so that the job reruns, when they are not what its last run committed
    (cptlab.provenance.stage). The job commits it as its last step (CLAIMED)."""

    def staged_provenance(wc):
        refuse_if_locked()
        job_id = job.format(**wc)
        # A job that another run is making: wait for it (its outputs are then complete), or
        # redo it when that run is gone (cptlab.claims).
        suspect = (run := shared_run()) is not None and run.await_job(job_id)
        if run is None:
            warn_if_claimed(job_id)
        record = {"command": command, "code": SOURCES.code_hash(command), "settings": settings(wc)}
        if workflow.touch and not workflow.dryrun:
            # --touch declares the outputs up to date with this config and code: their provenance
            # commits it, naming the code and settings that made them (cptlab.provenance.accept).
            accept(LAYOUT.root, job_id, record)
        return str(stage(LAYOUT.root, job_id, record, stale=suspect))

    return staged_provenance


# --- a results folder shared by several clones (cptlab.claims) --------------------------------


@cache
def shared_run():
    """This run's side of the claims in the results folder, for a run that executes jobs (not
    a dry run, --touch, a lint or a report): it plans alone, waits for the jobs of its plan
    that a live run is making, claims the jobs it runs and releases them at the end. A run
    whose config differs from config.json while a live run works there stops here."""
    executing = workflow.executor_plugin is not None and not workflow.dryrun
    if not (executing and workflow.is_main_process) or workflow.touch:
        return None
    slurm = workflow.executor_plugin.name == "slurm"
    run = SharedRun(LAYOUT.root, slurm=slurm)
    atexit.register(run.release)  # a run that stops before onsuccess or onerror
    try:
        run.plan(render(config, sort_keys=False))
    except ClaimConflict as err:
        print(f"cptlab: error: {err}", file=sys.stderr)
        sys.exit(2)
    return run


@cache
def warn_if_claimed(job_id):
    """A dry run names each job of its plan that a run has claimed."""
    if workflow.dryrun and workflow.is_main_process:
        if (line := ClaimsFolder(LAYOUT.root).describe(job_id)) is not None:
            print(f"cptlab: warning: {line}", file=sys.stderr)


def planned_jobs():
    """The jobs this run executes, as their claims name them (from their staged provenance),
    with the outputs that were missing when it planned them."""
    for job in workflow.dag.needrun_jobs():
        staged = getattr(job.input, "provenance", None)
        if staged is not None:
            missing = tuple(workflow.dag.reason(job).missing_output)
            yield PlannedJob(staged_job(staged)[1], tuple(job.input), tuple(job.output), missing)


@cache
def refuse_if_locked():
    """A second run on a results folder that a running one holds stops with one line, before it
    writes anything (Snakemake would refuse too, later and in a paragraph). A dry run, a report
    or a lint takes no lock and goes on."""
    executing = workflow.executor_plugin is not None and not workflow.dryrun
    if executing and workflow.is_main_process and workflow.execution_settings.lock:
        if (holder := lock_holder(LAYOUT.root)) is not None:
            print(f"cptlab: error: {holder}; wait for it to end, or plan with -n", file=sys.stderr)
            sys.exit(2)


# --- checkpoints: the base and the chains of stages ------------------------------------------


def data_file(name):
    return str(LAYOUT.data_file(name))


def base_model():
    """The base checkpoint: built into results/, or a local folder / hub name from the config."""
    return str(LAYOUT.base_dir) if builds_base(config) else config["base"]["path"]


def base_inputs():
    """What the base's readers depend on: the built base's manifest, or each file of a local
    base folder (so a rebuilt or replaced model reruns them); nothing for a hub name, whose
    files the hub cache owns (the site check makes sure they are there)."""
    if builds_base(config):
        return [str(LAYOUT.base_manifest)]
    folder = Path(config["base"]["path"])
    return sorted(str(f) for f in folder.iterdir() if f.is_file()) if folder.is_dir() else []


def stage_dir(method, seed, stage):
    return str(LAYOUT.stage_dir(method, seed, stage, SEQUENCE[int(stage) - 1]))


def stage_manifest(method, seed, stage):
    return str(LAYOUT.stage_manifest(method, seed, stage, SEQUENCE[int(stage) - 1]))


def step_dir(method, seed, stage, step):
    """The checkpoint after `step` rollout batches of a stage (evaluation.within_stage)."""
    return str(LAYOUT.step_dir(method, seed, stage, SEQUENCE[int(stage) - 1], step))


def anchor():
    """The checkpoint an SDPO teacher anchored at `base` starts from (run.anchor)."""
    return PLAN.anchor or base_model()


def previous_checkpoint(wc):
    """The checkpoint stage `wc.stage` starts from: the base model, or the previous stage."""
    stage = int(wc.stage)
    return base_model() if stage == 1 else stage_dir(wc.method, wc.seed, stage - 1)


def previous_inputs(wc):
    stage = int(wc.stage)
    return base_inputs() if stage == 1 else [stage_manifest(wc.method, wc.seed, stage - 1)]


@cache
def stage_settings(method, domain):
    """The resolved settings of (method, domain), checked once per workflow parse."""
    return resolve_stage(config, method, domain)


def replay_inputs(wc):
    """The train rows of the domains trained before stage `wc.stage` (its own domain's aside),
    when the stage's method replays them (training.replay_share)."""
    if stage_settings(wc.method, wc.domain).training.replay_share == 0:
        return []
    earlier = dict.fromkeys(d for d in SEQUENCE[: int(wc.stage) - 1] if d != wc.domain)
    return [data_file(DOMAINS[d]["train"]) for d in earlier]


def all_stage_manifests():
    return [str(LAYOUT.stage_manifest(*stage)) for stage in PLAN.trained_stages]


def within_stage_steps(method, stage):
    """The within-stage checkpoints of stage `stage` of `method`'s chains that are evaluated."""
    domain = SEQUENCE[int(stage) - 1]
    return EVALUATION.within_stage_steps(stage_settings(method, domain).steps)


def checkpoint_evals(kind="eval_file"):
    """Every evaluation file (`kind`: its EVAL.json, or `responses_file`): the base's (shared by
    all methods), each stage's and each within-stage checkpoint's."""
    path = getattr(LAYOUT, kind)
    base = [str(path(b)) for b in EVAL_BENCHMARKS]
    ends = [str(path(b, m, s, k)) for m, s, k, _ in PLAN.trained_stages for b in EVAL_BENCHMARKS]
    within = [
        str(path(b, m, s, k, step))
        for m, s, k, _ in PLAN.trained_stages
        for step in within_stage_steps(m, k)
        for b in EVAL_BENCHMARKS
    ]
    return base + ends + within


# --- what each kind of job depends on: its settings as the command resolves them -----------
# (so stating a key at its default reruns nothing)


def data_settings(wc):
    return data_section(config, wc.benchmark)


def base_settings(wc):
    # Domain order decides the warm-up mixture's order, so it is a setting.
    return {"base": asdict(BaseSettings.from_config(config)), "domains": list(DOMAINS)}


def train_settings(wc):
    """The stage's method and training keys resolved for its domain (another domain's step
    count is not among them, so changing it reruns only that domain's stages), its start and
    anchor checkpoints and its launcher."""
    return {
        **stage_settings(wc.method, wc.domain).as_dict(domain_steps=False),
        "start": LAYOUT.recorded(previous_checkpoint(wc)),
        "anchor": LAYOUT.recorded(anchor()),
        "launcher": rule_resources(config, "train")["launcher"],
        **({"export_saves": True} if EXPORT_SAVES else {}),
    }


def evaluation_settings(checkpoint, method=lambda wc: None, within_stage=False):
    """The evaluation section as it evaluates the checkpoint of `method(wc)` (None: the base),
    its chat template resolved, and the checkpoint. Not `shards`: a job's share of the rows is
    in its file names, so splitting one benchmark reruns only that benchmark's jobs. `within_stage`
    only for a within-stage checkpoint (its rows), so that it reruns nothing else."""
    skipped = {"shards"} if within_stage else {"shards", "within_stage"}
    return lambda wc: {
        "evaluation": {
            key: value
            for key, value in asdict(EvalSettings.for_checkpoint(config, method(wc))).items()
            if key not in skipped
        },
        "checkpoint": LAYOUT.recorded(checkpoint(wc)),
    }


def earlier_responses(benchmarks):
    """The responses files whose verdicts a chain checkpoint's evaluation of `benchmarks(wc)`
    reuses (evaluation.reuse_verdicts): the previous checkpoint's in the chain; none for the
    base or with the key off."""

    def inputs(wc):
        at = EVALUATION.earlier_checkpoint(wc.method, wc.seed, wc.stage)
        return [] if at is None else [str(LAYOUT.responses_file(b, *at)) for b in benchmarks(wc)]

    return inputs


def shard_inputs(benchmark, method=None, seed=None, stage=0):
    """The shard files of split benchmark `benchmark` on one checkpoint, each shard's both."""
    count = EVALUATION.shard_count(benchmark)
    return [
        str(path)
        for index in range(1, count + 1)
        for path in LAYOUT.shard_files(benchmark, index, count, method, seed, stage)
    ]


def plan_settings(wc):
    """What the tables and figures read of the config: the chains and the benchmarks."""
    return {"run": config["run"], "benchmarks": [asdict(b) for b in eval_benchmarks(config)]}


def aggregate_settings(wc):
    """The chains and benchmarks, the within-stage checkpoints read (their steps follow the
    stages' steps) and the bootstrap seed."""
    steps = {f"{m}/{k}": within_stage_steps(m, k) for m, _s, k, _d in PLAN.trained_stages}
    return {**plan_settings(wc), "within_stage": steps, "seed": EVALUATION.seed}


def findings_settings(wc):
    """The chains and benchmarks, which method plays which role, the format tokens."""
    return {
        **plan_settings(wc),
        "findings": config.get("findings", {}),
        "format_tokens": training_section(config).collapse.format_tokens,
    }


def drift_settings(wc):
    return {
        "drift": ChainSettings.from_config(config).as_dict(),
        "base": LAYOUT.recorded(base_model()),
    }


def drift_base_settings(wc):
    """The embedder, and the benchmarks whose base responses it embeds, in order."""
    return {"embedder": DriftSettings.from_config(config).embedder, "benchmarks": EVAL_BENCHMARKS}


def drift_figures_settings(wc):
    """The chains and benchmarks, and each domain's training set (the source of a stage's gain
    and forgetting against MMD)."""
    domains = config["data"]["domains"]
    return {**plan_settings(wc), "train_sets": {d: s.get("train") for d, s in domains.items()}}


def dataset_distance_settings(wc):
    return {"seed": config["data"]["seed"], "drift": asdict(DriftSettings.from_config(config))}


# --- scheduling -------------------------------------------------------------------------------

# On a few cores the training chains are the critical path (docs/notebook/speed.md). A ready
# training stage runs first, an earlier stage before a later one: the chains advance together,
# and while their last and longest stages run, the short jobs fill the other cores. Of those,
# the checkpoints' evaluations go first: with evaluation.reuse_verdicts each waits for the one
# before it in its chain, and the chain's drift for them all. Then a chain's drift (its figures
# wait on it), then the data-set distances (the longest of them, which need only the data), and
# last the within-stage evaluations, which only the tables wait for. The base comes before all of
# them: every chain starts from it, and its job takes two cores, which a job started first would
# delay.
PRIORITY = {
    "build_base": 100,
    "evaluate": 4,
    "drift_chain": 3,
    "dataset_distance": 2,
    "evaluate_within_stage": 1,
}


def train_priority(wc):
    return 10 + len(SEQUENCE) - int(wc.stage)


# --- resources --------------------------------------------------------------------------------


def threads(kind):
    return rule_resources(config, kind)["threads"]


def resources(kind):
    return snakemake_resources(config, kind)


def results_dir(wc, output):
    """The experiment's folder as the job sees it (cptlab.layout.Layout.root_in)."""
    return str(LAYOUT.root_in(output[0]))


# Every rule's conda environment under --use-conda: the GPU lock (CUDA torch, vLLM, DeepSpeed;
# envs/cptlab-gpu.yaml) when the config gives any rule kind a GPU, as config/paper.yaml does, else
# the CPU one. One environment for all the rules of a run, so that every job reads the same
# package versions and conda builds it once (CPU-only jobs run the CUDA torch on the CPU).
CONDA_ENV = (
    "../../envs/cptlab-gpu.yaml"
    if any(rule_resources(config, kind)["gpu"] for kind in RESOURCE_DEFAULTS)
    else "../../envs/cptlab.yaml"
)


# How every job starts: under its claim in the results folder, with its command's output in its
# log; once the command succeeded, it commits the job's provenance (a failed or killed job keeps
# that of its last complete run, so the next invocation reruns it) and releases the claim
# (cptlab.claims).
CLAIMED = "cptlab claimed --log {log} {input.provenance} --"


def cptlab_shell(arguments, kind=None):
    """A job's shell line: `cptlab <arguments>` under the job's claim (CLAIMED); for a `kind`
    of resources with a launcher (`accelerate launch ...`, `torchrun ...`), the launcher runs
    the `cptlab` module in every process (not a console script); with torch's own CPU kernels
    where the config computes in half precision."""
    launcher = rule_resources(config, kind)["launcher"] if kind else ""
    start = cptlab_invocation(launcher, computes_in_half_precision(config), under=CLAIMED)
    return f"{start} {arguments}"
