"""The results layout (cptlab.layout) and the experiment's shape (cptlab.plan)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cptlab.errors import ConfigError
from cptlab.layout import Layout
from cptlab.plan import Plan, base_measure_benchmarks, builds_base, datasets, eval_benchmarks


def embedded() -> dict:
    return yaml.safe_load(open("config/config.yaml"))


def test_paths_of_one_experiment():
    layout = Layout.of(embedded())
    assert layout.root == Path("results/embedded")
    assert (
        layout.stage_dir("grpo", 0, 2, "science") == layout.root / "runs/grpo/seed0/stage2_science"
    )
    assert layout.eval_file("math_id") == layout.root / "eval/base/math_id.json"
    assert layout.eval_file("math_id", "grpo", 1, 0) == layout.eval_file("math_id")  # the base
    assert layout.responses_file("math_id", "grpo", 1, 3) == (
        layout.root / "eval/grpo/seed1/stage3/math_id.responses.jsonl"
    )
    assert layout.provenance_file("train/grpo/seed0/stage1_math") == (
        layout.root / "provenance/train/grpo/seed0/stage1_math.json"
    )


def test_paths_take_snakemake_wildcards():
    layout = Layout(Path("results/x"))
    pattern = layout.stage_manifest("{method}", "{seed}", "{stage}", "{domain}")
    assert str(pattern) == "results/x/runs/{method}/seed{seed}/stage{stage}_{domain}/manifest.json"
    assert str(layout.eval_file("{benchmark}", "{method}", "{seed}", "{stage}")) == (
        "results/x/eval/{method}/seed{seed}/stage{stage}/{benchmark}.json"
    )


def test_the_root_is_found_inside_a_prefixed_path():
    layout = Layout(Path("results/x"))
    path = Path(".snakemake/storage/fs/results/x/eval/base/math_id.json")
    assert layout.root_in(path) == Path(".snakemake/storage/fs/results/x")
    with pytest.raises(ValueError, match="not inside results/x"):
        layout.root_in(Path("results/y/scores.csv"))


def test_data_sets_in_config_order_each_once():
    config = embedded()
    config["data"]["domains"]["logic"]["ood"].append("math_id")  # named a second time
    named = datasets(config)
    assert [d.name for d in named][:3] == ["math_train", "math_id", "math_ood"]
    assert [d.name for d in named].count("math_id") == 1
    assert {d.name: (d.domain, d.split) for d in named}["math_id"] == ("math", "id")
    assert [b.name for b in eval_benchmarks(config)] == [
        d.name for d in named if d.split in ("id", "ood")
    ]
    assert base_measure_benchmarks(config) == [
        "math_id", "science_id", "tool_id", "code_id", "logic_ood", "knowledge_ood",
    ]  # fmt: skip


def test_plan_chains_and_stages():
    config = embedded()
    config["run"]["seeds"] = [0, 1]
    plan = Plan.from_config(config)
    assert plan.stages == [0, 1, 2, 3, 4] and plan.stage_domain(0) == "base"
    assert plan.chains[:2] == [("grpo", 0), ("grpo", 1)] and len(plan.chains) == 6
    assert plan.trained_stages[1] == ("grpo", 0, 2, "science") and len(plan.trained_stages) == 24
    assert plan.anchor is None and builds_base(config)
    config["run"]["sequence"] = ["physics"]
    with pytest.raises(ConfigError, match="physics"):
        Plan.from_config(config)
