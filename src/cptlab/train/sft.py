"""SFT: TRL's SFTTrainer on a stage's reference answers, with the stage mixin (log line, timing,
KL probe, non-finite checks).

The off-policy baseline of the continual-learning comparison: each step trains on
`prompts_per_step` prompts of the stage's training rows, as an RL step samples, each with its
row's reference answer (`metadata.solution`) as the assistant turn, the loss on the answer's
tokens only. Nothing is sampled, so the log line has no reward or collapse metrics.
"""

from __future__ import annotations

from datasets import Dataset
from trl import SFTConfig, SFTTrainer

from cptlab.errors import ConfigError
from cptlab.train.mixin import StageRecorder, StageTrainerMixin
from cptlab.train.settings import SFTSettings


class CptSFTTrainer(StageTrainerMixin, SFTTrainer):
    """TRL's `SFTTrainer` plus cptlab's stage bookkeeping; the training math is unchanged.

    Parameters:
        *args, **kwargs: passed to `trl.SFTTrainer` (model, args (an `SFTConfig`),
            train_dataset, processing_class, callbacks, ...).
        recorder (`StageRecorder`): where the per-step log line goes; see `cptlab.train.mixin`.
    """

    def __init__(self, *args, recorder: StageRecorder, **kwargs) -> None:
        self.recorder = recorder
        super().__init__(*args, **kwargs)


def reference_answer(row: dict, where: str) -> str:
    """The row's reference answer, the SFT target; a clear error when the row has none."""
    solution = (row.get("metadata") or {}).get("solution")
    if not isinstance(solution, str) or not solution.strip():
        raise ConfigError(
            f"{where}: row {row.get('id')!r} has no metadata.solution; the sft trainer trains "
            "on each row's reference answer"
        )
    return solution


def sft_dataset(rows: list[dict], indices: list[int], where: str) -> Dataset:
    """Prompt-completion pairs of the stage's examples (`indices` into `rows`, as the RL
    datasets: cptlab.train.replay)."""
    answers = {i: reference_answer(rows[i], where) for i in sorted(set(indices))}
    return Dataset.from_list(
        [
            {
                "prompt": rows[i]["prompt"],
                "completion": [{"role": "assistant", "content": answers[i]}],
            }
            for i in indices
        ]
    )


def sft_args(params: SFTSettings, common: dict, max_length: int) -> SFTConfig:
    """An SFTConfig from the method's params (TRL's SFTConfig field names) and the shared
    TrainingArguments keys; sequences are cut at `max_length` tokens (prompt + answer)."""
    return SFTConfig(**common, **params.trl_fields(), max_length=max_length, packing=False)
