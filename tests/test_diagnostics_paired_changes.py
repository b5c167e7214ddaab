"""diagnostics/paired_changes.py: the README's embedded changes with paired item intervals."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).parents[1] / "diagnostics" / "paired_changes.py"
spec = importlib.util.spec_from_file_location("paired_changes", SCRIPT)
paired_changes = importlib.util.module_from_spec(spec)
spec.loader.exec_module(paired_changes)


def write_eval(experiment: Path, folder: str, benchmark: str, rewards: list[float]) -> None:
    path = experiment / "eval" / folder / f"{benchmark}.responses.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "".join(
            json.dumps({"id": f"{benchmark}-{i}", "completions": ["x"], "rewards": [r]}) + "\n"
            for i, r in enumerate(rewards)
        )
    )


@pytest.fixture
def experiment(tmp_path: Path) -> Path:
    config = {
        "run": {"sequence": ["a", "b", "d"]},
        "data": {"domains": {"a": {"id": ["a_id"], "ood": ["a_ood"]}, "b": {"id": ["b_id"]},
                             "c": {"ood": ["c_ood"]}, "d": {"id": ["d_id"]}}},
    }  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(config))
    ten = lambda k: [1.0] * k + [0.0] * (10 - k)  # noqa: E731
    runs = {
        "base": {"a_id": ten(2), "b_id": ten(5), "d_id": ten(1), "a_ood": ten(4), "c_ood": ten(4)},
        "m/seed0/stage1": {"a_id": ten(6), "b_id": ten(5), "d_id": ten(1)},
        "m/seed0/stage2": {"a_id": ten(5), "b_id": ten(8), "d_id": ten(2)},
        "m/seed0/stage3": {
            "a_id": ten(3),
            "b_id": ten(7),
            "d_id": ten(5),
            "a_ood": ten(6),
            "c_ood": ten(4),
        },
    }
    for folder, benchmarks in runs.items():
        for benchmark, rewards in benchmarks.items():
            write_eval(tmp_path, folder, benchmark, rewards)
    return tmp_path


def test_changes_are_paired_differences_of_the_right_checkpoints(experiment):
    changes = paired_changes.run_changes(experiment, "m", 0)
    points = {name: round(point, 6) for name, (point, _, _) in changes.items()}
    assert points == {
        "gain a": 0.4,
        "gain b": 0.3,
        "gain d": 0.3,
        "a_id, stage 3 - stage 1": -0.3,
        "b_id, stage 3 - stage 2": -0.1,
        "OOD mean, stage 3 - base": 0.1,  # a_ood +0.2 and c_ood 0, weighed the same
    }
    for point, low, high in changes.values():
        assert low <= point <= high


def test_items_that_all_move_together_have_a_zero_width_interval():
    assert paired_changes.mean_change([np.full(50, 0.25)]) == (0.25, 0.25, 0.25)


def test_the_interval_matches_a_direct_bootstrap_of_the_differences():
    rng = np.random.default_rng(1)
    d = rng.choice([-1.0, 0.0, 1.0], size=200)
    _, low, high = paired_changes.mean_change([d], n_boot=4000)
    boot = np.array([rng.choice(d, d.size).mean() for _ in range(4000)])
    assert low == pytest.approx(np.quantile(boot, 0.025), abs=0.02)
    assert high == pytest.approx(np.quantile(boot, 0.975), abs=0.02)


def test_checkpoints_that_answered_different_items_are_an_error(tmp_path):
    write_eval(tmp_path, "x", "b", [1.0, 0.0])
    write_eval(tmp_path, "y", "b", [1.0])
    with pytest.raises(ValueError, match="different items"):
        paired_changes.paired_differences(
            tmp_path / "eval/x/b.responses.jsonl", tmp_path / "eval/y/b.responses.jsonl"
        )
