"""What `make rehearsal` must have produced (it runs this file after the workflow): every stage of
config/rehearsal.yaml trained on colocated vLLM rollouts under ZeRO-2 in 2 processes, every
checkpoint evaluated on every benchmark by the vLLM backend at avg@k, and the report written.
A stage that fell back to HF generation, or an evaluation by another backend, fails here. Each
job's measured memory is the memory model's (cptlab.memory, `cptlab plan-memory`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cptlab.layout import Layout
from cptlab.memory import evaluation_memory, measured_shape, step_shape, training_memory
from cptlab.model_sizes import Architecture
from cptlab.plan import Plan, eval_benchmarks
from cptlab.resources import rule_resources
from cptlab.train.spec import resolve_stage
from cptlab.validation import load_config

pytestmark = pytest.mark.rehearsal

ROOT = Path(__file__).resolve().parents[1]
CONFIG = load_config(ROOT / "config" / "rehearsal.yaml")
PLAN = Plan.from_config(CONFIG)
LAYOUT = Layout.of(CONFIG, ROOT / "results")
STAGES = [
    (method, seed, stage, domain)
    for method in PLAN.methods
    for seed in PLAN.seeds
    for stage, domain in enumerate(PLAN.sequence, start=1)
]
CHECKPOINTS = [(None, None, 0)] + [(m, s, k) for m, s, k, _ in STAGES]


@pytest.mark.parametrize("method, seed, stage, domain", STAGES)
def test_each_stage_trained_on_colocated_vllm_rollouts_under_zero2(method, seed, stage, domain):
    manifest = json.loads(LAYOUT.stage_manifest(method, seed, stage, domain).read_text())
    training = manifest["settings"]["training"]
    assert training["use_vllm"] and training["vllm_mode"] == "colocate"
    assert manifest["distributed"] == {"type": "DEEPSPEED", "zero_stage": 2}
    assert manifest["world_size"] == 2
    assert manifest["steps_done"] == manifest["steps"] > 0
    # TRL logs the rollout importance ratio only for rollouts that vLLM sampled.
    assert "sampling/importance_sampling_ratio/mean" in manifest["final"]


@pytest.mark.parametrize("method, seed, stage", CHECKPOINTS)
def test_each_checkpoint_is_scored_on_every_benchmark_by_vllm(method, seed, stage):
    for benchmark in eval_benchmarks(CONFIG):
        record = json.loads(LAYOUT.eval_file(benchmark.name, method, seed, stage).read_text())
        assert record["backend"] == "vllm", benchmark.name
        assert record["samples"] == CONFIG["evaluation"]["samples"] >= 2, benchmark.name


def test_the_report_is_written():
    assert len(STAGES) == 16 and len(CHECKPOINTS) == 17
    assert LAYOUT.report.stat().st_size > 0


@pytest.mark.parametrize("kind", ["train", "evaluate", "drift"])
def test_each_jobs_peak_memory_is_within_its_request(kind):
    """Snakemake's benchmark file of each job: its peak resident memory (the job's processes
    summed) against `resources.<kind>.mem_mb`, what the SLURM profile asks for."""
    limit = rule_resources(CONFIG, kind)["mem_mb"]
    peaks = {
        str(path.relative_to(LAYOUT.root)): float(path.read_text().splitlines()[-1].split()[2])
        for path in (LAYOUT.root / "benchmarks" / kind).rglob("*.tsv")
    }
    assert peaks, f"no benchmark files of {kind} jobs"
    over = {job: mb for job, mb in peaks.items() if mb > limit}
    assert not over, f"{kind} jobs over mem_mb={limit}: {over}"


@pytest.mark.parametrize("method, seed, stage, domain", STAGES)
def test_each_stage_hands_on_its_fp32_master_weights(method, seed, stage, domain):
    """paper.yaml's `training.handoff_precision: float32` under ZeRO-2 in bf16: every stage's
    weights are its fp32 masters, which hold what the bf16 copy rounds away."""
    from safetensors.torch import load_file

    from cptlab.train.handoff import stored_in_fp32

    manifest = json.loads(LAYOUT.stage_manifest(method, seed, stage, domain).read_text())
    assert manifest["settings"]["training"]["handoff_precision"] == "float32"
    folder = LAYOUT.stage_dir(method, seed, stage, domain)
    assert stored_in_fp32(folder)
    weights = load_file(folder / "model.safetensors")
    off_bf16 = sum((w != w.bfloat16().float()).sum().item() for w in weights.values())
    assert off_bf16 > 0.5 * sum(w.numel() for w in weights.values())


@pytest.mark.parametrize("method, seed, stage, domain", STAGES)
def test_each_stage_scored_at_the_papers_worker_count_with_nothing_unscorable(
    method, seed, stage, domain
):
    manifest = json.loads(LAYOUT.stage_manifest(method, seed, stage, domain).read_text())
    assert manifest["settings"]["training"]["reward_workers"] == 8
    log = LAYOUT.stage_dir(method, seed, stage, domain) / "train_log.jsonl"
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert lines and all(line["verifier/unscorable_fraction"] == 0.0 for line in lines)


def test_math_rewards_in_this_environment_are_the_same_at_the_papers_worker_count():
    """The rehearsal's untrained model earns no math reward, so its rows are scored here with
    equivalent forms of their answers (an integer as N.0, a fraction as a/b), at 1 worker and
    at paper.yaml's count, with the rehearsal's reward set."""
    import re

    from cptlab.domains.registry import get_benchmark
    from cptlab.rows import read_jsonl
    from cptlab.train.rewards import VerifierReward

    workers = CONFIG["training"]["reward_workers"]
    rows, texts = [], []
    for benchmark in ("dapo_math", "aime", "math500"):
        verifier = get_benchmark(benchmark).verifier_for(CONFIG["data"]["rewards"])
        for row in read_jsonl(LAYOUT.data_file(benchmark)):
            answer = row["answer"].strip()
            fraction = re.fullmatch(r"\\d?frac\{(\d+)\}\{(\d+)\}", answer)
            form = f"{answer}.0" if answer.isdigit() else fraction and "/".join(fraction.groups())
            if form:
                rows.append({**row, "metadata": {**row["metadata"], "verifier": verifier}})
                texts.append([{"role": "assistant", "content": f"So \\boxed{{{form}}}"}])
    assert len(rows) >= 6
    rewards = [
        VerifierReward(rows, workers=n)(None, texts, list(range(len(rows)))) for n in (1, workers)
    ]
    assert rewards[0] == rewards[1] and sum(rewards[0]) >= 0.8 * len(rows)


# The memory model against each job's measurement (docs/rehearsal.md, "Each job's memory"). A
# training process records the most torch bytes it holds after an optimizer step, its peak, and
# the sizes of its largest forwards (cptlab.train.peak_memory: on the CPU a count of every
# storage torch creates, vLLM's engine left out). The model, evaluated at those sizes without
# vLLM's and CUDA's terms, must match both within the tolerances below, which leave room over
# the single stages of docs/notebook/memory.md (0.92-1.04): the held bytes are the model's
# arithmetic on the parameters (weights, ZeRO-2's fp32 master and Adam shards, the teacher) plus
# a few kB of bookkeeping; the peak adds the largest moment of a step, which on these sizes is
# the fused LM head's CPU fallback (GRPO's update, SDPO's rollout weights). At the config's
# sizes (every prompt and completion at its limit) the model must bound the measurement from
# above: an underestimate is the failure that matters on a GPU. Evaluations: vLLM's CPU build
# sizes the process to gpu_memory_utilization x its memory node (the KV cache is the rest), so
# the process's peak resident memory is that share, plus what generation and scoring add.
STATE_TOLERANCE = 0.10  # |measured / predicted - 1|
PEAK_RANGE = (0.8, 1.25)  # measured / predicted
EVAL_PEAK_RANGE = (0.95, 1.25)


@pytest.fixture(scope="module")
def arch() -> Architecture:
    """The rehearsal base's architecture (read when the module's tests run: `make test` collects
    this module without the base)."""
    return Architecture.from_config(
        json.loads((ROOT / CONFIG["base"]["path"] / "config.json").read_text())
    )


@pytest.mark.parametrize("method, seed, stage, domain", STAGES)
def test_each_stages_measured_memory_is_the_models(method, seed, stage, domain, arch):
    manifest = json.loads(LAYOUT.stage_manifest(method, seed, stage, domain).read_text())
    settings = resolve_stage(CONFIG, method, domain)
    world = manifest["world_size"]
    at_limits = training_memory(settings, arch, world, step_shape(settings, world), None, False)
    for rank, measured in enumerate(manifest["memory"]):
        assert measured["device"] == "cpu"
        shape = measured_shape(settings, measured["forwards"])
        job = training_memory(settings, arch, world, shape, None, on_gpu=False)
        resident = sum(t.bytes for t in job.resident)
        where = f"rank {rank}: measured {measured}, predicted resident {resident:.0f}"
        assert abs(measured["state_bytes"] / resident - 1) <= STATE_TOLERANCE, where
        ratio = measured["peak_bytes"] / job.peak
        assert PEAK_RANGE[0] <= ratio <= PEAK_RANGE[1], (
            f"{where}, peak {job.peak:.0f} at {job.peak_moment.name!r}: {ratio:.2f}"
        )
        assert measured["peak_bytes"] <= at_limits.peak, where


@pytest.mark.parametrize("method, seed, stage", CHECKPOINTS)
def test_each_evaluations_peak_is_vllms_share_of_the_machine(method, seed, stage, arch):
    records = [
        json.loads(LAYOUT.eval_file(benchmark.name, method, seed, stage).read_text())
        for benchmark in eval_benchmarks(CONFIG)
    ]
    memory = max((r["memory"] for r in records), key=lambda m: m["peak_rss_bytes"])
    job = evaluation_memory(CONFIG, arch, memory["memory_node_total_bytes"], on_gpu=False)
    ratio = memory["peak_rss_bytes"] / job.peak
    assert EVAL_PEAK_RANGE[0] <= ratio <= EVAL_PEAK_RANGE[1], (memory, job.peak, ratio)


EMA_STAGES = [s for s in STAGES if s[0] == "sdpo_ema5"]


@pytest.mark.parametrize("method, seed, stage, domain", EMA_STAGES)
def test_the_ema_teacher_moved_as_a_float32_ema(method, seed, stage, domain):
    """SDPO_5%'s teacher after the stage (its float32 weights in the last trainer checkpoint)
    against a float32 EMA of the same student. Over n updates at rate r from the anchor t0,
    towards a student whose bf16 weights (what the update reads) stay within rounding of s:
    t_n - t0 = (1 - (1 - r)^n) (s - t0). At the rehearsal's learning rate the student's bf16
    weights differ from the float32 anchor mostly by their rounding, so s is the stage's end in
    bf16 and the ratio of the movements is 1 - (1 - r)^n. TRL's in-place bf16 update moves no
    weight here (each increment is under half a bf16 step): a ratio of 0."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoConfig, AutoModelForCausalLM

    manifest = json.loads(LAYOUT.stage_manifest(method, seed, stage, domain).read_text())
    rate = manifest["settings"]["params"]["teacher_update_rate"]
    updates = manifest["optimizer_steps_done"]
    state = LAYOUT.state_dir(method, seed, stage, domain)
    last = max(state.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    teacher = torch.load(last / "sdpo_teacher.pt", weights_only=True)
    out = LAYOUT.stage_dir(method, seed, stage, domain)
    with torch.device("meta"):
        names = [n for n, _ in AutoModelForCausalLM.from_config(
            AutoConfig.from_pretrained(out)).named_parameters()]  # fmt: skip
    anchor = load_file(ROOT / manifest["teacher"] / "model.safetensors")
    end = load_file(out / "model.safetensors")

    def norm(tensors) -> float:
        return sum(t.double().norm() ** 2 for t in tensors).item() ** 0.5

    moved = norm(t - anchor[n].float() for n, t in zip(names, teacher, strict=True))
    student = norm(end[n].bfloat16().float() - anchor[n].float() for n in names)
    assert all(t.dtype == torch.float32 for t in teacher)
    assert moved / student == pytest.approx(1 - (1 - rate) ** updates, rel=0.05)
