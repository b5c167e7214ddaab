"""The Snakemake workflow end to end on the smoke config, and what each kind of change reruns.

One real run (module fixture) of config/smoke.yaml in a private copy of the workflow; then dry
runs after one change each, compared job by job with what that change invalidates, in that copy
and in a colleague's fresh clone beside a copy of its results folder (without `.snakemake/`).
"""

from __future__ import annotations

import ast
import json
import re
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from workflow_helpers import (
    METHODS,
    SMOKE,
    STAGES,
    copy_workflow,
    downstream,
    dry_run_jobs,
    edited_config,
    planned_jobs,
    snakemake,
)

from cptlab.provenance import SourceTree

pytestmark = pytest.mark.integration

EVAL_BENCHMARKS = 3  # math_id, science_id, logic_ood; one evaluation job per checkpoint
# smoke.yaml's within-stage checkpoint: step 1 of each stage's 2, on 2 rows of each benchmark
WITHIN = {"evaluate_within_stage": METHODS * STAGES}
# what a change of the within-stage checkpoints' evaluations alone reruns after them: the tables
# and figures, not the chains' drift (it reads the stage ends)
WITHIN_DOWNSTREAM = {"aggregate": 1, "figures": 1, "findings": 1, "drift_figures": 1, "all": 1}


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> Path:
    workdir = copy_workflow(tmp_path_factory.mktemp("workflow"))
    # Every job's log also lists the modules it imported (test_code_hashes_cover_every_import).
    env = {"OMP_NUM_THREADS": "1", "PYTHONPROFILEIMPORTTIME": "1"}
    done = snakemake(workdir, "--cores", "2", "--configfile", SMOKE, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # The finished results as a colleague receives them.
    shutil.copytree(workdir / "results", workdir.parent / "finished_results", symlinks=True)
    return workdir


def plan_after(workdir: Path, tmp_path: Path, edit) -> Counter:
    config = edited_config(workdir / SMOKE, tmp_path / "changed.yaml", edit)
    return planned_jobs(workdir, "--configfile", str(config))


def plan_after_editing(workdir: Path, edits: dict[str, Callable[[str], str]]) -> Counter:
    """The dry run after each source file of `edits` (under src/cptlab/) is rewritten by its
    function (then restored)."""
    originals = {}
    try:
        for module, edit in edits.items():
            source = workdir / "src" / "cptlab" / module
            originals[source] = source.read_text()
            source.write_text(edit(originals[source]))
        return planned_jobs(workdir, "--configfile", SMOKE)
    finally:
        for source, text in originals.items():
            source.write_text(text)


def a_statement_in_a_function(text: str) -> str:
    """`text` with one statement appended to the body of its first function."""
    function = next(node for node in ast.walk(ast.parse(text)) if isinstance(node, ast.FunctionDef))
    lines = text.splitlines(keepends=True)
    lines.insert(function.end_lineno, " " * function.body[-1].col_offset + "_edited = None\n")
    return "".join(lines)


@pytest.fixture
def colleague(smoke, tmp_path) -> Path:
    """A fresh clone beside `cp -a` of the finished results folder, without `.snakemake/`."""
    clone = copy_workflow(tmp_path)
    # copy2 keeps modification times, as `cp -a` does
    shutil.copytree(smoke.parent / "finished_results", clone / "results", symlinks=True)
    return clone


def test_run_writes_the_results_contract(smoke):
    results = smoke / "results" / "smoke"
    scores = pd.read_csv(results / "scores.csv")
    assert list(scores.columns) == [
        "method", "seed", "stage", "stage_domain", "benchmark", "benchmark_domain", "split",
        "accuracy", "n", "ci_low", "ci_high", "samples", "backend", "test_pass_fraction",
        "test_pass_fraction_ci_low", "test_pass_fraction_ci_high", "pass_at_1", "pass_at_1_ci_low",
        "pass_at_1_ci_high", "pass_at_k", "pass_at_k_ci_low", "pass_at_k_ci_high", "maj_at_k",
        "maj_at_k_ci_low", "maj_at_k_ci_high",
    ]  # fmt: skip
    assert set(scores.backend) == {"hf"} and set(scores.samples) == {1}
    assert scores.pass_at_k.isna().all()  # one greedy sample: no pass@k
    # only the study's code verifier counts tests; the smoke's verifiers do not
    assert scores.test_pass_fraction.isna().all()
    # the base (stage 0) and two stages, for each method, on each benchmark
    assert len(scores) == METHODS * (STAGES + 1) * EVAL_BENCHMARKS
    assert set(scores.stage_domain) == {"base", "math", "science"}
    assert ((scores.ci_low <= scores.accuracy) & (scores.accuracy <= scores.ci_high)).all()
    metrics = pd.read_csv(results / "cl_metrics.csv")
    assert {"relative", "gain", "forgetting", "avg_accuracy"} <= set(metrics.metric)
    findings = pd.read_csv(results / "findings.csv", dtype=str, keep_default_na=False)
    # two methods, one seed: no interval; SDPO_5%, CoT and SFT did not run
    assert set(findings.verdict) <= {"inconclusive", "not measured"}
    assert (findings[findings.finding == "1"].verdict == "not measured").all()
    figures = json.loads((results / "figures" / "manifest.json").read_text())
    assert figures and all((results / "figures" / Path(f).name).exists() for f in _files(figures))
    responses = results / "eval" / "grpo" / "seed0" / "stage2" / "math_id.responses.jsonl"
    assert len(responses.read_text().splitlines()) == 4  # evaluation.n
    for stage in ("stage1_math", "stage2_science"):
        manifest = json.loads(
            (results / "runs" / "grpo" / "seed0" / stage / "manifest.json").read_text()
        )
        assert manifest["status"] == "complete"
    # training state is kept outside the declared outputs
    assert (results / "state" / "grpo" / "seed0" / "stage1_math").is_dir()


def test_reused_verdicts_make_each_evaluation_read_the_checkpoint_its_stage_started_from(
    smoke, tmp_path
):
    """evaluation.reuse_verdicts (on in the embedded default): a stage's evaluations, its end's
    and its within-stage checkpoint's, take as inputs the responses of the checkpoint the stage
    started from (the base's for stage 1), so that each runs after that one; the base's reads
    none. As a new evaluation setting it reruns every evaluation."""
    edit = lambda c: c["evaluation"].update(reuse_verdicts=True)  # noqa: E731
    config = edited_config(smoke / SMOKE, tmp_path / "reuse.yaml", edit)
    planned = snakemake(smoke, "-n", "--cores", "2", "--configfile", str(config))
    assert planned.returncode == 0, planned.stderr[-3000:]
    read: dict[str, Counter] = {}
    for job in dry_run_jobs(planned.stdout):
        if job["rule"].startswith("evaluate"):
            folders = {str(Path(f).parent) for f in job["input"] if f.endswith(".responses.jsonl")}
            assert len(folders) <= 1, job
            read.setdefault(job["rule"], Counter()).update(folders or {"none"})
    eval_dir = "results/smoke/eval"
    expected = Counter(
        {
            f"{eval_dir}/base": METHODS,
            **{f"{eval_dir}/{m}/seed0/stage1": 1 for m in ("grpo", "sdpo_frozen")},
        }
    )
    assert read == {
        "evaluate_base": Counter(none=1),
        "evaluate_stage": expected,
        "evaluate_within_stage": expected,
    }


def test_each_stage_publishes_and_evaluates_its_within_stage_checkpoint(smoke):
    """Step 1 of each 2-step stage: published with the stage (listed in its manifest, its own
    manifest written before the stage's), evaluated on 2 rows of each benchmark; the trajectory
    puts it between the stage ends, and the ledger follows its items."""
    results = smoke / "results" / "smoke"
    for method in ("grpo", "sdpo_frozen"):
        for stage, domain in ((1, "math"), (2, "science")):
            run = results / "runs" / method / "seed0" / f"stage{stage}_{domain}"
            assert json.loads((run / "manifest.json").read_text())["within_stage"] == [
                {"folder": "step1", "reached": True, "step": 1}
            ]
            assert (run / "step1" / "manifest.json").stat().st_mtime <= (
                run / "manifest.json"
            ).stat().st_mtime
            record = json.loads(
                (
                    results / "eval" / method / "seed0" / f"stage{stage}" / "step1" / "math_id.json"
                ).read_text()
            )
            assert (record["step"], record["n"], record["rows_sampled"]) == (1, 2, 2)
    trajectory = pd.read_csv(results / "trajectory.csv")
    chain = trajectory[(trajectory.method == "grpo") & (trajectory.benchmark == "math_id")]
    assert list(chain.chain_step) == [0, 1, 2, 3, 4]
    assert list(chain.checkpoint) == ["base", "within", "end", "within", "end"]
    ledger = pd.read_csv(results / "item_ledger.csv")
    within = ledger[(ledger.checkpoint == "within") & (ledger.benchmark == "math_id")]
    assert len(within) == METHODS * STAGES * 2  # each within-stage checkpoint's 2 rows
    transitions = pd.read_csv(results / "transitions.csv")
    assert {"stage", "step", "since_own"} == set(transitions.kind)
    steps = transitions[(transitions.kind == "step") & (transitions.benchmark == "math_id")]
    assert set(steps["items"]) == {2}  # a within-stage checkpoint's sample on one side


def _files(manifest: dict) -> list[str]:
    found = []
    for value in manifest.values():
        if isinstance(value, str) and value.endswith((".png", ".pdf")):
            found.append(value)
        elif isinstance(value, list):
            found += [v for v in value if isinstance(v, str) and v.endswith((".png", ".pdf"))]
        elif isinstance(value, dict):
            found += _files(value)
    return found


def test_the_effective_config_keeps_the_domain_order(smoke):
    """The CLI reads results/<exp>/config.json; its domain order must be the YAML's, which
    decides the warm-up mixture's order (a sorted copy built a different base)."""
    import yaml

    written = json.loads((smoke / "results" / "smoke" / "config.json").read_text())
    source = yaml.safe_load((smoke / SMOKE).read_text())
    assert list(written["data"]["domains"]) == list(source["data"]["domains"])


def test_report_html(smoke):
    report = smoke / "results" / "smoke" / "report.html"
    done = snakemake(smoke, "--configfile", SMOKE, "--report", str(report))
    assert done.returncode == 0, done.stderr[-3000:]
    assert report.stat().st_size > 10_000
    assert "Findings" in report.read_text()  # the findings table's category


def test_nothing_to_do_after_a_run(smoke):
    assert planned_jobs(smoke, "--configfile", SMOKE) == Counter()


def test_a_fresh_clone_beside_the_results_reruns_nothing(smoke):
    """A clone resets every source file's mtime; rules compare code by content."""
    for path in [
        smoke / "Snakefile",
        *(smoke / "workflow").rglob("*"),
        *(smoke / "src").rglob("*"),
    ]:
        if path.is_file():
            path.touch()
    assert planned_jobs(smoke, "--configfile", SMOKE) == Counter()


def test_an_evaluation_param_reruns_every_evaluation_only(smoke, tmp_path):
    jobs = plan_after(smoke, tmp_path, lambda c: c["evaluation"].update(max_new_tokens=9))
    assert jobs == Counter(
        evaluate_base=1, evaluate_stage=METHODS * STAGES, **WITHIN, **downstream(METHODS, base=True)
    )


def test_the_within_stage_rows_rerun_only_the_within_stage_evaluations(smoke, tmp_path):
    jobs = plan_after(smoke, tmp_path, lambda c: c["evaluation"]["within_stage"].update(rows=3))
    assert jobs == Counter(**WITHIN, **WITHIN_DOWNSTREAM)


def test_turning_within_stage_evaluation_off_reruns_the_stages_that_exported(smoke, tmp_path):
    """The stages exported their saves for it: without, they are other outputs; no
    within-stage evaluation is left."""
    jobs = plan_after(smoke, tmp_path, lambda c: c["evaluation"].update(within_stage=None))
    assert jobs["train_stage"] == METHODS * STAGES and "evaluate_within_stage" not in jobs


def test_a_method_param_reruns_only_that_methods_chain(smoke, tmp_path):
    jobs = plan_after(
        smoke, tmp_path, lambda c: c["methods"]["sdpo_frozen"].update(distillation_is_clip=3.0)
    )
    assert jobs == Counter(
        train_stage=STAGES, evaluate_stage=STAGES, evaluate_within_stage=STAGES, **downstream(1)
    )


def test_replay_feeds_the_earlier_stages_rows_to_that_methods_stages(smoke, tmp_path):
    """Replay reruns only its method's chain; stage 2 (science) reads math's train rows."""
    config = edited_config(
        smoke / SMOKE,
        tmp_path / "replay.yaml",
        lambda c: c["methods"]["sdpo_frozen"].update(training={"replay_share": 0.25}),
    )
    done = snakemake(smoke, "-n", "-p", "--cores", "2", "--configfile", str(config))
    assert done.returncode == 0, done.stderr[-3000:]
    output = (done.stdout + done.stderr).splitlines()
    commands = [line for line in output if "train-stage" in line]
    assert len(commands) == STAGES, commands
    replay = {re.search(r"--domain (\w+)", c)[1]: c.split("--replay-data")[1] for c in commands}
    assert replay["math"].split()[0] == "--export-saves"  # no replay rows: the next option
    assert replay["science"].split()[0].endswith("data/math_train.jsonl")


def test_one_domains_steps_rerun_only_its_stages_and_later(smoke, tmp_path):
    jobs = plan_after(
        smoke, tmp_path, lambda c: c["training"].setdefault("domain_steps", {}).update(science=3)
    )
    # science is the last stage: one stage per method, now with two within-stage checkpoints
    assert jobs == Counter(
        train_stage=METHODS,
        evaluate_stage=METHODS,
        evaluate_within_stage=2 * METHODS,
        **downstream(METHODS),
    )


def test_adding_a_benchmark_reruns_only_the_evaluations(smoke, tmp_path):
    """Its data, and each checkpoint's one evaluation job (loading the model dominates it),
    and the distances between the data sets, which it joins: no training, no base."""
    jobs = plan_after(
        smoke, tmp_path, lambda c: c["data"]["domains"]["math"].update(ood=["math_ood"])
    )
    assert jobs == Counter(
        prepare_data=1,
        evaluate_base=1,
        evaluate_stage=METHODS * STAGES,
        **WITHIN,
        **downstream(METHODS, base=True),
        dataset_distance=1,
    )


def test_adding_a_seed_adds_only_its_chains(smoke, tmp_path):
    jobs = plan_after(smoke, tmp_path, lambda c: c["run"].update(seeds=[0, 1]))
    assert jobs == Counter(
        train_stage=METHODS * STAGES,
        evaluate_stage=METHODS * STAGES,
        **WITHIN,
        **downstream(METHODS),
    )


def test_adding_a_method_adds_only_its_chain(smoke, tmp_path):
    def add(config):
        config["methods"]["sdpo_ema5"] = {
            "trainer": "sdpo",
            "teacher_model_kind": "ema",
            "teacher_update_rate": 0.05,
        }
        config["run"]["methods"].append("sdpo_ema5")

    jobs = plan_after(smoke, tmp_path, add)
    assert jobs == Counter(
        train_stage=STAGES, evaluate_stage=STAGES, evaluate_within_stage=STAGES, **downstream(1)
    )


def test_docstrings_comments_and_maps_rerun_nothing(smoke):
    """A package's docstring is its module map (tests/test_maps.py): editing it, or a comment,
    or a function's docstring, or a config key's description changes no result."""
    assert (
        plan_after_editing(
            smoke,
            {
                "sandbox/__init__.py": lambda text: text.replace('"""', '"""A map: ', 1),
                "drift/plots.py": lambda text: text + "\n# a comment\n",
                "train/__init__.py": lambda text: text.replace(
                    '"""', '"""The training package. ', 1
                ),
                "evaluation/scoring.py": lambda text: text.replace('    """', '    """Note: ', 1),
                # a config key's description (the schema's, cptlab.config.dataclass_schema)
                "train/settings.py": lambda text: text.replace(
                    "Rollouts per prompt.", "Rollouts per prompt (its group).", 1
                ),
            },
        )
        == Counter()
    )


EVERYTHING = Counter(
    prepare_data=8, build_base=1, evaluate_base=1, train_stage=METHODS * STAGES,
    evaluate_stage=METHODS * STAGES, **WITHIN, **downstream(METHODS, base=True),
    dataset_distance=1,
)  # fmt: skip
# The data-set distances read the data alone: no change after the data reruns them.
AFTER_THE_DATA = EVERYTHING - Counter(prepare_data=8, dataset_distance=1)
AFTER_THE_BASE = AFTER_THE_DATA - Counter(build_base=1, evaluate_base=1, drift_base=1)
# One module of each package (and config.py, which every job imports), a statement added to a
# function of it: the jobs whose subcommand reaches that code, and what reads their outputs.
CODE_CHANGES = {
    "config.py": EVERYTHING,
    "domains/embedded/math.py": EVERYTHING,  # the registry loads every domain
    # The registry checks each benchmark's verifier by name in cptlab.verifiers, which imports
    # every verifier, and the code verifier the sandbox: data preparation reaches them all.
    "verifiers/math.py": EVERYTHING,
    "sandbox/client.py": EVERYTHING,
    "base_model/tokenizer.py": AFTER_THE_DATA,
    "train/grpo.py": AFTER_THE_BASE,
    "evaluation/evaluate.py": AFTER_THE_DATA - Counter(build_base=1, train_stage=METHODS * STAGES),
    "results/findings.py": Counter(findings=1, all=1),
    "drift/plots.py": Counter(drift_figures=1, all=1),
}


@pytest.mark.parametrize("module", CODE_CHANGES)
def test_a_code_change_reruns_exactly_the_jobs_that_reach_it(smoke, module):
    assert plan_after_editing(smoke, {module: a_statement_in_a_function}) == CODE_CHANGES[module]


def test_code_hashes_cover_every_import(smoke):
    """Each job's log lists (PYTHONPROFILEIMPORTTIME) every cptlab module the job imported;
    each must be among the sources its subcommand's code hash reads."""
    tree = SourceTree(smoke / "src" / "cptlab")
    logs = smoke / "results" / "smoke" / "logs"
    kinds = {
        "data": "prepare-data", "base": "build-base", "train": "train-stage",
        "evaluate": "evaluate-checkpoint", "aggregate": "aggregate", "figures": "figures",
        "findings": "findings",
        "drift/figures": "drift-figures", "drift/dataset_distance": "dataset-distance",
        "drift/base_responses": "drift-base", "drift": "drift-chain",
    }  # fmt: skip
    # The parser imports every command module; another command's handlers never run.
    command_modules = {module for module, _ in tree.commands.values()}
    checked = Counter()
    for log in sorted(logs.rglob("*.log")):
        job = log.relative_to(logs).with_suffix("").as_posix()
        kind = next(k for k in kinds if job == k or job.startswith(k + "/"))
        imported = set(re.findall(r"import time:.*\|\s+(cptlab[\w.]*)\s*$", log.read_text(), re.M))
        imported -= command_modules - {tree.commands[kinds[kind]][0]}
        hashed = {tree.module_of(path) for path in tree.command_sources(kinds[kind])}
        assert imported and imported <= hashed, (job, sorted(imported - hashed))
        checked[kinds[kind]] += 1
    assert set(checked) == set(kinds.values())


def test_a_colleagues_copy_of_the_results_has_nothing_to_do(colleague):
    assert planned_jobs(colleague, "--configfile", SMOKE) == Counter()


def test_a_colleagues_copy_reruns_exactly_what_an_evaluation_key_changes(colleague, tmp_path):
    jobs = plan_after(colleague, tmp_path, lambda c: c["evaluation"].update(max_new_tokens=9))
    assert jobs == Counter(
        evaluate_base=1, evaluate_stage=METHODS * STAGES, **WITHIN, **downstream(METHODS, base=True)
    )


def test_a_colleagues_copy_reruns_exactly_what_a_method_key_changes(colleague, tmp_path):
    jobs = plan_after(
        colleague, tmp_path, lambda c: c["methods"]["sdpo_frozen"].update(distillation_is_clip=3.0)
    )
    assert jobs == Counter(
        train_stage=STAGES, evaluate_stage=STAGES, evaluate_within_stage=STAGES, **downstream(1)
    )


def test_the_paper_config_plans_the_whole_study(tmp_path):
    """config/paper.yaml: 4 methods x 4 stages, each of the 17 checkpoints on the 10
    benchmarks in one job (planned in a copy: Snakemake keeps its state in .snakemake/)."""
    jobs = planned_jobs(copy_workflow(tmp_path), "--configfile", "config/paper.yaml")
    assert jobs["train_stage"] == 16
    assert jobs["evaluate_base"] == 1 and jobs["evaluate_stage"] == 16
    assert jobs["evaluate_within_stage"] == 4 * (4 + 4 + 4 + 1)  # every 10 steps of 50/50/50/20
    assert "build_base" not in jobs


def test_the_study_config_plans_every_method_over_three_seeds(tmp_path):
    """config/study.yaml (`make study`): 6 methods x 3 seeds x 4 stages, one base, the findings."""
    jobs = planned_jobs(copy_workflow(tmp_path), "--configfile", "config/study.yaml")
    assert jobs["train_stage"] == 6 * 3 * 4 and jobs["evaluate_stage"] == 6 * 3 * 4
    assert jobs["evaluate_within_stage"] == 6 * 3 * 4  # step 30 of each stage
    assert jobs["build_base"] == 1 and jobs["drift_chain"] == 6 * 3 and jobs["findings"] == 1


@pytest.mark.parametrize("hash_seed", ["0", "1", "2"])
def test_any_order_of_targets_finds_every_staged_provenance(tmp_path, hash_seed):
    """Snakemake caches the listing of each folder it scans while it builds the DAG, and the
    provenance records are staged during that build. Which job's record is scanned first follows
    the targets' order, which varies with Python's string hashing (PYTHONHASHSEED 1 used to plan
    the stage's evaluation first, and report the base's staged record missing)."""
    targets = [
        "results/smoke/eval/base/math_id.json",
        "results/smoke/eval/grpo/seed0/stage1/math_id.json",
    ]
    env = {"PYTHONHASHSEED": hash_seed}
    jobs = planned_jobs(copy_workflow(tmp_path), *targets, "--configfile", SMOKE, env=env)
    assert jobs["evaluate_base"] == 1 and jobs["evaluate_stage"] == 1


def test_a_local_base_folders_files_are_inputs_of_what_reads_the_base(tmp_path):
    """A base named by a local folder (the rehearsal's) is an input of the jobs that read it, so
    a rebuilt model reruns them; a hub name is not a file to track."""
    workdir = copy_workflow(tmp_path)
    folder = workdir / "local-base"
    folder.mkdir()
    for name in ("config.json", "model.safetensors"):
        (folder / name).write_text("{}")
    (workdir / "local.yaml").write_text("extends: config/paper.yaml\nbase: {path: local-base}\n")
    files = {"local-base/config.json", "local-base/model.safetensors"}
    for config, expected in (("local.yaml", files), ("config/paper.yaml", set())):
        planned = snakemake(workdir, "-n", "--cores", "1", "--configfile", config)
        assert planned.returncode == 0, planned.stderr[-3000:]
        jobs = dry_run_jobs(planned.stdout)
        (evaluation,) = [job["input"] for job in jobs if job["rule"] == "evaluate_base"]
        first_stages = [
            job["input"]
            for job in jobs
            if job["rule"] == "train_stage" and not any("/runs/" in f for f in job["input"])
        ]
        assert len(first_stages) == 4  # one first stage per method
        for inputs in (evaluation, *first_stages):
            assert {f for f in inputs if f.startswith("local-base/")} == expected


def test_splitting_a_benchmark_reruns_only_its_evaluations(smoke, tmp_path):
    """evaluation.shards on a finished run: each checkpoint's shard jobs and merge of the split
    benchmark, then what reads its scores; the other benchmarks' evaluations stand. Split them
    all and no checkpoint job is left."""
    checkpoints = 1 + METHODS * STAGES
    jobs = plan_after(smoke, tmp_path, lambda c: c["evaluation"].update(shards={"math_id": 3}))
    assert jobs == Counter(
        evaluate_base_shard=3,
        evaluate_stage_shard=3 * METHODS * STAGES,
        merge_shards_base=1,
        merge_shards_stage=METHODS * STAGES,
        **downstream(METHODS, base=True),
    )
    every = {"math_id": 2, "science_id": 2, "logic_ood": 2}
    jobs = plan_after(smoke, tmp_path, lambda c: c["evaluation"].update(shards=every))
    assert jobs["evaluate_base"] + jobs["evaluate_stage"] == 0
    assert jobs["evaluate_base_shard"] + jobs["evaluate_stage_shard"] == 6 * checkpoints
    assert jobs["merge_shards_base"] + jobs["merge_shards_stage"] == 3 * checkpoints


def test_the_findings_declare_every_stage_they_read(smoke):
    """The findings read each stage's KL budget (its manifest) and steps (train_log.jsonl,
    complete when the manifest is): a rerun stage reruns them, whatever its drift does."""
    planned = snakemake(
        smoke, "-n", "--cores", "1", "--forcerun", "findings", "--configfile", SMOKE
    )
    assert planned.returncode == 0, planned.stderr[-3000:]
    (findings,) = [
        job["input"] for job in dry_run_jobs(planned.stdout) if job["rule"] == "findings"
    ]
    stages = {
        f"results/smoke/runs/{method}/seed0/stage{k}_{domain}/manifest.json"
        for method in ("grpo", "sdpo_frozen")
        for k, domain in enumerate(("math", "science"), 1)
    }
    assert stages <= set(findings)
