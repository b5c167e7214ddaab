"""`cptlab watch`'s reading of a running workflow (cptlab.progress), on a constructed run."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

from cptlab.layout import Layout
from cptlab.progress import snapshot
from cptlab.validation import load_config


def mark_running(workdir: Path, *outputs: Path) -> None:
    """What Snakemake writes for the outputs of a running job."""
    folder = workdir / ".snakemake" / "incomplete"
    folder.mkdir(parents=True, exist_ok=True)
    for output in outputs:
        (folder / base64.b64encode(str(output).encode()).decode()).touch()


def smoke_results(tmp_path) -> tuple[Layout, Layout]:
    """The smoke config's layout (as paths relative to the workdir, which Snakemake's markers
    name) and the same results folder under `tmp_path`, holding the effective config."""
    config = load_config("config/smoke.yaml")  # 2 steps per stage; 3 benchmarks; 4 SFT steps
    layout = Layout.of(config)
    root = Layout(tmp_path / layout.root)
    root.root.mkdir(parents=True)
    root.config_file.write_text(json.dumps(config))
    return layout, root


def test_the_running_jobs_and_how_far_they_are(tmp_path):
    layout, root = smoke_results(tmp_path)
    # a training stage one step in
    log = root.state_dir("grpo", 0, 2, "science") / "train_log.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text(
        json.dumps({"step": 1, "step_seconds": 2.0, "verifier/reward_mean": 0.25}) + "\n"
    )
    # the base's evaluation, one benchmark of three written
    root.eval_file("math_id").parent.mkdir(parents=True)
    root.eval_file("math_id").write_text("{}")
    # the base build, in its warm-up
    root.log_file("base").parent.mkdir(parents=True)
    root.log_file("base").write_text("INFO warm-up {'step': 3, 'loss': 1.2, 'seconds': 6.0}\n")
    mark_running(
        tmp_path,
        layout.stage_manifest("grpo", 0, 2, "science"),
        layout.eval_file("science_id"),
        layout.responses_file("science_id"),
        layout.base_manifest,
        layout.drift_chain_manifest("grpo", 0),
    )
    now = max(p.stat().st_mtime for p in (log, root.log_file("base"))) + 1
    lines = sorted(p.line(now) for p in snapshot(tmp_path, layout, now))
    assert lines == sorted([
        "train grpo seed0 stage 2 science: 1/2, reward 0.25, 2.0 s/step, ETA 2s",
        "evaluate base: 1/3, benchmarks",
        "build base: 3/4, warm-up steps, ETA 2s",
        "drift grpo seed0: running",
    ])  # fmt: skip


def test_a_job_without_news_is_reported_stalled(tmp_path):
    layout, root = smoke_results(tmp_path)
    log = root.state_dir("grpo", 0, 1, "math") / "train_log.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text("")
    os.utime(log, (1e9, 1e9))
    mark_running(tmp_path, layout.stage_manifest("grpo", 0, 1, "math"))
    (line,) = [p.line(1e9 + 600) for p in snapshot(tmp_path, layout, 1e9 + 600)]
    assert line == "train grpo seed0 stage 1 math: 0/2 -- STALLED? nothing new for 10m00s"


def test_no_run_no_report(tmp_path):
    assert snapshot(tmp_path, Layout(Path("results/none"))) == []


def test_an_evaluation_shard_is_named_by_its_checkpoint_and_part(tmp_path):
    layout, _root = smoke_results(tmp_path)
    mark_running(
        tmp_path,
        *layout.shard_files("math_id", 2, 3, "grpo", 0, 1),
        *layout.shard_files("logic_ood", 1, 2),
    )
    lines = sorted(p.line(0) for p in snapshot(tmp_path, layout, 0))
    assert lines == [
        "evaluate base logic_ood.1of2: running",
        "evaluate grpo seed0 stage1 math_id.2of3: running",
    ]


def test_a_within_stage_evaluation_is_named_by_its_step(tmp_path):
    layout, root = smoke_results(tmp_path)
    done = root.eval_file("math_id", "grpo", 0, 2, 1)
    done.parent.mkdir(parents=True)
    done.write_text("{}")
    mark_running(tmp_path, layout.eval_file("science_id", "grpo", 0, 2, 1))
    (line,) = [p.line(done.stat().st_mtime) for p in snapshot(tmp_path, layout)]
    assert line == "evaluate grpo seed0 stage 2 step 1: 1/3, benchmarks"
