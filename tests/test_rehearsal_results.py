"""What `make rehearsal` must have produced (it runs this file after the workflow): every stage of
config/rehearsal.yaml trained on colocated vLLM rollouts under ZeRO-2 in 2 processes, every
checkpoint evaluated on every benchmark by the vLLM backend at avg@k, and the report written.
A stage that fell back to HF generation, or an evaluation by another backend, fails here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cptlab.layout import Layout
from cptlab.plan import Plan, eval_benchmarks
from cptlab.resources import rule_resources
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
