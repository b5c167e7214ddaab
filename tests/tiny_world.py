"""A tiny stage built in seconds, for the tests and the trainer benchmark (no hub, no data).

`tiny_world(folder)` writes a tokenizer + random Qwen2 model (`base/`), a training file
(`data/tiny_train.jsonl`) and returns a config with `methods` and `training`. Its rows use the
`tiny_parity` verifier: reward 1 when the completion has an even number of characters, so about
half of the rollouts succeed even from a random model and SDPO's teacher is active. Importing
this module registers that verifier and the `tiny_train` benchmark, so `tiny_config()` passes
`cptlab.validation.validate_config`.
"""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path

from transformers import TrainerCallback

from cptlab.base_model.architecture import build_model
from cptlab.base_model.settings import ArchitectureSettings
from cptlab.base_model.tokenizer import train_tokenizer
from cptlab.domains import BENCHMARKS, Benchmark, register_benchmark
from cptlab.verifiers import VERIFIERS, Verdict, register

PARITY = "tiny_parity"
BENCHMARK = "tiny_train"

TINY_MODEL = {
    "hidden_size": 32,
    "num_layers": 2,
    "num_heads": 2,
    "num_kv_heads": 1,
    "intermediate_size": 64,
    "max_positions": 256,
}

TINY_TRAINING = {
    "steps": 4,
    "prompts_per_step": 4,
    "num_generations": 4,
    "learning_rate": 1.0e-3,
    "warmup_steps": 0,
    "max_prompt_length": 64,
    "max_completion_length": 12,
    "save_steps": 2,
    "save_total_limit": None,
    "kl_probe": {"prompts": 2, "max_tokens": 8, "every": 1},
    "collapse": {"thresholds": {}, "patience": 1, "action": "warn"},
}

TINY_METHODS = {
    "grpo": {"trainer": "grpo"},
    "sdpo_frozen": {"trainer": "sdpo", "teacher_model_kind": "frozen"},
    "sdpo_ema": {"trainer": "sdpo", "teacher_model_kind": "ema", "teacher_update_rate": 0.25},
    "sdpo_live": {"trainer": "sdpo", "teacher_model_kind": "student"},
    "sdpo_frozen_cot": {
        "trainer": "sdpo",
        "teacher_model_kind": "frozen",
        "remove_thinking_from_demonstration": False,
    },
}


def _parity(completion: str, row: dict) -> Verdict:
    if len(completion) % 2 == 0:
        return Verdict(1.0, "Correct.")
    return Verdict(0.0, "The answer has an odd number of characters.")


if PARITY not in VERIFIERS:
    register(PARITY)(_parity)


def tiny_rows(n: int = 64, seed: int = 0, verifier: str = PARITY) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        a, b = rng.randint(0, 50), rng.randint(0, 50)
        rows.append(
            {
                "id": f"{BENCHMARK}-{i:04d}",
                "domain": "math",
                "benchmark": BENCHMARK,
                "prompt": [
                    {"role": "user", "content": f"Compute {a} + {b}. Answer in \\boxed{{}}."}
                ],
                "answer": str(a + b),
                "metadata": {"verifier": verifier, "solution": f"\\boxed{{{a + b}}}"},
            }
        )
    return rows


if BENCHMARK not in BENCHMARKS:
    register_benchmark(
        Benchmark(
            name=BENCHMARK,
            domain="math",
            split="train",
            verifier=PARITY,
            loader=lambda n=None, seed=0: tiny_rows(64 if n is None else n, seed),
            description="tiny test prompts (a + b) scored by answer-length parity",
        )
    )


def write_rows(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def save_tiny_model(folder: Path, rows: list[dict], seed: int = 0, vocab_size: int = 300) -> Path:
    """Train the tokenizer on the rows' text and save a random tiny model beside it."""
    texts = [r["prompt"][0]["content"] + " " + r["metadata"]["solution"] for r in rows]
    texts += ["<think>reasoning</think> Correct solution: the answer"]
    tokenizer = train_tokenizer(texts, vocab_size)
    model = build_model(ArchitectureSettings(**TINY_MODEL), tokenizer, seed)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def tiny_config(**training: object) -> dict:
    """A config with the tiny domain, TINY_METHODS and TINY_TRAINING (plus overrides)."""
    config = {
        "experiment": "tiny",
        "data": {"seed": 0, "domains": {"math": {"train": BENCHMARK}, "logic": {"ood": []}}},
        "base": {"seed": 0},
        "methods": copy.deepcopy(TINY_METHODS),
        "training": copy.deepcopy(TINY_TRAINING),
    }
    config["training"].update(copy.deepcopy(training))
    return config


def tiny_world(folder: Path, seed: int = 0) -> tuple[dict, Path, Path]:
    """(config, base model folder, data folder) under `folder`."""
    folder = Path(folder)
    rows = tiny_rows(seed=seed)
    data_dir = folder / "data"
    write_rows(data_dir / f"{BENCHMARK}.jsonl", rows)
    base = save_tiny_model(folder / "base", rows, seed)
    return tiny_config(), base, data_dir


def one_step_world(folder: Path) -> dict:
    """A tiny world for tests that train single steps (`train_one_step`)."""
    config, base, data = tiny_world(folder)
    return {"config": config, "base": base, "data": data, "dir": Path(folder)}


def train_one_step(world: dict, method: str, name: str, **training: object) -> Path:
    """One math step of `method` from the world's base, with `training` over its settings;
    returns the stage's output folder (`train_log.jsonl`, `manifest.json`)."""
    from cptlab.train.stage import train_stage

    config = copy.deepcopy(world["config"])
    config["training"].update(steps=1, **training)
    out = world["dir"] / name
    train_stage(
        config,
        method,
        "math",
        seed=0,
        start=world["base"],
        out=out / "out",
        state_dir=out / "state",
        data=world["data"] / f"{BENCHMARK}.jsonl",
    )
    return out / "out"


def write_item_files(eval_file: Path, accuracy: float, items: int = 10) -> None:
    """Beside a hand-made EVAL.json, its responses file: `items` items of one greedy sample, the
    first round(accuracy * items) right (the item ledger reads them)."""
    right = round(accuracy * items)
    benchmark = eval_file.stem
    lines = [
        {"id": f"{benchmark}-{i:04d}", "completions": ["x"], "rewards": [float(i < right)]}
        for i in range(items)
    ]
    path = eval_file.with_name(f"{benchmark}.responses.jsonl")
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def write_benchmark_rows(data_dir: Path, benchmark: str, domain: str, items: int = 10) -> Path:
    """`items` canonical rows of `benchmark` (the ids write_item_files answers)."""
    rows = [
        {
            "id": f"{benchmark}-{i:04d}",
            "domain": domain,
            "benchmark": benchmark,
            "prompt": [{"role": "user", "content": f"Question {i}?"}],
            "answer": "A",
            "metadata": {},
        }
        for i in range(items)
    ]
    return write_rows(data_dir / f"{benchmark}.jsonl", rows)


class Kill(TrainerCallback):
    """Simulates a kill with -9 before update `at` + 1 (after the checkpoint of update `at`
    where one was saved; inside a rollout batch when `at` is not a multiple of its updates)."""

    def __init__(self, at: int):
        self.at = at

    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step == self.at:
            raise KeyboardInterrupt(f"killed before step {self.at + 1}")
