"""GRPO: TRL's GRPOTrainer with the stage mixin (log line, timing, KL probe, collapse monitor,
non-finite checks). The objective is TRL's, configured with the study's defaults."""

from __future__ import annotations

import logging

import torch
from trl import GRPOConfig, GRPOTrainer
from trl.trainer.utils import entropy_from_logits, selective_log_softmax

from cptlab.train.mixin import StageRecorder, StageTrainerMixin
from cptlab.train.settings import GRPOSettings
from cptlab.train.shared_prompt import completion_logits
from cptlab.train.vllm_sync import adapt_weight_sync

log = logging.getLogger(__name__)

# TRL's losses whose per-token term is a factor times the row's advantage: a row with advantage 0
# adds exactly 0 to the loss's gradient (its log-probabilities still enter the loss's value).
ADVANTAGE_SCALED_LOSSES = frozenset({"grpo", "bnpo", "dr_grpo", "dapo", "luspo", "cispo", "sapo"})


class CptGRPOTrainer(StageTrainerMixin, GRPOTrainer):
    """TRL's `GRPOTrainer` plus cptlab's stage bookkeeping; the training math is unchanged.

    Rows whose advantage is 0 (a group whose rewards are all equal) are forwarded without
    gradient wherever such a row adds exactly 0 to the gradient (`_inert_rows`: no KL term, no
    entropy bonus, no auxiliary loss, a loss in `ADVANTAGE_SCALED_LOSSES`) and the model runs
    in one process, unwrapped: their log-probabilities and entropies are still computed, for
    the loss's value and the logs, and the backward pass covers only the rows that move the
    policy. The same gradient up to float rounding (tests/test_zero_advantage.py).

    Parameters:
        *args, **kwargs: passed to `trl.GRPOTrainer` (model, reward_funcs, args, train_dataset,
            processing_class, callbacks, ...).
        recorder (`StageRecorder`): where the per-step log line goes and what it measures
            (reward/reason statistics, collapse monitor, KL probe); see `cptlab.train.mixin`.
        shared_prompt_forward (`bool`, *optional*, defaults to `False`): compute the policy's
            log-probabilities with each distinct prompt forwarded once and rows of similar
            completion length together (`cptlab.train.shared_prompt`); equal to TRL's up to
            float rounding.
        compact_generation (`bool`, *optional*, defaults to `False`): sample HF-generated
            rollouts with each distinct prompt prefilled once and finished rows dropped from the
            decode batch (`cptlab.train.compact_generation`); the same distribution as
            `generate`, other draws.
        log_prob_batch_size (`int`, *optional*): rows per forward of the rollout batch's
            log-probabilities without gradient, the old and the reference ones
            (`training.log_prob_micro_batch_size_per_device`; None: TRL's, the micro-batch).
    """

    def __init__(
        self,
        *args,
        recorder: StageRecorder,
        shared_prompt_forward: bool = False,
        compact_generation: bool = False,
        log_prob_batch_size: int | None = None,
        **kwargs,
    ) -> None:
        self.recorder = recorder
        self.log_prob_batch_size = log_prob_batch_size
        self.shared_prompt_forward = shared_prompt_forward
        self.compact_generation = compact_generation
        self._rows_without_gradient: torch.Tensor | None = None  # during a loss computation
        super().__init__(*args, **kwargs)
        self.check_compact_generation()
        adapt_weight_sync(self)
        self.skips_inert_rows = self._inert_rows()

    def _inert_rows(self) -> bool:
        """Whether a row with advantage 0 adds exactly 0 to the loss's gradient."""
        return (
            self.beta == 0.0
            and not self._entropy_bonus_enabled
            and not self.aux_loss_enabled
            and self.loss_type in ADVANTAGE_SCALED_LOSSES
        )

    def _compute_loss(self, model, inputs):
        # A model under a DDP or DeepSpeed wrapper keeps TRL's forward: a forward of part of the
        # rows without gradient beside it is tested on one process only.
        if (
            self.skips_inert_rows
            and torch.is_grad_enabled()
            and model is self.accelerator.unwrap_model(model)
        ):
            advantages = inputs["advantages"]
            zero = advantages == 0
            self._rows_without_gradient = zero.all(dim=1) if zero.dim() == 2 else zero
        try:
            return super()._compute_loss(model, inputs)
        finally:
            self._rows_without_gradient = None

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
        if batch_size is not None and self.log_prob_batch_size is not None:
            # TRL passes a batch size only to the rollout batch's no-grad forwards (the old and
            # the reference log-probabilities): those take log_prob_batch_size rows each.
            batch_size = self.log_prob_batch_size
        # Set only where no auxiliary loss runs (`_inert_rows`) on an unwrapped model
        # (`_compute_loss`); images keep TRL's forward.
        inert = self._rows_without_gradient
        if (
            inert is not None
            and 0 < int(inert.sum()) < len(inert)
            and all(value is None for value in media.values())
        ):
            # The rows that move the policy with gradient, the others without, then back in order.
            live, still = (~inert).nonzero().squeeze(1), inert.nonzero().squeeze(1)

            def forward(rows: torch.Tensor) -> tuple:
                return self._logps_and_entropies(
                    model,
                    input_ids[rows],
                    attention_mask[rows],
                    logits_to_keep,
                    batch_size,
                    compute_entropy=compute_entropy,
                )

            with_grad = forward(live)
            with torch.no_grad():
                without = forward(still)
            order = torch.argsort(torch.cat([live, still]))
            logps = torch.cat([with_grad[0], without[0]])[order]
            entropies = torch.cat([with_grad[1], without[1]])[order] if compute_entropy else None
            return logps, entropies, None
        return self._logps_and_entropies(
            model,
            input_ids,
            attention_mask,
            logits_to_keep,
            batch_size,
            compute_entropy=compute_entropy,
            compute_aux_loss=compute_aux_loss,
            **media,
        )

    def _logps_and_entropies(
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
        """The per-token log-probabilities and entropies of every row: the shared-prompt
        forward's where it applies, else TRL's."""
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
