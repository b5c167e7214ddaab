"""GRPO: TRL's GRPOTrainer with the stage mixin (log line, timing, KL probe, collapse monitor,
non-finite checks). The objective is TRL's, configured with the study's defaults."""

from __future__ import annotations

import torch
from trl import GRPOConfig, GRPOTrainer
from trl.trainer.utils import entropy_from_logits, selective_log_softmax

from cptlab.train.mixin import StageRecorder, StageTrainerMixin
from cptlab.train.settings import GRPOSettings
from cptlab.train.shared_prompt import completion_logits
from cptlab.train.vllm_sync import adapt_weight_sync


class CptGRPOTrainer(StageTrainerMixin, GRPOTrainer):
    """TRL's `GRPOTrainer` plus cptlab's stage bookkeeping; the training math is unchanged.

    Parameters:
        *args, **kwargs: passed to `trl.GRPOTrainer` (model, reward_funcs, args, train_dataset,
            processing_class, callbacks, ...).
        recorder (`StageRecorder`): where the per-step log line goes and what it measures
            (reward/reason statistics, collapse monitor, KL probe); see `cptlab.train.mixin`.
        shared_prompt_forward (`bool`, *optional*, defaults to `False`): compute the policy's
            log-probabilities with each distinct prompt forwarded once
            (`cptlab.train.shared_prompt`); equal to TRL's up to float rounding.
        length_grouped_forward (`bool`, *optional*, defaults to `False`): with the shared-prompt
            forward, rows of similar completion length forwarded together, each group only as
            wide as its longest completion; equal up to float rounding.
        compact_generation (`bool`, *optional*, defaults to `False`): sample HF-generated
            rollouts with each distinct prompt prefilled once and finished rows dropped from the
            decode batch (`cptlab.train.compact_generation`); the same distribution as
            `generate`, other draws.
    """

    def __init__(
        self,
        *args,
        recorder: StageRecorder,
        shared_prompt_forward: bool = False,
        length_grouped_forward: bool = False,
        compact_generation: bool = False,
        **kwargs,
    ) -> None:
        self.recorder = recorder
        self.shared_prompt_forward = shared_prompt_forward
        self.length_grouped_forward = length_grouped_forward
        self.compact_generation = compact_generation
        super().__init__(*args, **kwargs)
        self.check_compact_generation()
        adapt_weight_sync(self)

    def _generate_single_turn(
        self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False
    ):
        if (
            self.samples_compactly()
            and not self.use_transformers_continuous_batching
            and images is None
            and not multimodal_fields
        ):
            return self.compact_rollouts(prompt_ids), None
        return super()._generate_single_turn(
            prompt_ids, images, multimodal_fields, num_generations, has_tool_images
        )

    def _get_per_token_logps_and_entropies(
        self,
        model,
        input_ids,
        attention_mask,
        logits_to_keep,
        batch_size=None,
        compute_entropy=False,
        compute_aux_loss=False,
        **media,
    ):
        if (
            compute_aux_loss
            or any(value is not None for value in media.values())
            or not self.shares_prompts(model)
        ):
            return super()._get_per_token_logps_and_entropies(
                model,
                input_ids,
                attention_mask,
                logits_to_keep,
                batch_size=batch_size,
                compute_entropy=compute_entropy,
                compute_aux_loss=compute_aux_loss,
                **media,
            )
        batch_size = batch_size or input_ids.size(0)
        logps, entropies = [], []
        for start in range(0, input_ids.size(0), batch_size):
            rows = slice(start, start + batch_size)
            with self.accelerator.autocast():
                logits = completion_logits(
                    model,
                    input_ids[rows],
                    attention_mask[rows],
                    logits_to_keep,
                    self.temperature,
                    self.prompt_forward_groups(),
                )
            logps.append(selective_log_softmax(logits, input_ids[rows, -logits_to_keep:]))
            if compute_entropy:
                # Only the entropy bonus differentiates the entropy; the masks and logs do not.
                with torch.set_grad_enabled(
                    self._entropy_bonus_enabled and torch.is_grad_enabled()
                ):
                    entropies.append(entropy_from_logits(logits))
        return torch.cat(logps), torch.cat(entropies) if compute_entropy else None, None


def grpo_args(params: GRPOSettings, common: dict) -> GRPOConfig:
    """A GRPOConfig from the method's params (TRL's GRPOConfig field names, except the rollout
    batch's updates, which `common` already carries as steps_per_generation) and the shared
    TrainingArguments/TRL keys."""
    return GRPOConfig(**common, **params.trl_fields())
