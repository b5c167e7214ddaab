"""A config's placeholders are named before the first job (cptlab.site): its data files, the hub
commits cptlab cannot pin, its base and its SLURM partitions, as far as the rest of the run still
needs them."""

from __future__ import annotations

import pytest
from workflow_helpers import ROOT, SMOKE, copy_workflow, edited_config, snakemake

from cptlab.layout import Layout
from cptlab.site import missing_paths, missing_revisions, site_problems, unknown_partitions
from cptlab.validation import load_config

PAPER = load_config(ROOT / "config" / "paper.yaml")
# paper.yaml's placeholders, as this machine (no /shared, no Qwen3-4B in the HF cache) sees them.
PLACEHOLDERS = [
    "data.options.toolalpaca_train.path: /shared/data/ToolAlpaca/data/train_data.json: "
    "no such file or folder",
    "data.options.toolalpaca_test.path: /shared/data/ToolAlpaca/data/eval_simulated.json: "
    "no such file or folder",
    "data.options.bfcl_multiple.path: /shared/data/gorilla/berkeley-function-call-leaderboard/"
    "bfcl_eval/data: no such file or folder",
    "base.path: Qwen/Qwen3-4B: not a folder and not in the local HF cache",
]
BASE = PLACEHOLDERS[-1]
# The hub datasets whose commit cptlab could not verify: the config must name one.
REVISIONS = [
    f"data.options.{name}.revision: no commit of {repo} is pinned in cptlab: set one "
    "(`cptlab fetch-data --config <file>` prints the commit main is at)"
    for name, repo in (("math500", "math-ai/math500"),
                       ("zebralogic", "allenai/ZebraLogicBench-private"))
]  # fmt: skip


@pytest.fixture(autouse=True)
def empty_hub_cache(tmp_path, monkeypatch):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))


def test_the_paper_configs_placeholders_are_named_key_by_key(tmp_path):
    assert missing_paths(PAPER, Layout.of(PAPER, tmp_path)) == PLACEHOLDERS


def test_a_prepared_data_set_no_longer_needs_its_source(tmp_path):
    layout = Layout.of(PAPER, tmp_path)
    layout.data_file("toolalpaca_train").parent.mkdir(parents=True)
    layout.data_file("toolalpaca_train").touch()
    assert missing_paths(PAPER, layout) == PLACEHOLDERS[1:]


def test_the_base_is_read_until_its_evaluations_and_every_first_stage_are_done(tmp_path):
    layout = Layout.of(PAPER, tmp_path)
    done = [layout.eval_file(b) for spec in PAPER["data"]["domains"].values() for b in
            spec.get("id", []) + spec.get("ood", [])]  # fmt: skip
    first = PAPER["run"]["sequence"][0]
    done += [layout.stage_manifest(m, 0, 1, first) for m in PAPER["run"]["methods"]]
    for path in done[:-1]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    assert BASE in missing_paths(PAPER, layout)
    done[-1].parent.mkdir(parents=True, exist_ok=True)
    done[-1].touch()
    assert BASE not in missing_paths(PAPER, layout)


def test_each_file_of_a_list_is_checked(tmp_path):
    present = tmp_path / "rows.jsonl"
    present.touch()
    options = {"toolalpaca_train": {"path": [str(present), str(tmp_path / "more.jsonl")]}}
    config = {**PAPER, "data": {**PAPER["data"], "options": options}}
    assert missing_paths(config, Layout.of(config, tmp_path)) == [
        f"data.options.toolalpaca_train.path: {tmp_path / 'more.jsonl'}: no such file or folder",
        BASE,
    ]


def test_a_base_in_a_local_folder_or_the_hub_cache_is_found(tmp_path, monkeypatch):
    folder = tmp_path / "qwen3"
    folder.mkdir()
    config = {**PAPER, "base": {**PAPER["base"], "path": str(folder)}}
    assert missing_paths(config, Layout.of(config, tmp_path)) == PLACEHOLDERS[:-1]
    snapshot = tmp_path / "hub" / "models--Qwen--Qwen3-4B" / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("0" * 40)
    assert missing_paths(PAPER, Layout.of(PAPER, tmp_path)) == PLACEHOLDERS[:-1]


def test_hub_commits_cptlab_cannot_pin_are_asked_for_until_prepared(tmp_path):
    layout = Layout.of(PAPER, tmp_path)
    assert missing_revisions(PAPER, layout) == REVISIONS
    options = {"math500": {"revision": "5" * 40}}
    config = {
        **PAPER,
        "data": {**PAPER["data"], "options": {**PAPER["data"]["options"], **options}},
    }
    assert missing_revisions(config, layout) == REVISIONS[1:]
    layout.data_file("zebralogic").parent.mkdir(parents=True)
    layout.data_file("zebralogic").touch()
    assert missing_revisions(config, layout) == []


def test_partitions_are_checked_against_the_clusters():
    assert unknown_partitions(PAPER, {"gpu", "debug"}) == []
    assert unknown_partitions(PAPER, {"a100", "debug"}) == [
        f"resources.{kind}.slurm_partition: 'gpu' is not a partition of this cluster (a100, debug)"
        for kind in ("train", "evaluate", "drift")
    ]


def test_partitions_only_on_slurm(tmp_path, monkeypatch):
    monkeypatch.setattr("cptlab.site.cluster_partitions", lambda: {"a100"})
    layout = Layout.of(PAPER, tmp_path)
    assert site_problems(PAPER, layout, slurm=False) == PLACEHOLDERS + REVISIONS
    assert len(site_problems(PAPER, layout, slurm=True)) == len(PLACEHOLDERS + REVISIONS) + 3


def test_a_run_stops_before_its_first_job_and_a_dry_run_warns(tmp_path):
    work = copy_workflow(tmp_path)

    def missing_base(config: dict) -> None:
        config["base"] = {"seed": 0, "path": "/nowhere/qwen3"}

    config = str(edited_config(work / SMOKE, work / "missing.yaml", missing_base))
    line = "base.path: /nowhere/qwen3: not a folder and not in the local HF cache"
    planned = snakemake(work, "-n", "--cores", "1", "--configfile", config)
    assert planned.returncode == 0, planned.stderr[-2000:]
    assert f"cptlab: warning: {line}" in planned.stderr.splitlines()
    done = snakemake(work, "--cores", "1", "--configfile", config)
    assert done.returncode != 0
    assert f"cptlab: error: {line}" in done.stderr.splitlines()
    assert not (work / "results").exists()  # not even the run's config.json
