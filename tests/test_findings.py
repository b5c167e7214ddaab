"""The findings table on a constructed results folder: each verdict from known per-seed values,
paired over seeds, and the forgetting control."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from cptlab.artifacts import write_manifest
from cptlab.layout import Layout
from cptlab.results.aggregate import SCORE_COLUMNS, compute_metrics, write_csv
from cptlab.results.findings import COLUMNS, score_findings, verdict, write_findings

DOMAINS = {
    "math": {"train": "math_train", "id": ["math_id"], "ood": ["math_ood"]},
    "science": {"train": "science_train", "id": ["science_id"]},
    "logic": {"ood": ["logic_ood"]},
}
DOMAIN_OF = {"math_id": "math", "math_ood": "math", "science_id": "science", "logic_ood": "logic"}
SPLIT_OF = {"math_id": "id", "math_ood": "ood", "science_id": "id", "logic_ood": "ood"}
METHODS = ["grpo", "sdpo_frozen", "sdpo_ema5", "sdpo_frozen_cot", "sft"]
SEEDS = [0, 1, 2]
BASE = {"math_id": 0.30, "math_ood": 0.40, "science_id": 0.30, "logic_ood": 0.50}


def accuracies(method: str, seed: int) -> dict[int, dict[str, float]]:
    """Stage 1 learns math, stage 2 science. GRPO keeps math; SDPO_0 forgets 10 points of it
    more than GRPO (+- 1 by seed); SFT forgets 20. The EMA teacher and CoT end 5 points below
    SDPO_0 on every seed except seed 2 of CoT (inconclusive). SDPO_0 lifts math_ood and lowers
    logic_ood."""
    jitter = (seed - 1) * 0.01
    math_after_2 = {"grpo": 0.50, "sdpo_frozen": 0.40, "sdpo_ema5": 0.35, "sft": 0.30}.get(
        method, 0.35 if seed < 2 else 0.50
    )
    final_science = 0.60 - (0.10 if method == "sdpo_ema5" else 0.0)
    return {
        0: dict(BASE),
        1: {"math_id": 0.50, "math_ood": 0.50, "science_id": 0.30, "logic_ood": 0.45},
        2: {
            "math_id": math_after_2 + (jitter if method == "sdpo_frozen" else 0.0),
            "math_ood": 0.48 + jitter,
            "science_id": final_science,
            "logic_ood": 0.45 + jitter,
        },
    }


def config(methods=METHODS, seeds=SEEDS) -> dict:
    return {
        "experiment": "findings",
        "data": {"seed": 0, "domains": DOMAINS},
        "base": {"seed": 0},
        "run": {"sequence": ["math", "science"], "methods": list(methods), "seeds": list(seeds)},
    }


def pass_at_k_gap(method: str, seed: int, stage: int) -> float:
    """pass@k minus pass@1 (pass@1 is the accuracy): 0.30 until the last stage, which narrows it
    by 5 - seed points under GRPO and by 20 under SDPO_0."""
    if stage < 2:
        return 0.30
    return {"grpo": 0.25 + 0.01 * seed, "sdpo_frozen": 0.10}.get(method, 0.30)


def write_results(root, cfg: dict, nss: dict, boxed: dict, sampled: bool = True) -> Layout:
    """The tables the findings read; `sampled`: evaluated with 4 samples (pass@k), else one."""
    layout = Layout(root)
    rows = []
    for method in cfg["run"]["methods"]:
        for seed in cfg["run"]["seeds"]:
            for stage, accs in accuracies(method, seed).items():
                for name, acc in accs.items():
                    domain = "base" if stage == 0 else cfg["run"]["sequence"][stage - 1]
                    pass_k = acc + pass_at_k_gap(method, seed, stage)
                    metrics = [acc, acc - 0.05, acc + 0.05, pass_k, pass_k - 0.05, pass_k + 0.05]
                    metrics += [acc, acc - 0.05, acc + 0.05]  # maj@k
                    rows.append(
                        [
                            method,
                            seed,
                            stage,
                            domain,
                            name,
                            DOMAIN_OF[name],
                            SPLIT_OF[name],
                            acc,
                            100,
                            acc - 0.1,
                            acc + 0.1,
                            4 if sampled else 1,
                            "hf",
                            *[float("nan")] * 3,  # no test pass fraction: no code tests
                            *(metrics if sampled else [float("nan")] * 9),
                        ]
                    )
            folder = layout.drift_chain_dir(method, seed)
            folder.mkdir(parents=True)
            pd.DataFrame(
                {
                    "stage": [1, 2, 2],
                    "reference": ["base", "base", "previous"],
                    "nss": [1e-5, nss[method] * (1 + 0.05 * seed), 1e-5],
                }
            ).to_csv(folder / "params_summary.csv", index=False)
            similarity = 95.0 if method == "grpo" else 90.0 + seed
            pd.DataFrame(
                {
                    "stage": [2],
                    "stage_domain": ["science"],
                    "benchmark": ["all"],
                    "cosine_median": [similarity],
                    "rouge_l_median": [50.0],
                }
            ).to_csv(folder / "responses_summary.csv", index=False)
            pd.DataFrame(
                {
                    "stage": [1, 1, 2, 2],
                    "step": [1, 2, 1, 2],
                    "collapse/format/boxed/repeated_share": [boxed[method] + 0.01 * seed] * 2
                    + [0, 0],
                }
            ).to_csv(folder / "artifact_trend_log.csv", index=False)
            for stage, domain in enumerate(cfg["run"]["sequence"], start=1):
                log = layout.train_log(method, seed, stage, domain)
                log.parent.mkdir(parents=True)
                kl = 0.1 * stage * (3 if method.startswith("sdpo") else 1) + 0.01 * seed
                log.write_text(
                    json.dumps({"step": 1, "kl_to_start": 0.0})
                    + "\n"
                    + json.dumps({"step": 2, "kl_to_start": kl})
                    + "\n"
                )
    scores = pd.DataFrame(rows, columns=SCORE_COLUMNS)
    write_csv(layout.scores_csv, scores)
    write_csv(layout.cl_metrics_csv, compute_metrics(cfg, scores))
    return layout


NSS = {"grpo": 1e-5, "sdpo_frozen": 4e-5, "sdpo_ema5": 5e-5, "sdpo_frozen_cot": 4e-5, "sft": 9e-5}
BOXED = {"grpo": 0.0, "sdpo_frozen": 0.2, "sdpo_ema5": 0.25, "sdpo_frozen_cot": 0.2, "sft": 0.0}


def by_finding(table: pd.DataFrame) -> dict[str, dict]:
    return {f"{r['finding']}{r['part']}": r for r in table.to_dict("records")}


def test_each_finding_is_scored_from_the_paired_seeds(tmp_path):
    cfg = config()
    layout = write_results(tmp_path, cfg, NSS, BOXED)
    rows = by_finding(score_findings(cfg, layout))
    assert list(rows) == [
        *["1", "2", "3a", "3b", "4", "5a", "5b", "5c", "6"],
        *["sharpeninga", "sharpeningb", "sharpeningc", "sharpeningd"],
        *["learninga", "learningb", "control"],
    ]
    # 1: SDPO_0 - SDPO_5% id accuracy: math 40+-1 vs 35, science 60 vs 50 -> +7.5 points
    assert rows["1"]["value"] == pytest.approx(7.5) and rows["1"]["verdict"] == "agrees"
    # 2: CoT - SDPO_0 on math: -5, -6, +9 (seed 2) -> the interval covers 0
    assert rows["2"]["verdict"] == "inconclusive"
    # 3a: math_ood 0.40 -> 0.47..0.49 (+20 % mean); 3b: logic_ood 0.50 -> 0.44..0.46 (-10 %)
    assert rows["3a"]["value"] == pytest.approx(20.0) and rows["3a"]["verdict"] == "agrees"
    assert rows["3b"]["value"] == pytest.approx(-10.0) and rows["3b"]["verdict"] == "agrees"
    # 4: forgetting of math after stage 2: SDPO_0 10 +- 1, GRPO 0 -> +10 points
    assert rows["4"]["value"] == pytest.approx(10.0) and rows["4"]["verdict"] == "agrees"
    assert rows["4"]["ci_low"] > 0 and rows["4"]["n_seeds"] == 3
    # 5a: NSS ratio 4 (same seed factor on both); 5b: similarity 95 - (90, 91, 92)
    assert rows["5a"]["value"] == pytest.approx(4.0) and rows["5a"]["verdict"] == "agrees"
    assert rows["5b"]["value"] == pytest.approx(4.0) and rows["5b"]["verdict"] == "agrees"
    # 5c: KL at the stage ends (0.1, 0.2) x 3 against x 1, plus 0.01 seed on both: ratio < 3
    assert 2.5 < rows["5c"]["value"] < 3 and rows["5c"]["verdict"] == "agrees"
    # 6: the highest stage's mean share: 0.2 + 0.01 seed against 0 + 0.01 seed
    assert rows["6"]["value"] == pytest.approx(0.2) and rows["6"]["verdict"] == "agrees"
    # sharpening: the gap pass@k - pass@1 narrows by 5 - seed points (GRPO), 20 (SDPO_0)
    assert rows["sharpeninga"]["value"] == pytest.approx(-4.0)
    assert rows["sharpeningb"]["value"] == pytest.approx(-20.0)
    assert rows["sharpeninga"]["verdict"] == rows["sharpeningb"]["verdict"] == "agrees"
    # pass@1 (the accuracy): SDPO_0 ends math_id 10 - 100 jitter points below GRPO, the other
    # three benchmarks equal: -2.5 on the mean, against the hypothesis' "above"
    assert rows["sharpeningc"]["value"] == pytest.approx(-2.5)
    assert rows["sharpeningc"]["verdict"] == "contradicts"
    # pass@k: that, plus the gaps' difference (-20 against -5 + seed): -2.5 - 16
    assert rows["sharpeningd"]["value"] == pytest.approx(-18.5)
    assert rows["sharpeningd"]["verdict"] == "agrees"
    # control: SFT loses 20 points of math after the science stage on every seed
    assert rows["control"]["value"] == pytest.approx(-20.0)
    assert rows["control"]["verdict"] == "agrees" and "math_id" in rows["control"]["quantity"]

    # learning: math 30 -> 50 and science 30 -> 60 on every seed; the smallest is math's +20
    for key in ("learninga", "learningb"):
        assert rows[key]["value"] == pytest.approx(20.0) and rows[key]["verdict"] == "agrees"
        assert "stage 1 math_id" in rows[key]["quantity"]

    paths = write_findings(cfg, layout)
    assert list(pd.read_csv(paths["findings"]).columns) == COLUMNS
    text = paths["html"].read_text()
    assert text.count("<tr") == 1 + len(rows) and "agrees" in text


def test_the_opposite_direction_contradicts_and_a_missing_method_is_not_measured(tmp_path):
    cfg = config(methods=["grpo", "sdpo_frozen"])
    nss = {**NSS, "sdpo_frozen": 0.5e-5}  # SDPO_0 drifts half as far as GRPO
    layout = write_results(tmp_path, cfg, nss, BOXED, sampled=False)
    rows = by_finding(score_findings(cfg, layout))
    assert rows["5a"]["value"] == pytest.approx(0.5) and rows["5a"]["verdict"] == "contradicts"
    for key in ("1", "2"):
        assert rows[key]["verdict"] == "not measured" and "needs" in rows[key]["note"]
    for key in ("sharpeninga", "sharpeningd"):  # one greedy sample: no pass@k
        assert rows[key]["verdict"] == "not measured"
        assert "evaluation.samples >= 2" in rows[key]["note"]
    assert rows["control"]["verdict"] == "not measured"


def test_a_stage_that_gains_under_ten_points_fails_the_learning_criterion(tmp_path):
    cfg = config(methods=["grpo", "sdpo_frozen"])
    layout = write_results(tmp_path, cfg, NSS, BOXED)
    scores = pd.read_csv(layout.scores_csv)
    late = (scores.method == "sdpo_frozen") & (scores.stage == 2)
    science = late & (scores.benchmark == "science_id")
    scores.loc[science, "accuracy"] = 0.37 + 0.01 * scores.loc[science, "seed"]  # +7, +8, +9
    write_csv(layout.scores_csv, scores)
    rows = by_finding(score_findings(cfg, layout))
    assert rows["learninga"]["verdict"] == "agrees"
    row = rows["learningb"]
    assert row["value"] == pytest.approx(8.0) and "stage 2 science_id" in row["quantity"]
    assert row["ci_low"] > 0 and row["verdict"] == "inconclusive"
    assert "a gain under 10 points" in row["note"]


def test_each_row_says_whether_its_methods_moved_equally_far(tmp_path):
    """With the same training.kl_budget for both methods a row compares them at a matched
    movement, and names the stages that reached their step cap before the budget; a method
    without the budget (SFT) stays at its configured settings."""
    cfg = config(methods=["grpo", "sdpo_frozen", "sft"])
    layout = write_results(tmp_path, cfg, NSS, BOXED)
    assert set(score_findings(cfg, layout)["comparison"]) == {"configured settings"}

    cfg["methods"] = {
        "grpo": {"trainer": "grpo"},
        "sdpo_frozen": {"trainer": "sdpo", "teacher_model_kind": "frozen"},
        "sft": {"trainer": "sft", "training": {"kl_budget": None}},
    }
    cfg["training"] = {"kl_budget": 0.3}
    for method in cfg["methods"]:
        for seed in cfg["run"]["seeds"]:
            for stage, domain in enumerate(cfg["run"]["sequence"], start=1):
                reached = None if (method, seed, stage) == ("sdpo_frozen", 1, 2) else {"step": 7}
                write_manifest(
                    layout.stage_dir(method, seed, stage, domain),
                    {"kl_budget": {"budget": 0.3, "reached": reached}},
                )
    rows = by_finding(score_findings(cfg, layout))
    matched = "matched movement: KL 0.3 to each stage's start"
    assert rows["4"]["comparison"] == matched and rows["learninga"]["comparison"] == matched
    assert "step cap below the budget: sdpo_frozen seed 1 stage 2" in rows["4"]["note"]
    assert "step cap" not in rows["learninga"]["note"]
    assert rows["control"]["comparison"] == "configured settings"


def test_a_method_that_did_not_move_gives_no_ratio(tmp_path):
    cfg = config(methods=["grpo", "sdpo_frozen"])
    rows = by_finding(
        score_findings(cfg, write_results(tmp_path, cfg, {**NSS, "grpo": 0.0}, BOXED))
    )
    assert math.isnan(rows["5a"]["value"]) and rows["5a"]["verdict"] == "not measured"


def test_one_seed_has_no_interval(tmp_path):
    cfg = config(seeds=[0])
    rows = by_finding(score_findings(cfg, write_results(tmp_path, cfg, NSS, BOXED)))
    assert rows["4"]["verdict"] == "inconclusive" and math.isnan(rows["4"]["ci_low"])
    assert "one seed: no interval over seeds" in rows["4"]["note"]


@pytest.mark.parametrize(
    "low, high, direction, expected",
    [
        (1, 2, 1, "agrees"),
        (-2, -1, 1, "contradicts"),
        (-1, 1, 1, "inconclusive"),
        (-2, -1, -1, "agrees"),
    ],
)
def test_verdict(low, high, direction, expected):
    assert verdict(low, high, 3, direction, 0.0) == expected


def test_a_zero_difference_with_rounding_is_no_effect():
    """Two methods' saturated medians (100 % similarity on every seed) differ by rounding."""
    assert verdict(1.4e-14, 1.4e-14, 2, 1, 0.0) == "inconclusive"
    assert verdict(1.0 + 1e-15, 1.0 + 1e-15, 2, 1, 1.0) == "inconclusive"
