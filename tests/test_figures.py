"""`cptlab figures` on a small aggregated experiment: every file, PNG and PDF, manifest last."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest
from conftest import run_command
from tiny_world import write_benchmark_rows, write_item_files

from cptlab.layout import Layout
from cptlab.plan import Plan
from cptlab.results import figures
from cptlab.results.aggregate import aggregate

os.environ.setdefault("MPLBACKEND", "Agg")

DOMAINS = {
    "math": {"train": "math_train", "id": ["math_id"], "ood": ["math_ood"]},
    "tool": {"train": "tool_train", "id": ["tool_id"], "ood": ["tool_ood"]},
    "logic": {"ood": ["logic_ood"]},
    "copying": {},
}
METHODS = ["grpo", "sdpo_frozen"]
SEQUENCE = ["math", "tool"]


@pytest.fixture
def experiment(tmp_path):
    config = {
        "experiment": "t",
        "data": {"seed": 0, "domains": DOMAINS},
        "base": {"seed": 0},
        "methods": {"grpo": {"trainer": "grpo"}, "sdpo_frozen": {"trainer": "sdpo"}},
        "run": {"sequence": SEQUENCE, "methods": METHODS, "seeds": [0, 1]},
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    rng = random.Random(0)
    names = ["math_id", "math_ood", "tool_id", "tool_ood", "logic_ood"]
    runs = [("base", None, 0)] + [(m, s, k) for m in METHODS for s in (0, 1) for k in (1, 2)]
    for method, seed, stage in runs:
        folder = tmp_path / "eval" / method
        if stage:
            folder = folder / f"seed{seed}" / f"stage{stage}"
        folder.mkdir(parents=True, exist_ok=True)
        for name in names:
            acc = 0.0 if (name == "logic_ood" and stage == 0) else rng.uniform(0.1, 0.9)
            record = {"benchmark": name, "accuracy": acc, "n": 20}
            record |= {"ci_low": max(0.0, acc - 0.1), "ci_high": min(1.0, acc + 0.1)}
            record |= {"samples": 1, "backend": "hf"}
            (folder / f"{name}.json").write_text(json.dumps(record))
            write_item_files(folder / f"{name}.json", acc)
    for name in names:
        write_benchmark_rows(tmp_path / "data", name, name.split("_")[0])
    aggregate(config, Layout(tmp_path))
    # train logs of grpo seed 0 only; the other runs' logs are missing
    for k, domain in enumerate(SEQUENCE, start=1):
        log = Layout(tmp_path).train_log("grpo", 0, k, domain)
        log.parent.mkdir(parents=True)
        lines = [
            {
                "step": s,
                "reward": s / 10,
                "distillation_loss": 1 / s,
                "collapse/top_ngram_share": 0.1,
            }
            for s in range(1, 6)
        ]
        lines[2].pop("distillation_loss")  # a missing key is tolerated
        log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return tmp_path


def make(experiment: Path, *extra: str) -> Path:
    config = experiment / "config.json"
    run_command(["figures", "--config", str(config), "--results-dir", str(experiment), *extra])
    return Layout(experiment).figures_dir


def test_every_figure_then_the_manifest(experiment, monkeypatch):
    present_at_manifest = {}
    write_manifest = figures.write_manifest

    def spy(folder, info):
        present_at_manifest.update({name: (Path(folder) / name).exists() for name in info["files"]})
        return write_manifest(folder, info)

    monkeypatch.setattr(figures, "write_manifest", spy)
    out = make(experiment)
    stems = [f"cl_trajectory_{m}" for m in METHODS] + ["item_transitions"]
    stems += [f"cl_curves_{m}" for m in METHODS] + ["ood_final"]
    stems += [f"accuracy_matrix_{m}" for m in METHODS] + ["training_curves"]
    expected = {f"{stem}.{fmt}" for stem in stems for fmt in ("png", "pdf")}
    manifest = json.loads((out / "manifest.json").read_text())
    assert set(manifest["files"]) == expected
    assert {p.name for p in out.iterdir()} == expected | {"manifest.json"}
    assert present_at_manifest == dict.fromkeys(expected, True)  # manifest written last
    for name in expected:
        head = (out / name).read_bytes()[:8]
        assert head.startswith(b"\x89PNG" if name.endswith(".png") else b"%PDF"), name
    training = manifest["training_curves"]
    assert training["plotted"] == ["reward", "distillation_loss", "collapse/top_ngram_share"]
    assert len(training["missing_logs"]) == 3 * len(SEQUENCE)  # all but grpo seed 0


def test_training_series_concatenates_stages(experiment):
    plan = Plan.from_config(json.loads((experiment / "config.json").read_text()))
    series, missing, bounds = figures.training_series(
        Layout(experiment), plan, {"loss": ("distillation_loss",)}
    )
    xs, ys = series[("grpo", 0)]["loss"]
    assert xs == [1, 2, 4, 5, 6, 7, 9, 10]  # step 3 of each stage lacks the key
    assert ys[:2] == [1.0, 0.5]
    assert bounds == [(0, "math"), (5, "tool")]


def test_chosen_train_metrics(experiment):
    out = make(experiment, "--train-metrics", "reward,not_logged")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["training_curves"]["plotted"] == ["reward"]
