"""The SFT stage trainer (cptlab.train.sft) on its own: its examples, its TRL arguments, and a
two-step run of `CptSFTTrainer` on a tiny model (the stage wiring: tests/test_train_stage.py)."""

import json

import pytest
import torch
from tiny_world import save_tiny_model, tiny_rows

from cptlab.checkpoints import load_model, load_tokenizer
from cptlab.errors import ConfigError
from cptlab.train.mixin import StageRecorder
from cptlab.train.monitor import CollapseMonitor
from cptlab.train.rewards import VerifierReward
from cptlab.train.settings import SFTSettings
from cptlab.train.sft import CptSFTTrainer, reference_answer, sft_args, sft_dataset

torch.set_num_threads(1)

COMMON = {  # the TrainingArguments keys a stage passes (cptlab.train.stage.trl_common_args)
    "seed": 0,
    "max_steps": 2,
    "per_device_train_batch_size": 2,
    "learning_rate": 1.0e-3,
    "save_strategy": "no",
    "logging_strategy": "steps",
    "logging_steps": 1,
    "report_to": "none",
    "disable_tqdm": True,
    "remove_unused_columns": False,
    "use_cpu": True,
}


def test_the_target_is_the_rows_reference_answer():
    row = tiny_rows(1)[0]
    assert reference_answer(row, "tiny_train") == row["metadata"]["solution"]
    for solution in (None, "  ", 3):
        bad = {**row, "metadata": {**row["metadata"], "solution": solution}}
        with pytest.raises(ConfigError, match=r"tiny_train: row 'tiny_train-0000' has no metadata"):
            reference_answer(bad, "tiny_train")


def test_examples_pair_each_prompt_with_its_answer_in_stage_order():
    rows = tiny_rows(3)
    data = sft_dataset(rows, [2, 0, 2], "tiny_train")
    assert data.column_names == ["prompt", "completion"]
    assert [d["prompt"] for d in data] == [rows[i]["prompt"] for i in (2, 0, 2)]
    assert [d["completion"] for d in data] == [
        [{"role": "assistant", "content": rows[i]["metadata"]["solution"]}] for i in (2, 0, 2)
    ]


def test_arguments_keep_the_method_params_and_never_pack(tmp_path):
    args = sft_args(
        SFTSettings(completion_only_loss=False), {**COMMON, "output_dir": str(tmp_path)}, 40
    )
    assert (args.max_length, args.packing, args.completion_only_loss) == (40, False, False)
    assert (args.max_steps, args.learning_rate) == (2, 1.0e-3)


def test_the_trainer_trains_on_the_answers_only_and_logs_no_reward(tmp_path):
    """Two steps: the labels are the answer's tokens (and its end of turn) only, one log line
    per step, and nothing sampled, so no reward metrics."""
    rows = tiny_rows(4)
    folder = save_tiny_model(tmp_path / "base", rows)
    tokenizer = load_tokenizer(folder)
    args = sft_args(
        SFTSettings(completion_only_loss=True), {**COMMON, "output_dir": str(tmp_path)}, 64
    )
    monitor = CollapseMonitor()
    recorder = StageRecorder(
        log_path=tmp_path / "train_log.jsonl",
        reward=VerifierReward(rows, monitor=monitor),
        monitor=monitor,
    )
    trainer = CptSFTTrainer(
        model=load_model(folder),
        args=args,
        train_dataset=sft_dataset(rows, [0, 1, 2, 3], "tiny_train"),
        processing_class=tokenizer,
        recorder=recorder,
    )
    example = trainer.train_dataset[0]
    answer = tokenizer.encode(rows[0]["metadata"]["solution"], add_special_tokens=False)
    kept = [k for k, label in enumerate(example["labels"]) if label != -100]
    assert kept == list(range(kept[0], len(example["input_ids"]))) and kept[0] > 0
    assert example["input_ids"][kept[0] : kept[0] + len(answer)] == answer

    trainer.train()
    lines = [json.loads(line) for line in recorder.log_path.read_text().splitlines()]
    assert [line["step"] for line in lines] == [1, 2]
    assert all(line["loss"] > 0 for line in lines)
    assert not any(key.startswith("verifier/") for line in lines for key in line)
