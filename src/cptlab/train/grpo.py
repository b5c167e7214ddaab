"""GRPO: TRL's GRPOTrainer with the stage mixin (log line, timing, KL probe, collapse monitor,
non-finite checks). The objective is TRL's, configured with the study's defaults."""

from __future__ import annotations

from trl import GRPOConfig, GRPOTrainer

from cptlab.train.mixin import StageRecorder, StageTrainerMixin

# Method keys that are TRL's own GRPOConfig fields (cptlab's SDPO config takes them too).
ROLLOUT_IS_KEYS = (
    "vllm_importance_sampling_correction",
    "vllm_importance_sampling_mode",
    "vllm_importance_sampling_clip_max",
    "vllm_importance_sampling_clip_min",
)


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


def grpo_args(params: dict, common: dict) -> GRPOConfig:
    """A GRPOConfig from the method's params and the shared TrainingArguments/TRL keys."""
    return GRPOConfig(
        **common,
        beta=params["beta"],
        epsilon=params["epsilon"],
        epsilon_high=params["epsilon_high"],
        scale_rewards=params["scale_rewards"],
        loss_type=params["loss_type"],
        importance_sampling_level=params["importance_sampling_level"],
        **{key: params[key] for key in ROLLOUT_IS_KEYS},
    )
