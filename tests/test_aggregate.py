"""`cptlab aggregate` on a hand-made EVAL.json tree: scores.csv rows, the CL metrics of one run
by hand, the summary over seeds, and the errors."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
from conftest import run_cli, run_command
from tiny_world import write_benchmark_rows, write_item_files

from cptlab.evaluation.scoring import PASS_FRACTION_KEYS
from cptlab.results.aggregate import METRIC_COLUMNS, SCORE_COLUMNS, SUMMARY_COLUMNS, read_csv

DOMAINS = {
    "math": {"train": "math_train", "id": ["math_id"], "ood": ["math_ood"]},
    "science": {"train": "science_train", "id": ["science_id"], "ood": ["science_ood"]},
    "logic": {"ood": ["logic_ood"]},
    "copying": {},
}
BENCHMARKS = ["math_id", "math_ood", "science_id", "science_ood", "logic_ood"]
METHODS = ["grpo", "sdpo_frozen"]
SEEDS = [0, 1]
BASE = {"math_id": 0.2, "math_ood": 0.55, "science_id": 0.5, "science_ood": 0.25, "logic_ood": 0.0}
# grpo, seed 0, after stage 1 (math) and stage 2 (science)
RUN = {
    1: {"math_id": 0.6, "math_ood": 0.5, "science_id": 0.4, "science_ood": 0.25, "logic_ood": 0.1},
    2: {"math_id": 0.3, "math_ood": 0.45, "science_id": 0.8, "science_ood": 0.5, "logic_ood": 0.1},
}


def accuracy(method: str, seed: int, stage: int, name: str) -> float:
    if stage == 0:
        return BASE[name]
    return RUN[stage][name] + 0.01 * seed + 0.02 * METHODS.index(method)


def write_eval(path: Path, name: str, acc: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"benchmark": name, "accuracy": acc, "n": 50, "ci_low": acc - 0.1}
    record.update(ci_high=acc + 0.1, samples=1, backend="hf")
    if name == "math_id":  # a verifier that counts tests (null elsewhere, or absent: older files)
        record.update(test_pass_fraction=acc + 0.05, test_pass_fraction_ci_low=acc)
        record.update(test_pass_fraction_ci_high=acc + 0.1)
    elif name == "math_ood":
        record.update(dict.fromkeys(PASS_FRACTION_KEYS))
    path.write_text(json.dumps(record))
    write_item_files(path, acc)


@pytest.fixture
def tree(tmp_path):
    config = {
        "experiment": "t",
        "data": {"seed": 0, "domains": DOMAINS},
        "base": {"seed": 0},
        "methods": {"grpo": {"trainer": "grpo"}, "sdpo_frozen": {"trainer": "sdpo"}},
        "run": {"sequence": ["math", "science"], "methods": METHODS, "seeds": SEEDS},
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    eval_dir = tmp_path / "eval"
    for name in BENCHMARKS:
        write_benchmark_rows(tmp_path / "data", name, name.split("_")[0])
        write_eval(eval_dir / "base" / f"{name}.json", name, BASE[name])
        for method in METHODS:
            for seed in SEEDS:
                for stage in (1, 2):
                    path = eval_dir / method / f"seed{seed}" / f"stage{stage}" / f"{name}.json"
                    write_eval(path, name, accuracy(method, seed, stage, name))
    return tmp_path


def aggregate(tree: Path) -> None:
    run_command(
        [
            "aggregate", "--config", str(tree / "config.json"), "--results-dir", str(tree),
        ]
    )  # fmt: skip


def test_scores_csv(tree):
    aggregate(tree)
    with open(tree / "scores.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == SCORE_COLUMNS == [
        "method", "seed", "stage", "stage_domain", "benchmark", "benchmark_domain", "split",
        "accuracy", "n", "ci_low", "ci_high", "samples", "backend", "test_pass_fraction",
        "test_pass_fraction_ci_low", "test_pass_fraction_ci_high", "pass_at_1", "pass_at_1_ci_low",
        "pass_at_1_ci_high", "pass_at_k", "pass_at_k_ci_low", "pass_at_k_ci_high", "maj_at_k",
        "maj_at_k_ci_low", "maj_at_k_ci_high",
    ]  # fmt: skip
    assert len(rows) == len(METHODS) * len(SEEDS) * 3 * len(BENCHMARKS)  # stages 0, 1, 2
    seen = set()
    for row in rows:
        stage, seed = int(row["stage"]), int(row["seed"])
        key = (row["method"], seed, stage, row["benchmark"])
        assert key not in seen
        seen.add(key)
        assert row["stage_domain"] == ["base", "math", "science"][stage]
        assert float(row["accuracy"]) == pytest.approx(accuracy(*key))
        assert float(row["ci_high"]) == pytest.approx(accuracy(*key) + 0.1)
        assert row["n"] == "50" and (row["samples"], row["backend"]) == ("1", "hf")
        fractions = [float(row[k]) for k in PASS_FRACTION_KEYS]
        if row["benchmark"] == "math_id":
            want = [accuracy(*key) + d for d in (0.05, 0.0, 0.1)]
            assert fractions == pytest.approx(want)
        else:
            assert all(math.isnan(f) for f in fractions)
        domain, split = row["benchmark"].split("_")
        assert (row["benchmark_domain"], row["split"]) == (domain, split)
    first = rows[0]
    assert (first["method"], first["seed"], first["stage"], first["benchmark"]) == (
        "grpo", "0", "0", "math_id",
    )  # fmt: skip


def metric(frame, name, benchmark, stage, method="grpo", seed=0):
    hit = frame[
        (frame["method"] == method)
        & (frame["seed"] == seed)
        & (frame["stage"] == stage)
        & (frame["metric"] == name)
        & (frame["benchmark"] == benchmark)
    ]
    assert len(hit) == 1, (name, benchmark, stage)
    return hit.iloc[0]


def test_cl_metrics_by_hand(tree):
    aggregate(tree)
    frame = read_csv(tree / "cl_metrics.csv")
    assert list(frame.columns) == METRIC_COLUMNS

    def value(*args, **kwargs):
        return metric(frame, *args, **kwargs)["value"]

    assert value("relative", "math_id", 0) == pytest.approx(0.0)
    assert value("relative", "math_id", 1) == pytest.approx(200.0)  # 0.2 -> 0.6
    assert value("relative", "math_id", 2) == pytest.approx(50.0)  # 0.2 -> 0.3
    assert value("relative", "science_id", 1) == pytest.approx(-20.0)
    assert value("gain", "science_id", 1) == 0.0
    assert value("forgetting", "science_id", 1) == pytest.approx(20.0)
    assert value("gain", "math_id", 1) == pytest.approx(200.0)
    # logic_ood has base accuracy 0: NaN, said so, and left out of the OOD mean
    nan_row = metric(frame, "relative", "logic_ood", 2)
    assert math.isnan(nan_row["value"]) and "base accuracy 0" in nan_row["note"]
    ood_mean = metric(frame, "relative", "ood_mean", 2)
    # math_ood 0.55 -> 0.45, science_ood 0.25 -> 0.5
    assert ood_mean["value"] == pytest.approx((100 * (0.45 - 0.55) / 0.55 + 100.0) / 2)
    assert "logic_ood" in ood_mean["note"]
    assert value("relative", "math_id", 1, method="sdpo_frozen", seed=1) == pytest.approx(
        100 * (0.63 - 0.2) / 0.2
    )
    # averages
    assert value("avg_accuracy", "all", 1) == pytest.approx((0.6 + 0.5 + 0.4 + 0.25 + 0.1) / 5)
    assert math.isnan(value("avg_accuracy", "id_trained", 0))
    assert value("avg_accuracy", "id_trained", 1) == pytest.approx(0.6)
    assert value("avg_accuracy", "id_trained", 2) == pytest.approx((0.3 + 0.8) / 2)
    assert value("avg_accuracy", "ood", 2) == pytest.approx((0.45 + 0.5 + 0.1) / 3)
    # classic forgetting, BWT, FWT after the last stage
    assert value("cl_forgetting", "math_id", 2) == pytest.approx(0.6 - 0.3)
    # from the stage that trained math on: the base's 0.55 does not count
    assert value("cl_forgetting", "math_ood", 2) == pytest.approx(0.5 - 0.45)
    assert value("cl_forgetting", "id_mean", 2) == pytest.approx(0.3)
    assert value("bwt", "id", 2) == pytest.approx(0.3 - 0.6)
    assert value("fwt", "id", 2) == pytest.approx(0.4 - 0.5)
    assert frame[(frame["metric"] == "cl_forgetting") & (frame["stage"] < 2)].empty
    assert frame[(frame["metric"] == "cl_forgetting") & frame["benchmark"].str.startswith(
        "science"
    )].empty  # science is trained last: nothing to forget yet  # fmt: skip


def test_summary_over_seeds(tree):
    aggregate(tree)
    frame = read_csv(tree / "cl_summary.csv")
    assert list(frame.columns) == SUMMARY_COLUMNS
    row = frame[
        (frame["method"] == "grpo")
        & (frame["stage"] == 1)
        & (frame["metric"] == "relative")
        & (frame["benchmark"] == "math_id")
    ].iloc[0]
    values = [200.0, 205.0]  # seeds 0 and 1: 0.60 and 0.61 vs 0.2
    half = 12.706 * (5.0 / math.sqrt(2)) / math.sqrt(2)
    assert row["n_seeds"] == 2 and row["mean"] == pytest.approx(sum(values) / 2)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((202.5 - half, 202.5 + half))


def test_missing_eval_file_is_named(tree):
    gone = tree / "eval" / "sdpo_frozen" / "seed1" / "stage2" / "science_ood.json"
    gone.unlink()
    with pytest.raises(FileNotFoundError, match=str(gone)):
        aggregate(tree)
    assert not (tree / "scores.csv").exists()


def test_eval_file_of_another_benchmark_is_refused(tree, capsys):
    path = tree / "eval" / "grpo" / "seed0" / "stage1" / "math_id.json"
    write_eval(path, "math_ood", 0.5)
    argv = ["aggregate", "--config", str(tree / "config.json"), "--results-dir", str(tree)]
    code, err = run_cli(argv, capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert str(path) in err


def transition(frame, benchmark, kind, to_stage, from_stage, method="grpo", seed=0):
    hit = frame[
        (frame.method == method)
        & (frame.seed == seed)
        & (frame.benchmark == benchmark)
        & (frame.kind == kind)
        & (frame.to_stage == to_stage)
        & (frame.from_stage == from_stage)
    ]
    assert len(hit) == 1, (benchmark, kind, from_stage, to_stage)
    return hit.iloc[0]


def test_the_item_ledger_counts_flips_item_by_item(tree):
    """10 greedy items a benchmark, the first round(10 acc) right (grpo seed 0). math_id: 6
    right after stage 1, 3 after stage 2: 3 items right -> wrong, a free-form answer (no chance
    term). science_id, 4 options: 4 right, then 8: 4 wrong -> right, of which guessing explains
    (1 - 0.4)(1 - 0.8)/3 x 10 = 0.4 items."""
    aggregate(tree)
    ledger, flips = read_csv(tree / "item_ledger.csv"), read_csv(tree / "transitions.csv")
    chain = ledger[(ledger.method == "grpo") & (ledger.seed == 0)]
    math_items = chain[(chain.benchmark == "math_id") & (chain.stage == 2)]
    assert len(math_items) == 10 and math_items.p_correct.sum() == 3
    assert math_items.p_previous.sum() == 6 and math_items.own_stage.eq(1).all()
    assert math_items.p_own.sum() == 6  # its own stage is stage 1 (math)
    assert chain[chain.benchmark == "logic_ood"].own_stage.eq(0).all()  # never trained

    math = transition(flips, "math_id", "stage", 2, 1)
    assert (math["items"], math.right_to_wrong, math.wrong_to_right, math.chance) == (10, 3, 0, 0)
    assert math.right_to_wrong_adjusted == pytest.approx(0.3)
    assert math.right_to_wrong_share_ci_low <= 0.3 <= math.right_to_wrong_share_ci_high
    science = transition(flips, "science_id", "stage", 2, 1)
    assert (science.right_to_wrong, science.wrong_to_right) == (0, 4)
    assert science.chance == pytest.approx(0.4)
    assert science.wrong_to_right_adjusted == pytest.approx((4 - 0.4) / 10)
    assert science.right_to_wrong_adjusted == 0  # clipped at 0
    # every benchmark's items together: 50 items, each benchmark's counts and chance summed
    # (science_ood, 4 options too: 2 right, then 5: (1 - 0.2)(1 - 0.5)/3 x 10)
    pooled = transition(flips, "all", "stage", 2, 1)
    assert pooled["items"] == 50 and pooled.chance == pytest.approx(0.4 + 4 / 3)
    for column in ("right_to_wrong", "wrong_to_right", "chance"):
        each = [transition(flips, b, "stage", 2, 1)[column] for b in BENCHMARKS]
        assert pooled[column] == pytest.approx(sum(each))
    # since its own stage: math_id from the end of stage 1, logic_ood from the base
    assert transition(flips, "math_id", "since_own", 2, 1).right_to_wrong == 3
    assert len(flips[(flips.benchmark == "logic_ood") & (flips.kind == "since_own")]) == 2 * 4
    trajectory = read_csv(tree / "trajectory.csv")
    assert len(trajectory) == len(METHODS) * len(SEEDS) * 3 * len(BENCHMARKS)
    assert list(trajectory.chain_step.unique()) == [0, 50, 100]  # 50 steps a stage by default
