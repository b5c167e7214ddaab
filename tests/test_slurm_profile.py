"""The SLURM profile end to end: real `snakemake --profile slurm` submissions, fake SLURM.

snakemake-executor-plugin-slurm builds one `sbatch` command line per job from the job's
resources (workflow/rules/common.smk `job_resources`, config/paper.yaml `resources:`) and polls
`sacct` (or `squeue`) for the job states. Here every SLURM command it may call is a small script
on PATH: `sbatch` records its argv and answers a job id the way `sbatch --parsable` does; `sacct`
and `squeue` report a job's first submission FAILED and a resubmission COMPLETED (without outputs:
nothing runs), so Snakemake retries what has `retries:`, gives up, and exits within seconds. The
tests read the recorded sbatch lines: GPU rules ask for their GPUs, partition, runtime and memory;
CPU-only rules ask for no GPU; a retry asks for a longer runtime.

What the plugin (2.8.0) calls on the submitting side:
  sbatch --parsable --job-name <run uuid> --output <log> --export=ALL --comment rule_<rule>_...
         [-A <account>] -p <partition> -t <runtime min> --mem <mem_mb>
         (--ntasks=1 --cpus-per-task=<threads> | --cpus-per-gpu=<n>) -D <workdir>
         [--gpus=[<model>:]<n>] --wrap="<snakemake job command>"
  sacct -X --parsable2 --clusters all --noheader --format=JobIdRaw,State ... --name <run uuid>
        (status: `<id>|<STATE>` lines); sacct -j <id>.<step> --format=Reason --noheader (steps
        0-9 of a failed job); sacct -nu <user> -o Account%256 | tail -1 (guessing an account)
  squeue --format=%i|%T --states=all --noheader --name <run uuid> (status, when chosen)
  scontrol show config (MinJobAge, MaxArraySize); sinfo -o %P (the default partition, for jobs
  without slurm_partition); sacctmgr / sshare (validating an account); scancel (on interrupt).
  `srun` is called only inside a job (by the slurm-jobstep plugin), never here.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from collections import defaultdict
from pathlib import Path

import pytest
import yaml
from workflow_helpers import BIN, ROOT, copy_workflow, dry_run_jobs, edited_config, snakemake

from cptlab.provenance import STAGED, committed_path

pytestmark = pytest.mark.integration

PAPER = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
SLURM_PROFILE = yaml.safe_load((ROOT / "slurm" / "config.yaml").read_text())
GPU_RULES = {
    "train_stage": "train",
    "evaluate_base": "evaluate",
    "evaluate_stage": "evaluate",
    "evaluate_base_shard": "evaluate",
    "evaluate_stage_shard": "evaluate",
    "evaluate_within_stage": "evaluate",
}
SHARDS = PAPER["evaluation"]["shards"]  # the split benchmarks' jobs per checkpoint
CPU_RULES = {"prepare_data", "aggregate", "figures"}
# The one data file left out, the last stage's training prompts: its prepare_data job (CPU) is
# submitted together with the first training stages and the checkpoint evaluations (GPU).
MISSING = PAPER["data"]["domains"][PAPER["run"]["sequence"][-1]]["train"]
DONE_METHOD = PAPER["run"]["methods"][0]  # its stage 1 is pre-made: stage 2 and evaluate_stage run

FAKE_SLURM = r"""
import fcntl, json, os, sys
from pathlib import Path

state = Path(os.environ["FAKE_SLURM_DIR"])
name, args = sys.argv[1], sys.argv[2:]
with open(state / "lock", "a") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    with open(state / "calls.jsonl", "a") as calls:
        calls.write(json.dumps({"command": name, "argv": args}) + "\n")
    if name == "sbatch":
        counter = state / "next_jobid"
        jobid = int(counter.read_text()) if counter.exists() else 1001
        counter.write_text(str(jobid + 1))
        with open(state / "sbatch.jsonl", "a") as log:
            log.write(json.dumps({"jobid": str(jobid), "argv": args}) + "\n")
    submitted = []
    if (state / "sbatch.jsonl").exists():
        submitted = [json.loads(l) for l in (state / "sbatch.jsonl").read_text().splitlines()]


def option(argv, key):
    return argv[argv.index(key) + 1] if key in argv else None


def status_lines(run):
    # A job's first submission FAILED (so Snakemake retries what has `retries:`); a
    # resubmission of the same job (same --comment) COMPLETED, without writing its outputs
    # (nothing runs), so Snakemake fails it for missing output and gives up.
    lines, seen = [], set()
    for s in submitted:
        comment = option(s["argv"], "--comment")
        if option(s["argv"], "--job-name") == run:
            lines.append(f"{s['jobid']}|{'COMPLETED' if comment in seen else 'FAILED'}\n")
        seen.add(comment)
    return "".join(lines)


if name == "sbatch":
    print(jobid)  # `sbatch --parsable`: "<jobid>" or "<jobid>;<cluster>"
elif name == "sacct":
    if any(a.startswith("--format=JobIdRaw") for a in args):  # the status query
        sys.stdout.write(status_lines(option(args, "--name")))
    # the account guess (`sacct -nu <user> -o Account%256 | tail -1`): no account
elif name == "squeue":
    sys.stdout.write(status_lines(option(args, "--name")))
elif name == "scontrol":
    if args[:2] == ["show", "config"]:
        print("MinJobAge               = 300 sec")
        print("MaxArraySize            = 1001")
elif name == "sinfo":
    print("PARTITION")  # `sinfo -o %P`; the default partition carries a star
    print("cpu*")
    print("gpu")
elif name == "srun":
    sys.exit("fake srun: no job ever runs in this test")
"""
# The plugin asks `sacct -j <id>.<step> --format=Reason --noheader` for steps 0-9 of every
# failed job, one shell each: answered (with nothing) by the shell script itself.
REASON_FAST_PATH = """\
if [ "$1" = "-j" ]; then
    printf '{"command": "sacct", "argv": ["%s", "%s", "%s", "%s"]}\\n' "$1" "$2" "$3" "$4" \\
        >> "$FAKE_SLURM_DIR/calls.jsonl"
    exit 0
fi
"""
COMMANDS = (
    "sbatch",
    "sacct",
    "squeue",
    "scontrol",
    "sinfo",
    "scancel",
    "srun",
    "sacctmgr",
    "sshare",
)


def install_fake_slurm(folder: Path) -> Path:
    """A bin folder with every SLURM command the plugin may call: shell scripts that hand
    their name and arguments to one python script."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True)
    script = folder / "fake_slurm.py"
    script.write_text(FAKE_SLURM)
    for command in COMMANDS:
        fast = REASON_FAST_PATH if command == "sacct" else ""
        # -S -E: no site-packages, no PYTHON* variables (start-up time counts)
        body = f'exec {shlex.quote(sys.executable)} -S -E {script} {command} "$@"\n'
        path = bin_dir / command
        path.write_text(f"#!/bin/sh\n{fast}{body}")
        path.chmod(0o755)
    return bin_dir


def parse_sbatch(argv: list[str]) -> dict:
    """Options of one recorded sbatch argv: `--key=value`, `-k value`, `--key value`, flags."""
    takes_value = {"--job-name", "--output", "--comment", "-A", "-p", "-t", "--mem"}
    takes_value |= {"--mem-per-cpu", "-C", "-D", "--clusters"}
    options, flags, i = {}, set(), 0
    while i < len(argv):
        token = argv[i]
        if token in takes_value:
            options[token] = argv[i + 1]
            i += 2
            continue
        if token.startswith("--") and "=" in token:
            key, value = token.split("=", 1)
            options[key] = value
        else:
            flags.add(token)
        i += 1
    return {"options": options, "flags": flags}


def job_of(wrap: str) -> tuple[str, str]:
    """(rule, wildcards) of a submission from the `--target-jobs` of its wrapped command."""
    words = shlex.split(wrap)
    target = words[words.index("--target-jobs") + 1]
    rule, _, wildcards = target.partition(":")
    return rule, wildcards


def hub_cache_with(model: str, cache: Path) -> Path:
    """An HF hub cache holding `model`'s config.json, as `huggingface-cli download` leaves it."""
    repo = cache / f"models--{model.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("0" * 40)
    snapshot = repo / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    return cache


@pytest.fixture(scope="module")
def submitted(tmp_path_factory):
    """Run the paper config through `--profile slurm` against fake SLURM commands."""
    work = copy_workflow(tmp_path_factory.mktemp("slurm_workflow"))
    data = work / "results" / PAPER["experiment"] / "data"
    data.mkdir(parents=True)
    benchmarks = {
        name
        for spec in PAPER["data"]["domains"].values()
        for name in [spec.get("train"), *spec.get("id", []), *spec.get("ood", [])]
        if name
    }
    assert MISSING in benchmarks
    for name in benchmarks - {MISSING}:
        (data / f"{name}.jsonl").touch()
        os.utime(data / f"{name}.jsonl", (1e9, 1e9))  # older than the checkpoint below
    # One finished first stage: its evaluations (evaluate_stage) and the next stage are ready too.
    runs = work / "results" / PAPER["experiment"] / "runs" / DONE_METHOD / "seed0"
    manifest = runs / f"stage1_{PAPER['run']['sequence'][0]}" / "manifest.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_text("{}\n")
    # As in a finished run, every job's provenance is committed (cptlab.provenance): what a dry
    # run stages, copied to results/, so that only the missing outputs decide what runs.
    planned = snakemake(work, "-n", "--configfile", "config/paper.yaml", "--cores", "1")
    assert planned.returncode == 0, planned.stderr[-3000:]
    for staged in (work / STAGED).rglob("*.json"):
        committed = work / committed_path(staged.relative_to(work))
        committed.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(staged, committed)

    state = tmp_path_factory.mktemp("fake_slurm")
    fake_bin = install_fake_slurm(state)
    env = {
        "PATH": f"{fake_bin}:{BIN}:{os.environ['PATH']}",
        "FAKE_SLURM_DIR": str(state),
        # The base as a cluster user has it (README: fill the caches first); without it the
        # run would stop before its first job (cptlab.site).
        "HF_HUB_CACHE": str(hub_cache_with(PAPER["base"]["path"], tmp_path_factory.mktemp("hub"))),
        "SNAKEMAKE_SLURM_PARTITIONS": "",  # no site partition file: the config's partitions
        "OMP_NUM_THREADS": "1",
    }
    done = snakemake(
        work,
        "--profile", "slurm",
        "--configfile", "config/paper.yaml",
        "--cores", "all",
        "--jobs", "50",
        "--latency-wait", "1",
        "--keep-going",
        "--slurm-init-seconds-before-status-checks", "1",
        "--seconds-between-status-checks", "1",
        "--slurm-status-attempts", "1",
        env=env,
        timeout=120,
    )  # fmt: skip
    log = done.stdout + done.stderr
    assert done.returncode != 0, f"every job fails in fake SLURM, yet snakemake succeeded:\n{log}"
    assert (state / "sbatch.jsonl").exists(), f"nothing was submitted:\n{log}"
    jobs = defaultdict(list)  # (rule, wildcards) -> its submissions, attempt by attempt
    for line in (state / "sbatch.jsonl").read_text().splitlines():
        record = json.loads(line)
        parsed = parse_sbatch(record["argv"])
        rule, wildcards = job_of(parsed["options"]["--wrap"])
        jobs[(rule, wildcards)].append({**parsed, "argv": record["argv"], "jobid": record["jobid"]})
    calls = [json.loads(line) for line in (state / "calls.jsonl").read_text().splitlines()]
    return {"jobs": jobs, "calls": calls, "log": log}


def submissions(submitted, rule):
    return {key: tries for key, tries in submitted["jobs"].items() if key[0] == rule}


def gpu_flags(submission):
    """Every part of an sbatch line that asks SLURM for a GPU."""
    gpu_options = ("--gpu", "--gres", "--cpus-per-gpu", "--mem-per-gpu", "--ntasks-per-gpu", "-G")
    return [a for a in submission["argv"] if a.startswith(gpu_options)]


def test_first_wave_mixes_gpu_and_cpu_rules(submitted):
    rules = {rule for rule, _ in submitted["jobs"]}
    assert rules == {"prepare_data", "train_stage", *(r for r in GPU_RULES if "eval" in r)}, rules
    assert set(submissions(submitted, "prepare_data")) == {("prepare_data", f"benchmark={MISSING}")}
    first, second = PAPER["run"]["sequence"][:2]
    stages = {w for _, w in submissions(submitted, "train_stage")}
    assert stages == {
        f"method={m},seed=0,stage=1,domain={first}"
        for m in PAPER["run"]["methods"]
        if m != DONE_METHOD
    } | {f"method={DONE_METHOD},seed=0,stage=2,domain={second}"}
    # one evaluation job per ready checkpoint: the base, and the finished stage
    assert set(submissions(submitted, "evaluate_base")) == {("evaluate_base", "")}
    stage = {w for _, w in submissions(submitted, "evaluate_stage")}
    assert stage == {f"method={DONE_METHOD},seed=0,stage=1"}
    # and one job per shard of each split benchmark on each of them
    for rule, checkpoint in (("evaluate_base_shard", ""), ("evaluate_stage_shard", stage.pop())):
        shards = {w for _, w in submissions(submitted, rule)}
        assert shards == {
            ",".join(filter(None, [checkpoint, f"benchmark={b},shard={i},shards={n}"]))
            for b, n in SHARDS.items()
            for i in range(1, n + 1)
        }, rule


@pytest.mark.parametrize("rule", sorted(GPU_RULES))
def test_gpu_rules_ask_for_gpus_partition_runtime_memory(submitted, rule):
    spec = PAPER["resources"][GPU_RULES[rule]]
    jobs = submissions(submitted, rule)
    assert jobs
    for key, tries in jobs.items():
        first = tries[0]
        options = first["options"]
        assert options.get("--gpus") == str(spec["gpu"]), (key, first["argv"])
        assert options.get("-p") == spec["slurm_partition"], (key, first["argv"])
        assert options.get("-t") == str(spec["runtime"]), (key, first["argv"])
        assert options.get("--mem") == str(spec["mem_mb"]), (key, first["argv"])
        assert options.get("--cpus-per-gpu") == str(spec["cpus_per_gpu"]), (key, first["argv"])
        assert "--cpus-per-task" not in options, (key, first["argv"])
        # one task, its launcher's processes sharing all the GPUs (tasks_per_gpu: 0)
        tasks = [a for a in first["argv"] if a.startswith(("--ntasks", "--gpu-bind", "-n"))]
        assert tasks == [], (key, first["argv"])


def test_cpu_rules_ask_for_no_gpu(submitted):
    jobs = {key: tries for key, tries in submitted["jobs"].items() if key[0] in CPU_RULES}
    assert jobs
    defaults = SLURM_PROFILE["default-resources"]
    gpu_partitions = {spec["slurm_partition"] for spec in PAPER["resources"].values()}
    for key, tries in jobs.items():
        for submission in tries:
            assert gpu_flags(submission) == [], (key, submission["argv"])
            options = submission["options"]
            # the cluster's default partition (sinfo), not a GPU one
            assert options.get("-p") == "cpu", (key, submission["argv"])
            assert options["-p"] not in gpu_partitions
            assert options.get("-t") == str(defaults["runtime"]), (key, submission["argv"])
            assert options.get("--mem") == str(defaults["mem_mb"]), (key, submission["argv"])
            assert options.get("--ntasks") == "1", (key, submission["argv"])


def test_a_retry_asks_for_a_longer_runtime(submitted):
    """train_stage has `retries: 1` and a runtime of config runtime x attempt."""
    runtime = PAPER["resources"]["train"]["runtime"]
    for key, tries in submissions(submitted, "train_stage").items():
        runtimes = [t["options"].get("-t") for t in tries]
        assert runtimes == [str(runtime), str(2 * runtime)], (key, submitted["log"][-4000:])
        first, retry = (
            {k: v for k, v in t["options"].items() if k not in ("-t", "--wrap")} for t in tries
        )
        assert retry == first, key  # same GPUs, partition, memory
    for rule in ("evaluate_base", "evaluate_stage", "prepare_data"):
        for key, tries in submissions(submitted, rule).items():
            assert len(tries) == 1, key  # no retries: submitted once


def test_status_is_queried_for_this_run_and_nothing_runs(submitted):
    runs = {
        option["options"]["--job-name"] for tries in submitted["jobs"].values() for option in tries
    }
    assert len(runs) == 1, runs
    queries = [
        c["argv"]
        for c in submitted["calls"]
        if c["command"] in ("sacct", "squeue") and "--name" in c["argv"]
    ]
    assert queries, [c["command"] for c in submitted["calls"]]
    assert {q[q.index("--name") + 1] for q in queries} == runs
    assert "srun" not in {c["command"] for c in submitted["calls"]}


def dry_run_resources(text: str) -> dict[str, list[dict]]:
    """rule -> the `resources:` of each of its jobs, from a dry run's job listing."""
    resources = defaultdict(list)
    for job in dry_run_jobs(text):
        if job["resources"]:
            resources[job["rule"]].append(job["resources"])
    return resources


def test_gpu_0_and_cpu_only_rules_get_no_gpu_resources(tmp_path):
    """The rules the first wave does not reach (aggregate, figures), and a rule kind configured
    with `gpu: 0` (and a gpu_model, which alone would make the plugin ask `--gpus=<model>:1`),
    get no GPU resource at all: a dry run of the paper config with evaluation on CPUs."""
    work = copy_workflow(tmp_path)

    def cpu_evaluation(config):
        config["resources"]["evaluate"].update(gpu=0, gpu_model="a100")
        config["resources"]["train"]["gpu_model"] = "h100"

    edited_config(work / "config" / "paper.yaml", work / "config" / "cpu_eval.yaml", cpu_evaluation)
    done = snakemake(
        work, "-n", "--profile", "slurm", "--configfile", "config/cpu_eval.yaml", "--cores", "2",
        env={"OMP_NUM_THREADS": "1"}, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    resources = dry_run_resources(done.stdout + done.stderr)
    assert {"train_stage", "evaluate_base", "evaluate_stage", "aggregate", "figures"} <= set(
        resources
    ), sorted(resources)
    gpu_keys = {"gpu", "gpus", "gres", "gpu_model", "cpus_per_gpu", "tasks_per_gpu"}
    for rule in ("evaluate_base", "evaluate_stage", "prepare_data", "aggregate", "figures"):
        for job in resources.get(rule, []):
            assert not gpu_keys & set(job), (rule, job)
    for job in resources["train_stage"]:
        assert (job["gpu"], job["gpu_model"], job["tasks_per_gpu"]) == ("8", "h100", "0"), job


def test_launcher_starts_the_cli_as_a_module() -> None:
    """accelerate and torchrun run a Python file or module in each process, not a console
    script: under a launcher the train rule runs `-m cptlab`."""
    from cptlab.resources import cptlab_invocation

    assert cptlab_invocation("") == "cptlab"
    line = PAPER["resources"]["train"]["launcher"]
    assert cptlab_invocation(line) == f"{line.strip()} -m cptlab"
    torchrun = "torchrun --nproc_per_node 2"
    assert cptlab_invocation(f"{torchrun} ") == f"{torchrun} -m cptlab"


# The study's values (Moenupa/SDPO-CL @ d277934: baseline_grpo.yaml, sdpo.yaml, user.yaml,
# actor/actor.yaml, algorithm/rollout_correction.yaml), in cptlab's keys: docs/study-training.md.
STUDY_TRAINING = {
    "prompts_per_step": 32,
    "num_generations": 8,
    "per_device_train_batch_size": 1,
    "log_prob_micro_batch_size_per_device": 1,
    "learning_rate": 1.0e-5,
    "warmup_steps": 10,
    "lr_schedule_per": "rollout_batch",
    "weight_decay": 0.01,
    "weight_decay_on": "all",
    "max_grad_norm": 1.0,
    "max_prompt_length": 2048,
    "max_completion_length": 8192,
    "temperature": 1.0,
    "steps": 50,
}
STUDY_POLICY = {
    "epsilon": 0.2,
    "epsilon_high": 0.28,
    "scale_rewards": "none",
    "vllm_importance_sampling_correction": True,
    "vllm_importance_sampling_mode": "token_truncate",
    "vllm_importance_sampling_clip_max": 2.0,
    "vllm_importance_sampling_clip_min": None,
}
STUDY_GRPO = {"loss_type": "grpo", "beta": 0.0, "updates_per_generation": 4, "delta": 3.0}
STUDY_SDPO = {
    "updates_per_generation": 1,
    "distillation_mode": "topk_logits",
    "distillation_topk": 100,
    "distillation_add_tail": True,
    "distillation_alpha": 0.5,
    "distillation_is_clip": 2.0,
    "max_reprompt_len": 10240,
    "reprompt_truncation": "right",
    "dont_reprompt_on_self_success": True,
    "include_environment_feedback": True,
    "environment_feedback_only_without_solution": True,
    "environment_feedback_on_success": True,
    "teacher_templates": "study",
    "success_reward_threshold": 0.5,
}


def test_paper_config_pins_the_studys_values() -> None:
    """Every "matches" row of docs/study-training.md that is a value, resolved as a stage sees
    it (the method's keys over the trainer's defaults, the training section with overrides)."""
    from cptlab.train.spec import resolve_stage

    teachers = {"sdpo_frozen": "frozen", "sdpo_ema5": "ema", "sdpo_frozen_cot": "frozen"}
    for method in PAPER["methods"]:
        settings = resolve_stage(PAPER, method, "math")
        assert {k: getattr(settings.training, k) for k in STUDY_TRAINING} == STUDY_TRAINING, method
        expected = {**STUDY_POLICY, **(STUDY_GRPO if settings.trainer == "grpo" else STUDY_SDPO)}
        assert {k: getattr(settings.params, k) for k in expected} == expected, method
        thinking = settings.training.chat_template_kwargs["enable_thinking"]
        assert thinking == (method == "sdpo_frozen_cot"), method  # docs: the CoT variant
        if settings.trainer == "sdpo":
            assert settings.params.teacher_model_kind == teachers[method], method
            removes = settings.params.remove_thinking_from_demonstration
            assert removes == (method != "sdpo_frozen_cot"), method
    assert resolve_stage(PAPER, "sdpo_ema5", "math").params.teacher_update_rate == 0.05
    assert resolve_stage(PAPER, "grpo", "code").steps == 20


def test_paper_config_makes_the_studys_updates_per_rollout_batch(monkeypatch, tmp_path) -> None:
    """GRPO: 32 prompts x 8 rollouts per rollout batch in 4 mini-batches of 8 prompts (verl's
    ppo_mini_batch_size), i.e. TRL generates 256 completions every 8 micro-steps of 4 x 8 GPUs
    and steps the optimizer every 2; 50 rollout batches are 200 updates. SDPO: one update."""
    from cptlab.train.spec import resolve_stage
    from cptlab.train.stage import trl_common_args

    monkeypatch.setenv("WORLD_SIZE", "8")
    grpo = trl_common_args(resolve_stage(PAPER, "grpo", "math"), 0, tmp_path)
    per_generation = grpo["per_device_train_batch_size"] * 8 * grpo["steps_per_generation"]
    assert per_generation == 32 * 8
    assert grpo["steps_per_generation"] // grpo["gradient_accumulation_steps"] == 4
    assert (grpo["max_steps"], grpo["logging_steps"], grpo["save_steps"]) == (200, 4, 40)
    sdpo = trl_common_args(resolve_stage(PAPER, "sdpo_frozen", "code"), 0, tmp_path)
    assert sdpo["steps_per_generation"] == sdpo["gradient_accumulation_steps"]
    assert sdpo["max_steps"] == 20


@pytest.mark.parametrize("key, value", [("tasks", 8), ("slurm_extra", "--gres=gpu:8")])
def test_resources_take_no_tasks_and_no_raw_sbatch_options(tmp_path, key, value) -> None:
    """Two of the plugin's GPU conventions that would go wrong: `tasks` on a GPU job becomes
    `--ntasks-per-gpu` (8 tasks on each of 8 GPUs: 64 processes where accelerate starts 8), and
    GPU flags in `slurm_extra` stop the submission. A config's resources take neither key."""
    from cptlab.errors import ConfigError
    from cptlab.validation import load_config

    def add_key(config):
        config["resources"]["train"][key] = value

    path = edited_config(ROOT / "config" / "paper.yaml", tmp_path / "paper.yaml", add_key)
    with pytest.raises(ConfigError, match=key):
        load_config(path)
