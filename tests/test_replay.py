"""Replay (training.replay_share): which rows a stage draws, and a stage that replays an earlier
domain's rows scores them with that domain's verifier."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import torch
from tiny_world import tiny_rows, tiny_world, write_rows

from cptlab.train.replay import stage_row_indices
from cptlab.train.sft import sft_dataset
from cptlab.train.stage import train_stage
from cptlab.verifiers import VERIFIERS, Verdict, register

torch.set_num_threads(1)

EARLIER = "tiny_earlier"
SCORED: list[str] = []  # ids of the earlier domain's rows its verifier scored
if EARLIER not in VERIFIERS:

    @register(EARLIER)
    def _earlier(completion: str, row: dict) -> Verdict:
        SCORED.append(row["id"])
        return Verdict(float(len(completion) % 2 == 0), "ok")


def test_without_replay_every_row_appears_equally_often():
    indices = stage_row_indices(
        current=30, replayed=50, steps=4, prompts_per_step=16, share=0.0, seed=0
    )
    assert indices == list(range(30)) * 3  # 64 prompts needed: 3 passes over 30 rows


def test_the_stages_replay_share_is_exact_and_spread_over_the_earlier_rows():
    indices = stage_row_indices(
        current=300, replayed=600, steps=50, prompts_per_step=32, share=0.25, seed=0
    )
    assert len(indices) == 1600
    replayed = [i for i in indices if i >= 300]
    assert len(replayed) == 400 and len(set(replayed)) == 400  # drawn without replacement
    own = Counter(i for i in indices if i < 300)
    assert set(own.values()) == {4}  # 1200 own prompts: every own row 4 times
    # more replayed prompts than earlier rows: each earlier row once before any twice
    small = stage_row_indices(
        current=10, replayed=7, steps=2, prompts_per_step=8, share=0.5, seed=3
    )
    assert sorted(Counter(i for i in small if i >= 10).values()) == [1] * 6 + [2]
    other = stage_row_indices(
        current=300, replayed=600, steps=50, prompts_per_step=32, share=0.25, seed=1
    )
    assert sorted(i for i in other if i >= 300) != sorted(replayed)  # the seed picks the rows


def test_sft_examples_of_replayed_rows_carry_their_own_answers():
    rows = tiny_rows(4, seed=0) + tiny_rows(2, seed=1)
    data = sft_dataset(rows, [0, 1, 4, 5, 4], "tiny_train")
    assert [d["completion"][0]["content"] for d in data] == [
        rows[i]["metadata"]["solution"] for i in (0, 1, 4, 5, 4)
    ]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    folder = tmp_path_factory.mktemp("replay")
    config, base, data_dir = tiny_world(folder)
    earlier = tiny_rows(20, seed=5, verifier=EARLIER)
    for row in earlier:
        row["id"] = row["id"].replace("tiny_train", "earlier")
    write_rows(data_dir / "earlier_train.jsonl", earlier)
    return {"config": config, "base": base, "data": data_dir, "dir": folder}


def test_a_replaying_stage_scores_the_earlier_rows_with_their_verifier(world):
    """4 steps x 4 prompts at share 0.5: 8 replayed prompts x 4 rollouts scored by the earlier
    domain's verifier; the manifest says what was replayed."""
    config = json.loads(json.dumps(world["config"]))
    config["training"]["replay_share"] = 0.5
    SCORED.clear()
    earlier = world["data"] / "earlier_train.jsonl"
    manifest = train_stage(
        config,
        "grpo",
        "math",
        seed=0,
        start=world["base"],
        out=world["dir"] / "out",
        state_dir=world["dir"] / "state",
        threads=1,
        data=world["data"] / "tiny_train.jsonl",
        replay=[earlier],
    )
    assert manifest["status"] == "complete"
    assert manifest["replay"] == {"share": 0.5, "sources": [str(earlier)], "rows": 20, "prompts": 8}
    assert len(SCORED) == 8 * 4 and all(i.startswith("earlier-") for i in SCORED)
    assert len(set(SCORED)) == 8
