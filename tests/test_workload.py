"""`cptlab plan-hours` (cptlab.workload): each job's estimated work against its runtime limit."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cptlab.cli import main
from cptlab.domains.prepare import prepare_benchmark
from cptlab.validation import load_config, validate_config
from cptlab.workload import UNKNOWN_ROWS, estimates, report


def tiny_config(**evaluate) -> dict:
    """The embedded config cut to one stage of one method and one evaluated benchmark, with
    round numbers to compute by hand."""
    config = yaml.safe_load(open("config/config.yaml"))
    config["experiment"] = "tiny"
    config["data"].pop("sizes")
    for key in ("domain_weights", "domain_reprompt_share"):  # they name the other domains
        config["base"]["warmup"].pop(key)
    config["data"]["domains"] = {"math": {"train": "math_train", "id": ["math_id"]}}
    config["run"] = {"sequence": ["math"], "methods": ["grpo"], "seeds": [0]}
    config["evaluation"].update(samples=4, temperature=1.0, max_new_tokens=100)
    config["training"].update(
        steps=2, prompts_per_step=4, num_generations=2, max_completion_length=100,
        max_prompt_length=64, domain_steps={},
    )  # fmt: skip
    config["resources"]["evaluate"] = {
        "gpu": 1, "runtime": 10, "decode_tokens_per_s": 50, "expected_length_fraction": 0.5,
        **evaluate,
    }  # fmt: skip
    config["resources"]["train"] = {
        "gpu": 0, "runtime": 60, "decode_tokens_per_s": 10, "train_tokens_per_s": 20,
        "expected_length_fraction": 0.5, "expected_prompt_tokens": 30,
    }  # fmt: skip
    return validate_config(config, "tiny")


@pytest.fixture
def data_dir(tmp_path):
    """results/tiny/data with math_id prepared as the data rule writes it: 30 rows."""
    folder = tmp_path / "tiny" / "data"
    folder.mkdir(parents=True)
    config = tiny_config()
    config["data"]["sizes"] = {"id": 30}
    assert prepare_benchmark(config, "math_id", folder / "math_id.jsonl") == 30
    return folder


def by_kind(config, data_dir):
    kinds, details = estimates(config, data_dir)
    return {k.kind: k for k in kinds}, details


def test_evaluation_arithmetic_from_the_prepared_rows(data_dir):
    kinds, details = by_kind(tiny_config(), data_dir)
    ev = kinds["evaluate"]
    # 30 rows x 4 samples x (100 x 0.5) new tokens = 6,000 tokens at 50/s: 120 s = 1/30 h
    assert ev.jobs == 2  # the base and the one stage
    assert ev.work_per_job == 6000 and ev.work_total == 12000
    assert ev.hours_per_job == pytest.approx(120 / 3600)
    assert ev.gpu_hours == pytest.approx(2 * 1 * 120 / 3600)
    assert ev.fits and not ev.unknown
    assert any(line.startswith("  math_id: 30 rows (prepared") for line in details)


def test_training_arithmetic():
    kinds, _ = by_kind(tiny_config(), Path("/nonexistent"))
    train = kinds["train"]
    # 2 steps x 4 prompts x 2 generations = 16 rollouts of 30 + 50 tokens: 800 decoded at 10/s
    # (80 s) and 1,280 trained at 20/s (64 s), on one CPU job
    assert train.jobs == 1
    assert train.work_per_job == 800 + 1280
    assert train.hours_per_job == pytest.approx(144 / 3600)
    assert train.gpu_hours == 0  # gpu 0
    assert "build_base" in kinds  # the embedded config builds its base


def test_a_limit_exceeded_is_flagged(data_dir):
    config = tiny_config(runtime=1)  # 2 minutes of work against a 1-minute limit
    kinds, _ = by_kind(config, data_dir)
    assert kinds["evaluate"].over_limit == 2 and not kinds["evaluate"].fits
    lines, fits = report(config, data_dir, "tiny")
    assert not fits
    row = next(line for line in lines if line.startswith("evaluate "))
    assert "FLAG: 2 of 2 jobs over the limit" in row
    assert "FLAG" not in next(line for line in lines if line.startswith("train "))


def test_without_prepared_data_or_a_cap_the_rows_are_unknown(tmp_path):
    config = tiny_config()
    kinds, details = by_kind(config, tmp_path / "nothing")
    ev = kinds["evaluate"]
    assert ev.unknown == 1 and ev.work_total == 0
    assert f"  math_id: {UNKNOWN_ROWS}; left out of the sum" in details
    lines, _ = report(config, tmp_path / "nothing", "tiny")
    assert "unknown (rows missing)" in next(line for line in lines if line.startswith("evaluate "))


def test_a_config_cap_bounds_the_rows(tmp_path):
    config = tiny_config()
    config["data"]["sizes"] = {"id": 7}
    kinds, details = by_kind(config, tmp_path / "nothing")
    assert kinds["evaluate"].work_per_job == 7 * 4 * 50
    assert any("math_id: 7 rows (at most, the config's cap" in line for line in details)


def table_row(out: str, kind: str) -> list[str]:
    return next(line for line in out.splitlines() if line.startswith(kind + " ")).split()


def test_shards_split_a_benchmark_into_jobs(data_dir):
    # math_id's 30 rows in 4 shards: jobs of at most 8 rows (ceil), none shared by the others
    config = tiny_config()
    config["evaluation"]["shards"] = {"math_id": 4}
    kinds, details = by_kind(validate_config(config, "tiny"), data_dir)
    ev = kinds["evaluate"]
    assert ev.jobs == 2 * 4  # the base and the stage, 4 shard jobs each (no shared job left)
    assert ev.work_per_job == 8 * 4 * 50
    assert any(
        "math_id: 30 rows" in line and "4 shard jobs, each <= 8 rows" in line for line in details
    )


def prepared(folder: Path, sizes: dict[str, int]) -> None:
    """Prepared data files of the given row counts (plan-hours counts their lines)."""
    folder.mkdir(parents=True)
    for name, rows in sizes.items():
        (folder / f"{name}.jsonl").write_text("{}\n" * rows)


# The paper's benchmarks at their sizes: the published test sets (AIME 2024 + 2025, MATH-500,
# GPQA-Diamond, BFCL v4 "multiple", ZebraLogic grid mode, MMLU-Redux 2.0 before its error-type
# filter), the study's SciKnowEval chemistry test split and ToolAlpaca test set
# (../shared/study-data), and for LiveCodeBench's window and Dolci's held-out part, whose sizes
# are known only once prepared, the sizes paper.yaml's shards are planned for.
PAPER_SIZES = {
    "aime": 60, "math500": 500, "sciknoweval_test": 210, "gpqa_diamond": 198,
    "toolalpaca_test": 68, "bfcl_multiple": 200, "dolci_code_test": 4000,
    "livecodebench": 1500, "zebralogic": 1000, "mmlu_redux": 5700,
}  # fmt: skip


def test_every_paper_evaluation_job_fits_its_limit_at_the_planned_sizes(tmp_path):
    prepared(tmp_path / "data", PAPER_SIZES)
    config = load_config("config/paper.yaml")
    kinds, _ = by_kind(config, tmp_path / "data")
    ev = kinds["evaluate"]
    assert not ev.unknown and ev.fits, f"{ev.over_limit} of {ev.jobs} jobs over the limit"
    # 20 jobs per checkpoint: the shared one and 2 + 2 + 8 + 2 + 5 shards; the largest job
    # (a fifth of Dolci's 4,000 rows x 16 samples x 2,048 tokens at 2,500/s) within 240 min
    assert ev.jobs == 17 * 20
    assert ev.hours_per_job == pytest.approx(800 * 16 * 2048 / 2500 / 3600)
    assert ev.hours_per_job * 60 < 240


def test_unsplit_the_paper_evaluation_does_not_fit(tmp_path):
    # MMLU-Redux's 5,700 rows x 16 samples x 2,048 tokens at 2,500/s in one job: 20.8 h > 4 h
    prepared(tmp_path / "data", PAPER_SIZES)
    config = load_config("config/paper.yaml", {"evaluation": {"shards": {}}})
    kinds, _ = by_kind(config, tmp_path / "data")
    total_rows = sum(PAPER_SIZES.values())
    assert kinds["evaluate"].jobs == 17
    assert kinds["evaluate"].hours_per_job == pytest.approx(total_rows * 16 * 2048 / 2500 / 3600)
    assert kinds["evaluate"].over_limit == 17


def test_the_command_on_the_paper_config(tmp_path, capsys):
    code = main(["plan-hours", "--config", "config/paper.yaml", "--results-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0
    # 4 methods x 1 seed x 4 stages; 20 evaluation jobs per checkpoint (the base and 16 stages)
    assert table_row(out, "train")[1] == "16"
    assert table_row(out, "evaluate")[1] == str(17 * 20)
    assert table_row(out, "drift-chain")[1] == "4"
    assert "build_base" not in out  # the paper config reads Qwen3-4B
    # No prepared data: every benchmark's published count (docs/data.md), none unknown.
    assert out.count(UNKNOWN_ROWS) == 0
    assert "  gpqa_diamond: 198 rows (published (GPQA-Diamond (Rein et al. 2023)" in out
    assert "  mmlu_redux: 5330 rows (published (MMLU-Redux 2.0's 5,330 rows" in out
    assert "  livecodebench: 175 rows (at most, a published bound" in out
    assert float(table_row(out, "evaluate")[6]) > 1000  # GPU-h, no longer 0.0
    assert "resources.evaluate.decode_tokens_per_s: 2500" in out
    assert "assumptions:" in out


def test_within_stage_arithmetic(data_dir):
    """Stage steps 4, a save every step, a checkpoint every 2: step 2 (4 is the stage's end),
    on 10 of the 30 rows: 10 x 4 samples x 50 new tokens = 2,000 tokens, a sixth of the two
    stage ends' 12,000."""
    config = tiny_config()
    config["training"].update(steps=4, save_steps=1)
    config["evaluation"]["within_stage"] = {"every": 2, "rows": 10}
    kinds, details = by_kind(validate_config(config, "tiny"), data_dir)
    within = kinds["evaluate-within"]
    assert within.jobs == 1 and within.work_per_job == 2000
    assert within.gpu_hours == pytest.approx(2000 / 50 / 3600)
    assert within.gpu_hours / kinds["evaluate"].gpu_hours == pytest.approx(1 / 6)
    assert any("16.7 % of the stage ends' evaluation" in line for line in details)
    config["evaluation"].pop("within_stage")
    assert "evaluate-within" not in by_kind(validate_config(config, "tiny"), data_dir)[0]


def test_the_paper_configs_within_stage_evaluation_costs_at_most_15_percent(tmp_path):
    """paper.yaml evaluates the study's checkpoints every 10 steps (4 + 4 + 4 + 1 a chain, 52 in
    all) on 50 rows of each benchmark: within 15 % of the stage ends' GPU-hours."""
    prepared(tmp_path / "data", PAPER_SIZES)
    kinds, _ = by_kind(load_config("config/paper.yaml"), tmp_path / "data")
    within, ends = kinds["evaluate-within"], kinds["evaluate"]
    assert within.jobs == 52 and within.fits
    assert within.work_per_job == 10 * 50 * 16 * 2048
    assert within.gpu_hours <= 0.15 * ends.gpu_hours
