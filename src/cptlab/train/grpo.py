"""GRPO: TRL's GRPOTrainer with the stage mixin (log line, timing, KL probe, collapse monitor,
non-finite checks). The objective is TRL's, configured with the study's defaults."""

from __future__ import annotations

from trl import GRPOConfig, GRPOTrainer

from cptlab.train.mixin import StageRecorder, StageTrainerMixin
from cptlab.train.vllm_sync import adapt_weight_sync


class CptGRPOTrainer(StageTrainerMixin, GRPOTrainer):
    """TRL's `GRPOTrainer` plus cptlab's stage bookkeeping; the training math is unchanged.

    Parameters:
        *args, **kwargs: passed to `trl.GRPOTrainer` (model, reward_funcs, args, train_dataset,
            processing_class, callbacks, ...).
        recorder (`StageRecorder`): where the per-step log line goes and what it measures
            (reward/reason statistics, collapse monitor, KL probe); see `cptlab.train.mixin`.
    """

    def __init__(self, *args, recorder: StageRecorder, **kwargs) -> None:
        self.recorder = recorder
        super().__init__(*args, **kwargs)
        adapt_weight_sync(self)


def grpo_args(params: dict, common: dict) -> GRPOConfig:
    """A GRPOConfig from the method's params (TRL's GRPOConfig field names, except the rollout
    batch's updates, which `common` already carries as steps_per_generation) and the shared
    TrainingArguments/TRL keys."""
    trl_keys = {key: value for key, value in params.items() if key != "updates_per_generation"}
    return GRPOConfig(**common, **trl_keys)
