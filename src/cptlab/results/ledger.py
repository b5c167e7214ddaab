"""The per-item ledger: which items a chain gets right and wrong at each evaluated checkpoint, and
how many flip between two checkpoints, counted item by item as "Mapping Post-Training Forgetting
in Language Models at Scale" (Harmon et al., arXiv 2510.17776) does rather than as a difference
of means.

An item's success probability at a checkpoint is p = c / n, c of its n samples correct (reward 1,
cptlab.evaluation.scoring.SUCCESS; greedy decoding: p is 0 or 1). Between a checkpoint A and a
later B, each item adds

    right -> wrong   p_A (1 - p_B)      the chance that a sample at A is right and one at B wrong
    wrong -> right   (1 - p_A) p_B

(the study's 1->0 and 0->1 indicators, which these equal for one greedy sample each). Their sums
over the items are the counts; over the number of items, the shares. The chance-adjusted shares
subtract the transitions that guessing alone would make on a multiple-choice item with k options
(the study's response model: an item is known, or its answer a uniform guess; its code,
post-forget/post-forget src/analyze/create_csv.py, "Adj. Abs. Forgetting"):

    adjusted = max(0, share - (1 - acc_A)(1 - acc_B) / (k - 1))

with acc_A, acc_B the accuracies of the items at A and B. The subtracted term is the same for both
directions; a benchmark whose items have different k is adjusted per group of equal k (each
group's accuracies, weighted by its items); an answer that is not a choice among options (free
form, a call, a program) has no chance term. Intervals: 95% percentile bootstrap over items (a
benchmark's items resampled; over several benchmarks, each resampled on its own), as avg@k's.

Transitions (`kind` in transitions.csv):

    stage      the end of stage k-1 (the base for k = 1) to the end of stage k: every item
    step       each evaluated checkpoint to the next (within-stage ones included: the items both
               scored, i.e. the within-stage sample)
    since_own  the end of the item's own stage (the first that trains its benchmark's domain; the
               base for a domain never trained) to each later checkpoint

Outputs: item_ledger.csv (LEDGER_COLUMNS, one row per chain, benchmark, item and checkpoint) and
transitions.csv (TRANSITION_COLUMNS; `benchmark` "all" pools every benchmark's items).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from cptlab.domains import verifier_for
from cptlab.evaluation.scoring import SUCCESS
from cptlab.layout import Layout
from cptlab.plan import Plan
from cptlab.results.trajectory import Checkpoint, chain_checkpoints, eval_path
from cptlab.rows import read_jsonl
from cptlab.verifiers.mcq import letters_for

# The verifiers whose answer is one of a row's options (letters_for gives how many).
MULTIPLE_CHOICE = (
    "mcq_answer_tag",
    "mcq_boxed_letter",
    "mcq_letter",
    "study_mcq_answer_tag",
    "study_gpqa",
)
ALL = "all"  # transitions.csv's benchmark over every benchmark's items
BOOTSTRAP = 1000
LEDGER_COLUMNS = [
    "method",
    "seed",
    "benchmark",
    "item",
    "stage",
    "step",
    "chain_step",
    "checkpoint",
    "samples",
    "correct",
    "p_correct",
    "p_previous",
    "own_stage",
    "p_own",
]
SHARES = ("right_to_wrong", "wrong_to_right")
TRANSITION_COLUMNS = [
    "method",
    "seed",
    "benchmark",
    "kind",
    "from_stage",
    "from_step",
    "to_stage",
    "to_step",
    "to_chain_step",
    "items",
    "accuracy_from",
    "accuracy_to",
    "right_to_wrong",
    "wrong_to_right",
    "chance",
    *(
        f"{name}_{what}{suffix}"
        for name in SHARES
        for what in ("share", "adjusted")
        for suffix in ("", "_ci_low", "_ci_high")
    ),
]


def item_successes(path: Path) -> dict[str, tuple[int, int]]:
    """item id -> (correct samples, samples) of one responses file."""
    found = {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                response = json.loads(line)
                rewards = response["rewards"]
                found[response["id"]] = (sum(1 for r in rewards if r >= SUCCESS), len(rewards))
    return found


def option_counts(path: Path) -> dict[str, float]:
    """item id -> its number of options where its verifier picks one (NaN: free form)."""
    return {
        row["id"]: float(len(letters_for(row)))
        if verifier_for(row) in MULTIPLE_CHOICE
        else float("nan")
        for row in read_jsonl(path)
    }


@dataclass
class Items:
    """One benchmark's items scored at both ends of a transition: success probabilities at the
    earlier (`before`) and later (`after`) checkpoint, and their options (NaN: free form)."""

    before: np.ndarray
    after: np.ndarray
    choices: np.ndarray


def _counts(before: np.ndarray, after: np.ndarray, choices: np.ndarray) -> tuple:
    """(right->wrong, wrong->right, chance term) counts along the last axis (items), for each
    leading index (a bootstrap draw)."""
    right_to_wrong = (before * (1 - after)).sum(-1)
    wrong_to_right = ((1 - before) * after).sum(-1)
    chance = np.zeros(right_to_wrong.shape)
    for k in np.unique(choices[np.isfinite(choices)]):
        if k < 2:
            continue
        group = choices == k
        size = group.sum(-1)
        seen = np.maximum(size, 1)
        accuracy_before = (before * group).sum(-1) / seen
        accuracy_after = (after * group).sum(-1) / seen
        chance = chance + size * (1 - accuracy_before) * (1 - accuracy_after) / (k - 1)
    return right_to_wrong, wrong_to_right, chance


def transition_summary(groups: list[Items], seed: int = 0) -> dict:
    """The counts, shares and chance-adjusted shares of the items of `groups` (one per
    benchmark), with bootstrap intervals over items (module docstring)."""
    total = sum(len(g.before) for g in groups)
    summary: dict = {"items": total}
    if total == 0:
        return summary
    rng = np.random.default_rng(seed)
    point = np.zeros(3)
    draws = np.zeros((3, BOOTSTRAP))
    adjusted_point = np.zeros(2)
    adjusted_draws = np.zeros((2, BOOTSTRAP))
    for g in groups:
        rw, wr, chance = _counts(g.before, g.after, g.choices)
        point += (rw, wr, chance)
        # the study clips per task (benchmark)
        adjusted_point += (max(0.0, rw - chance), max(0.0, wr - chance))
        picks = rng.integers(0, len(g.before), (BOOTSTRAP, len(g.before)))
        rw, wr, chance = _counts(g.before[picks], g.after[picks], g.choices[picks])
        draws += (rw, wr, chance)
        adjusted_draws += (np.maximum(0.0, rw - chance), np.maximum(0.0, wr - chance))
    summary.update(
        accuracy_from=float(np.concatenate([g.before for g in groups]).mean()),
        accuracy_to=float(np.concatenate([g.after for g in groups]).mean()),
        right_to_wrong=float(point[0]),
        wrong_to_right=float(point[1]),
        chance=float(point[2]),
    )
    for i, name in enumerate(SHARES):
        for what, value, spread in (
            ("share", point[i], draws[i]),
            ("adjusted", adjusted_point[i], adjusted_draws[i]),
        ):
            summary[f"{name}_{what}"] = float(value / total)
            low, high = np.quantile(spread / total, (0.025, 0.975))
            summary[f"{name}_{what}_ci_low"], summary[f"{name}_{what}_ci_high"] = low, high
    return summary


def _own_stages(plan: Plan) -> dict[str, int]:
    """benchmark -> the stage that first trains its domain (0: never trained)."""
    first: dict[str, int] = {}
    for k, domain in enumerate(plan.sequence, start=1):
        first.setdefault(domain, k)
    return {b.name: first.get(b.domain, 0) for b in plan.benchmarks}


def _pairs(checkpoints: list[Checkpoint], own: int) -> list[tuple[str, Checkpoint, Checkpoint]]:
    """(kind, from, to) of every transition of a chain for a benchmark of own stage `own`."""
    ends = [c for c in checkpoints if c.kind != "within"]
    pairs = [("stage", a, b) for a, b in zip(ends, ends[1:], strict=False)]
    pairs += [("step", a, b) for a, b in zip(checkpoints, checkpoints[1:], strict=False)]
    start = ends[own]  # the base, then each stage's end
    pairs += [("since_own", start, c) for c in checkpoints if c.chain_step > start.chain_step]
    return pairs


def ledger_tables(config: dict, layout: Layout, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(item_ledger.csv's table, transitions.csv's) from every responses file of the chains'
    checkpoints and the benchmarks' rows (their options). `seed` seeds the bootstrap."""
    plan = Plan.from_config(config)
    own_stage = _own_stages(plan)
    choices = {b.name: option_counts(layout.data_file(b.name)) for b in plan.benchmarks}
    ledger, transitions = [], []
    for method, chain_seed in plan.chains:
        checkpoints = chain_checkpoints(config, method)
        successes = {
            (b.name, at): item_successes(
                eval_path(layout, "responses_file", b.name, method, chain_seed, at)
            )
            for b in plan.benchmarks
            for at in checkpoints
        }
        chain = {"method": method, "seed": chain_seed}
        for b in plan.benchmarks:
            own = own_stage[b.name]
            ledger += _ledger_rows(chain, b.name, checkpoints, successes, own)
        pooled: dict[tuple, list[Items]] = {}
        for b in plan.benchmarks:
            for kind, a, z in _pairs(checkpoints, own_stage[b.name]):
                before, after = successes[(b.name, a)], successes[(b.name, z)]
                ids = [i for i in before if i in after]
                items = Items(
                    np.array([before[i][0] / before[i][1] for i in ids]),
                    np.array([after[i][0] / after[i][1] for i in ids]),
                    np.array([choices[b.name].get(i, np.nan) for i in ids]),
                )
                transitions.append(_transition_row(chain, b.name, kind, a, z, [items], seed))
                if kind != "since_own":
                    pooled.setdefault((kind, a, z), []).append(items)
        for (kind, a, z), groups in pooled.items():
            transitions.append(_transition_row(chain, ALL, kind, a, z, groups, seed))
    return (
        pd.DataFrame(ledger, columns=LEDGER_COLUMNS),
        pd.DataFrame(transitions, columns=TRANSITION_COLUMNS),
    )


def _ledger_rows(chain, benchmark, checkpoints, successes, own: int) -> list[dict]:
    rows, previous, at_own = [], {}, {}
    own_end = [c for c in checkpoints if c.kind != "within"][own]
    for at in checkpoints:
        scored = successes[(benchmark, at)]
        for item, (correct, samples) in scored.items():
            p = correct / samples
            rows.append(
                {
                    **chain,
                    "benchmark": benchmark,
                    "item": item,
                    "stage": at.stage,
                    "step": at.step,
                    "chain_step": at.chain_step,
                    "checkpoint": at.kind,
                    "samples": samples,
                    "correct": correct,
                    "p_correct": p,
                    "p_previous": previous.get(item, np.nan),
                    "own_stage": own,
                    "p_own": at_own.get(item, np.nan),
                }
            )
            previous[item] = p
        if at == own_end:
            at_own = {item: c / n for item, (c, n) in scored.items()}
    return rows


def _transition_row(chain, benchmark, kind, a: Checkpoint, z: Checkpoint, groups, seed) -> dict:
    return {
        **chain,
        "benchmark": benchmark,
        "kind": kind,
        "from_stage": a.stage,
        "from_step": a.step,
        "to_stage": z.stage,
        "to_step": z.step,
        "to_chain_step": z.chain_step,
        **transition_summary(groups, seed),
    }
