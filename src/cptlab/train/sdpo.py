"""SDPO: a subclass of TRL's experimental SDPOTrainer with what the study uses and TRL lacks.

Overrides (everything else is TRL's code, unchanged):

- `_setup_teacher_model`: the frozen/EMA teacher starts from an anchor checkpoint (the stage
  start, the original base model, or any path), optionally mixed with the student:
  teacher = (1 - a) * student + a * anchor, computed in float32; the EMA teacher's weights stay
  float32 whatever the student's dtype (cptlab.train.ema_teacher, the study's precision).
- `_compute_teacher_student_logits`: a seeded Bernoulli keep-mask drops a share of response
  tokens from the distillation loss; also logs the student's entropy (in float32, a few hundred
  positions at a time).
- `compute_loss`: with pure distillation, rollouts without a teacher reprompt carry zero loss, so
  student and teacher are forwarded on the reprompted rows only (same loss and gradient).
- the teacher-context builder: the verifier's feedback on a failed rollout (on any rollout, with
  `environment_feedback_on_success`) reaches the teacher prompt through TRL's
  `privileged_context` channel; a demonstration loses the study's unopened reasoning and the
  training benchmark's own reasoning format with its `<think>` blocks.
- `_save_checkpoint` / `_load_optimizer_and_scheduler`: the teacher's state (its kind's
  `state_file` in cptlab.train.teachers: the EMA teacher's float32 weights) is part of the
  trainer checkpoint, so a resumed run continues the same teacher.
- the trust-region teacher: teacher logits = lerp(reference, student, mix) on the teacher's input.
- `_generate_vllm` / `sample_rollouts` / `_compute_self_distillation_loss`: the rollout
  importance weight of vLLM rollouts (TRL's GRPO keys and modes) multiplies the per-token
  distillation loss, as in the study's SDPO loss; the full-logit divergence is computed at the
  positions the loss keeps only, not at every padded position (the same loss).
- `_compute_rollout_logps` and the rollout weights' log-probabilities: forwards of
  `log_prob_batch_size` rows through TRL's fused LM head (GRPO's), never the whole rollout batch
  and its full-vocabulary logits at once (TRL's: about 80 GB at the paper's sizes).
- `_generate_transformers`: with `compact_generation`, rollouts sampled with each distinct
  prompt prefilled once and finished rows dropped (cptlab.train.compact_generation).
- teacher prompts longer than `max_reprompt_len` are cut on a chosen side (TRL keeps the end).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass

import torch
from accelerate.utils import is_peft_model
from trl.experimental.sdpo import SDPOConfig, SDPOTrainer
from trl.experimental.sdpo.loss_utils import (
    apply_importance_sampling_clipping,
    compute_full_logit_self_distillation_loss,
    compute_sampled_token_self_distillation_loss,
    compute_topk_self_distillation_loss,
)
from trl.experimental.sdpo.sdpo_trainer import SuccessfulRolloutTeacherContextBuilder
from trl.models import prepare_deepspeed, prepare_fsdp
from trl.trainer.utils import (
    add_fused_lm_head,
    create_model_from_path,
    get_config_model_id,
    pad,
    selective_log_softmax,
)

from cptlab.errors import InputError
from cptlab.teacher_prompt import TEACHER_TEMPLATES, strip_reasoning, strip_unopened_thinking
from cptlab.train.distributed import gathered_parameters
from cptlab.train.ema_teacher import EMATeacher, float32_start, move_towards, write_rounded
from cptlab.train.mixin import StageRecorder, StageTrainerMixin
from cptlab.train.rollout_is import MODES, rollout_is_weights, sampling_logps
from cptlab.train.settings import SDPOSettings
from cptlab.train.shared_prompt import completion_logits
from cptlab.train.teachers import TEACHER_KINDS, TeacherKind, trl_teacher
from cptlab.train.vllm_sync import adapt_weight_sync

TRUNCATION_SIDES = ("left", "right", "error")


@dataclass
class CptSDPOConfig(SDPOConfig):
    r"""
    [`SDPOConfig`] plus the study's teacher, masking and speed options.

    Parameters:
        teacher_anchor_path (`str`, *optional*):
            Checkpoint the frozen (`teacher_model_kind="base"`) or EMA teacher starts from.
            `None` (default) uses the student's own starting checkpoint
            (`model.config._name_or_path`), i.e. the stage start. Pass the original base model
            to anchor the teacher there in every stage.
        teacher_anchor_mix (`float`, *optional*, defaults to `1.0`):
            Initial teacher = `(1 - teacher_anchor_mix) * student + teacher_anchor_mix * anchor`.
            `1.0` is the anchor itself; ignored when the anchor is the stage start (the mix is
            the student either way).
        distillation_token_mask_ratio (`float`, *optional*, defaults to `0.0`):
            Share of response tokens dropped at random from the distillation loss (a Bernoulli
            keep-mask with probability `1 - ratio`, seeded from `seed`, the optimizer step and
            the micro-batch, so it is the same on resume). Must be in `[0, 1)`.
        feedback_from_reward (`bool`, *optional*, defaults to `True`):
            With `include_environment_feedback=True`, take each failed rollout's feedback from
            the reward function (any reward function with a `feedback_for_last()` method, e.g.
            `cptlab.train.rewards.VerifierReward`) instead of a dataset `privileged_context`
            column (which, when present, wins). Successful rollouts get no feedback unless
            `environment_feedback_on_success`.
        environment_feedback_on_success (`bool`, *optional*, defaults to `False`):
            Give every rollout its feedback, a successful one (reward at or above
            `success_reward_threshold`) too, as the study does (verl/trainer/ppo/ray_trainer.py
            `_collect_feedback`). Its verifiers give a success feedback only for a truncated
            math answer; cptlab's strict verifiers say "Correct.", which this would show.
        skip_inactive_rows (`bool`, *optional*, defaults to `True`):
            With `distillation_weight=1.0`, forward the student and the teacher only on rollouts
            whose teacher prompt was reprompted; the others have zero loss. The loss is rescaled
            to equal TRL's mean over all rows. When no row is reprompted, one row is forwarded
            for a zero loss (zero gradients, as in TRL).
        log_entropy (`bool`, *optional*, defaults to `True`):
            Log the mean entropy of the student's next-token distribution over the forwarded
            completion tokens (`entropy`; with `skip_inactive_rows`, over the reprompted rows).
        teacher_trust_region_mix (`float`, *optional*):
            With a frozen teacher (`teacher_model_kind="base"`), the trust-region teacher of the
            SDPO reference: its logits are `lerp(reference, student, mix)`, both models run on the
            teacher's input, the student without gradient. `None` (default): off.
        remove_unopened_thinking (`bool`, *optional*, defaults to `False`):
            With `remove_thinking_from_demonstration`, also delete a demonstration's text up to a
            first `</think>` that has no opening tag (the study's second rule; TRL has only the
            first, matched pairs).
        demonstration_reasoning (`str`, *optional*):
            With `remove_thinking_from_demonstration`, also delete this regular expression's
            matches from a demonstration: the training benchmark's reasoning
            (`Benchmark.reasoning`, e.g. `<reasoning>...</reasoning>` before an embedded science
            answer), for formats that reason outside `<think>` blocks. `None` (default): only
            the `<think>` rules, as in TRL and the study.
        reprompt_truncation (`str`, *optional*, defaults to `"left"`):
            How a teacher prompt longer than `max_reprompt_len` tokens is cut: `"left"` keeps its
            last tokens (TRL's behaviour), `"right"` its first (the study's), `"error"` raises.
        vllm_importance_sampling_correction (`bool`, *optional*, defaults to `True`):
            With vLLM rollouts, multiply the per-token distillation loss by the rollout
            importance weight p_train / p_vllm (the keys and modes of TRL's `GRPOConfig`).
        vllm_importance_sampling_mode (`str`, *optional*, defaults to `"sequence_mask"`):
            `token_truncate`, `token_mask`, `sequence_truncate` or `sequence_mask`, as in TRL.
        vllm_importance_sampling_clip_max (`float`, *optional*, defaults to `3.0`):
            Upper bound of the weight (clamped, or masked above, by the mode).
        vllm_importance_sampling_clip_min (`float`, *optional*):
            Lower bound of the weight (`None`: none).
    """

    teacher_anchor_path: str | None = None
    teacher_anchor_mix: float = 1.0
    distillation_token_mask_ratio: float = 0.0
    feedback_from_reward: bool = True
    environment_feedback_on_success: bool = False
    skip_inactive_rows: bool = True
    log_entropy: bool = True
    teacher_trust_region_mix: float | None = None
    remove_unopened_thinking: bool = False
    demonstration_reasoning: str | None = None
    reprompt_truncation: str = "left"
    vllm_importance_sampling_correction: bool = True
    vllm_importance_sampling_mode: str = "sequence_mask"
    vllm_importance_sampling_clip_max: float | None = 3.0
    vllm_importance_sampling_clip_min: float | None = None

    def __post_init__(self):
        super().__post_init__()
        if self.reprompt_truncation not in TRUNCATION_SIDES:
            raise ValueError(
                f"`reprompt_truncation` must be one of {TRUNCATION_SIDES}, "
                f"got {self.reprompt_truncation!r}."
            )
        if self.vllm_importance_sampling_mode not in MODES:
            raise ValueError(
                f"`vllm_importance_sampling_mode` must be one of {MODES}, "
                f"got {self.vllm_importance_sampling_mode!r}."
            )
        if self.teacher_trust_region_mix is not None and not (
            0.0 <= self.teacher_trust_region_mix <= 1.0
        ):
            raise ValueError(
                "`teacher_trust_region_mix` must be in [0, 1], "
                f"got {self.teacher_trust_region_mix}."
            )
        if not 0.0 <= self.teacher_anchor_mix <= 1.0:
            raise ValueError(
                f"`teacher_anchor_mix` must be in [0, 1], got {self.teacher_anchor_mix}."
            )
        if not 0.0 <= self.distillation_token_mask_ratio < 1.0:
            raise ValueError(
                "`distillation_token_mask_ratio` must be in [0, 1), got "
                f"{self.distillation_token_mask_ratio}."
            )
        teacher = self.teacher  # raises for a trust region on a kind without one
        if not teacher.anchored and (
            self.teacher_anchor_path is not None or self.teacher_anchor_mix != 1.0
        ):
            raise ValueError(
                f"A {teacher.name} teacher is {teacher.summary}: it takes no anchor or anchor mix."
            )

    @property
    def teacher(self) -> TeacherKind:
        """The teacher kind this config runs (cptlab.train.teachers): TRL's
        `teacher_model_kind`, with the trust region when `teacher_trust_region_mix` is set."""
        return trl_teacher(self.teacher_model_kind, self.teacher_trust_region_mix is not None)


class VerifierFeedbackContextBuilder(SuccessfulRolloutTeacherContextBuilder):
    """TRL's teacher-context builder, fed with the reward function's feedback on failed rollouts
    (on every rollout with `environment_feedback_on_success`).

    TRL reads environment feedback from a dataset column (`privileged_context`) fixed before the
    rollout; the verifier's feedback exists only after scoring. This builder swaps it in.
    """

    def build(self, output, prompts, rewards, feedbacks=None):
        trainer = self.trainer
        args = trainer.args
        if args.include_environment_feedback and args.feedback_from_reward:
            verdict_feedback = trainer.reward_feedback()
            if verdict_feedback is not None and len(verdict_feedback) == len(prompts):
                local = rewards.detach().float().cpu().tolist()
                given = feedbacks or [None] * len(prompts)
                feedbacks = [
                    (given[i] or verdict_feedback[i])
                    if args.environment_feedback_on_success
                    or local[i] < args.success_reward_threshold
                    else None
                    for i in range(len(prompts))
                ]
        return super().build(output, prompts, rewards, feedbacks)

    def _build_reprompt_text(self, prompt_text, solution_text, feedback_text):
        args = self.trainer.args
        if (
            solution_text
            and args.remove_thinking_from_demonstration
            and (args.remove_unopened_thinking or args.demonstration_reasoning)
        ):
            # TRL has removed matched pairs; the demonstration sits inside its template.
            head, tail = args.solution_template.split("{successful_previous_attempt}")
            demo = solution_text[len(head) : len(solution_text) - len(tail)]
            if args.remove_unopened_thinking:
                demo = strip_unopened_thinking(demo)
            if args.demonstration_reasoning:
                demo = strip_reasoning(demo, args.demonstration_reasoning)
            solution_text = head + demo + tail
        return super()._build_reprompt_text(prompt_text, solution_text, feedback_text)

    def _tokenize_teacher_messages(self, teacher_messages_list):
        # Rollouts of a group mostly share one demonstration, hence one teacher prompt: render
        # and tokenize each distinct prompt once (TRL templates every rollout's separately).
        keys = [json.dumps(m, sort_keys=True, default=str) for m in teacher_messages_list]
        first: dict[str, int] = {}
        for i, key in enumerate(keys):
            first.setdefault(key, i)
        unique = list(first)
        trainer = self.trainer
        limit, side = trainer.args.max_reprompt_len, trainer.args.reprompt_truncation
        ids_list = trainer._tokenize_prompts_untruncated(
            [teacher_messages_list[first[k]] for k in unique]
        )
        for i, ids in enumerate(ids_list):
            if len(ids) > limit:
                if side == "error":
                    raise InputError(
                        f"a teacher prompt has {len(ids)} tokens, over max_reprompt_len {limit}"
                    )
                ids_list[i] = ids[-limit:] if side == "left" else ids[:limit]
        device = trainer.accelerator.device
        ids = [torch.as_tensor(x, device=device) for x in ids_list]
        masks = [torch.ones(len(x), dtype=torch.long, device=device) for x in ids]
        pad_id = trainer._tokenizer.pad_token_id
        rows = torch.tensor([unique.index(k) for k in keys], device=device)
        return {
            "prompt_ids": pad(ids, padding_value=pad_id, padding_side="left").index_select(0, rows),
            "prompt_mask": pad(masks, padding_value=0, padding_side="left").index_select(0, rows),
        }


# Positions per float32 chunk of the entropy: 156 MB of logits at Qwen3's 151,936 tokens, where
# one row of 8,192 positions would be 5 GB, three times over (its log-softmax and their product).
ENTROPY_POSITIONS = 256


@torch.no_grad()
def mean_entropy(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The mean entropy, in float32, of the next-token distributions at the positions `mask`
    keeps, computed ENTROPY_POSITIONS positions at a time."""
    flat, keep = logits.reshape(-1, logits.size(-1)), mask.reshape(-1)
    total = torch.zeros((), device=logits.device)
    for start in range(0, len(flat), ENTROPY_POSITIONS):
        logp = torch.log_softmax(flat[start : start + ENTROPY_POSITIONS].float(), dim=-1)
        entropy = -(logp.exp() * logp).sum(-1)
        total += (entropy * keep[start : start + ENTROPY_POSITIONS]).sum()
    return total / keep.sum().clamp(min=1.0)


def _mask_seed(*parts: int) -> int:
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


class CptSDPOTrainer(StageTrainerMixin, SDPOTrainer):
    """TRL's experimental `SDPOTrainer` with the study's teacher anchor and mix, random token
    masking, verifier feedback in the teacher prompt, a resumable EMA teacher and a cheaper loss
    on batches with few reprompts.

    Parameters:
        *args, **kwargs: passed to `trl.experimental.sdpo.SDPOTrainer` (model, reward_funcs,
            args (a `CptSDPOConfig`), train_dataset, processing_class, callbacks, ...).
        recorder (`StageRecorder`): where the per-step log line goes and what it measures
            (reward/reason statistics, collapse monitor, KL probe); see `cptlab.train.mixin`.
        shared_prompt_forward (`bool`, *optional*, defaults to `False`): compute the student's
            and the teacher's logits with each distinct prompt forwarded once and rows of
            similar completion length together (`cptlab.train.shared_prompt`); equal to TRL's
            up to float rounding.
        compact_generation (`bool`, *optional*, defaults to `False`): sample HF-generated
            rollouts with each distinct prompt prefilled once and finished rows dropped from the
            decode batch (`cptlab.train.compact_generation`); the same distribution as
            `generate`, other draws.
        log_prob_batch_size (`int`, *optional*): rows per forward of the rollout batch's
            log-probabilities without gradient, the rollout weights' and the old ones
            (`training.log_prob_micro_batch_size_per_device`; None: the micro-batch).
    """

    ema_teacher: EMATeacher | None = None  # the EMA kind's update and state

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
        super().__init__(*args, **kwargs)
        self.check_compact_generation()
        if not isinstance(self.args, CptSDPOConfig):
            raise TypeError(f"CptSDPOTrainer needs a CptSDPOConfig, got {type(self.args).__name__}")
        self.teacher_context_builder = VerifierFeedbackContextBuilder(self)
        # `model(..., labels=..., fused_lm_head=True)` gives the log-probabilities of the
        # labels without the full logits, as in TRL's GRPOTrainer; other calls are unchanged.
        add_fused_lm_head(
            self.model.get_base_model() if is_peft_model(self.model) else self.model,
            temperature=self.temperature,
        )
        if self.use_vllm:
            # TRL builds SDPO's vLLM generation with logprobs=None, and vLLM then returns none;
            # the rollout importance weights need the sampled tokens' (GRPO's generation asks
            # for them the same way: logprobs=0).
            self.vllm_generation.logprobs = 0
        adapt_weight_sync(self)

    # ----- teacher ----------------------------------------------------------------------------

    def _setup_teacher_model(self) -> None:
        args = self.args
        anchored = args.teacher_anchor_path is not None or args.teacher_anchor_mix != 1.0
        if not args.teacher.anchored or is_peft_model(self.model):
            if anchored:
                raise ValueError(
                    "teacher anchor/mix needs a frozen or EMA teacher on a non-PEFT model"
                )
            return super()._setup_teacher_model()
        student = self.model
        anchor = args.teacher_anchor_path or get_config_model_id(student.config)
        init = dict(args.model_init_kwargs or {})
        if args.distributed_state.distributed_type in ["MULTI_GPU", "DEEPSPEED"]:
            init["device_map"] = None
        init.setdefault("trust_remote_code", args.trust_remote_code)
        init.setdefault("dtype", student.dtype)
        init.setdefault("attn_implementation", student.config._attn_implementation)
        teacher = create_model_from_path(anchor, **init)
        student_shapes = [tuple(p.shape) for p in student.parameters()]
        teacher_shapes = [tuple(p.shape) for p in teacher.parameters()]
        if student_shapes != teacher_shapes and not self.is_deepspeed_enabled:
            raise InputError(f"teacher anchor {anchor} does not have the student's architecture")
        if not self.is_deepspeed_enabled and not self.is_fsdp_enabled:
            teacher.to(next(student.parameters()).device)
        mixed = args.teacher_anchor_path is not None and args.teacher_anchor_mix < 1.0
        ema = args.teacher_model_kind == "ema"
        start = None  # the teacher's starting weights in float32
        if mixed or ema:
            start = float32_start(
                teacher, lambda: create_model_from_path(anchor, **{**init, "dtype": torch.float32})
            )
        if mixed:
            # anchor <- (1 - alpha) * anchor + alpha * student, rounded once into the teacher
            params = list(teacher.parameters())
            with gathered_parameters([*student.parameters(), *params], modifier_rank=0):
                move_towards(start, student.parameters(), 1.0 - args.teacher_anchor_mix)
                write_rounded(params, start)
        teacher.requires_grad_(False)
        teacher.eval()
        if self.is_deepspeed_enabled:
            teacher = prepare_deepspeed(teacher, self.accelerator)
        elif self.is_fsdp_enabled:
            teacher = prepare_fsdp(teacher, self.accelerator)
        else:
            teacher = self.accelerator.prepare_model(teacher, evaluation_mode=True)
        self.teacher_model = teacher
        self.teacher_anchor = anchor
        if ema:  # in place of TRL's SyncTeacherModelCallback
            # A teacher that holds another dtype than float32 (bf16, or cast by DeepSpeed's
            # mixed precision) runs its forward on the rounding of float32 weights kept aside.
            dtype = next(self.accelerator.unwrap_model(teacher).parameters()).dtype
            weights = start if dtype != torch.float32 else None
            self.ema_teacher = EMATeacher(teacher, self.accelerator, weights)
            self.add_callback(self.ema_teacher)

    def teacher_parameters(self) -> list[torch.nn.Parameter]:
        return list(self.accelerator.unwrap_model(self.teacher_model).parameters())

    def _save_checkpoint(self, model, trial):
        state_file = self.args.teacher.state_file
        if state_file is not None and self.teacher_model is not self.model:
            folder = os.path.join(
                self._get_output_dir(trial=trial), f"checkpoint-{self.state.global_step}"
            )
            state = self.ema_teacher.state()
            if self.args.should_save:
                os.makedirs(folder, exist_ok=True)
                torch.save(state, os.path.join(folder, state_file))
        super()._save_checkpoint(model, trial)  # writes trainer_state.json last

    def _load_optimizer_and_scheduler(self, checkpoint):
        super()._load_optimizer_and_scheduler(checkpoint)
        teacher = self.args.teacher
        if checkpoint is None or teacher.state_file is None or self.teacher_model is self.model:
            return
        path = os.path.join(checkpoint, teacher.state_file)
        if not os.path.exists(path):
            raise FileNotFoundError(
                f"{checkpoint}: no {teacher.state_file}; cannot resume the {teacher.name} teacher"
            )
        self.ema_teacher.load(torch.load(path, map_location="cpu", weights_only=True))

    # ----- environment feedback ---------------------------------------------------------------

    def reward_feedback(self) -> list[str | None] | None:
        """Feedback on the last scored rollouts from the first reward function that offers it."""
        for func in self.reward_funcs:
            getter = getattr(func, "feedback_for_last", None)
            if callable(getter):
                return getter()
        return None

    # ----- loss -------------------------------------------------------------------------------

    def _forward_logits(self, model, input_ids, attention_mask, logits_to_keep):
        if self.shares_prompts(model):
            return completion_logits(
                model,
                input_ids,
                attention_mask,
                logits_to_keep,
                self.temperature,
                self.prompt_forward_groups(),
            )
        return super()._forward_logits(model, input_ids, attention_mask, logits_to_keep)

    def _compute_teacher_student_logits(self, model, teacher_model, inputs):
        out = super()._compute_teacher_student_logits(model, teacher_model, inputs)
        mode = "train" if self.model.training else "eval"
        mix = self.args.teacher_trust_region_mix
        if mix is not None:
            # The reference's logits pulled towards the student's, both on the teacher's input.
            with torch.no_grad():
                student_as_teacher = self._forward_logits(
                    model,
                    inputs["teacher_input_ids"],
                    inputs["teacher_attention_mask"],
                    inputs["completion_ids"].size(1),
                )
            out.teacher_logits = torch.lerp(
                out.teacher_logits, student_as_teacher.to(out.teacher_logits.dtype), mix
            )
        ratio = self.args.distillation_token_mask_ratio
        if ratio > 0 and self.model.training:
            micro = self._step % self.args.gradient_accumulation_steps
            seed = _mask_seed(
                self.args.seed, self.state.global_step, micro, self.accelerator.process_index
            )
            generator = torch.Generator(device="cpu").manual_seed(seed)
            keep = torch.rand(out.loss_mask.shape, generator=generator) >= ratio
            eligible = out.loss_mask.sum()
            out.loss_mask = out.loss_mask * keep.to(out.loss_mask.device, out.loss_mask.dtype)
            if eligible > 0:
                kept = float(out.loss_mask.sum() / eligible)
                self._metrics[mode]["self_distillation/token_mask_kept_fraction"].append(kept)
        if self.args.log_entropy:
            value = mean_entropy(out.student_logits, out.completion_mask)
            self._metrics[mode]["entropy"].append(self.accelerator.gather(value).mean().item())
        return out

    # ----- rollouts ----------------------------------------------------------------------------

    def _generate_transformers(self, prompt_ids):
        if self.samples_compactly():
            return prompt_ids, self.compact_rollouts(prompt_ids)
        return super()._generate_transformers(prompt_ids)

    # ----- rollout importance sampling (vLLM) --------------------------------------------------

    def _generate_vllm(self, prompt_ids):
        # TRL's, keeping the sampled tokens' log-probabilities for the rollout weights.
        if self.state.global_step != self._last_loaded_step:
            self.vllm_generation.sync_weights()
            self._last_loaded_step = self.state.global_step
        mode = "train" if self.model.training else "eval"
        num_generations = self.num_generations if mode == "train" else self.num_generations_eval
        prompt_ids_out, completion_ids_list, logprobs, _ = self.vllm_generation.generate(
            prompts=prompt_ids, images=None, num_generations=num_generations
        )
        self._rollout_logps = None if logprobs is None else sampling_logps(logprobs)
        return prompt_ids_out, completion_ids_list

    def sample_rollouts(self, inputs):
        self._rollout_logps = None
        batch = super().sample_rollouts(inputs)
        if self.use_vllm and self.args.vllm_importance_sampling_correction:
            if self._rollout_logps is None:
                raise RuntimeError("vLLM returned no log-probabilities for the rollout weights")
            batch["rollout_is_weights"] = self._rollout_weights(batch, self._rollout_logps)
        return batch

    def _compute_rollout_logps(self, prompt_ids, prompt_mask, completion_ids, completion_mask):
        # TRL's condition: old log-probabilities when a rollout batch makes several updates.
        generate_every = self.args.steps_per_generation * self.num_iterations
        if self.args.gradient_accumulation_steps % generate_every == 0:
            return None
        return self.completion_logps(prompt_ids, prompt_mask, completion_ids, completion_mask)

    @torch.no_grad()
    def completion_logps(
        self,
        prompt_ids: torch.Tensor,
        prompt_mask: torch.Tensor,
        completion_ids: torch.Tensor,
        completion_mask: torch.Tensor,
    ) -> torch.Tensor:
        """The training model's temperature-scaled log-probability of each completion token
        (padding positions hold no value to use), without gradient, in forwards of
        `log_prob_batch_size` rows.

        The log-probabilities come from TRL's fused LM head, tile by tile, without the
        (rows, tokens, vocabulary) logits; the shared-prompt forward, which materialises them,
        is for small vocabularies."""
        rows = self.log_prob_batch_size or self.args.per_device_train_batch_size
        input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
        attention_mask = torch.cat([prompt_mask, completion_mask], dim=1)
        width = completion_ids.size(1)
        pieces = []
        for start in range(0, len(input_ids), rows):
            ids, mask = input_ids[start : start + rows], attention_mask[start : start + rows]
            if self.shares_prompts(self.model):
                logits = self._forward_logits(self.model, ids, mask, width)
                pieces.append(selective_log_softmax(logits, ids[:, -width:]))
                continue
            labels = ids.masked_fill(mask == 0, -100)
            labels[:, :-width] = -100
            with self.accelerator.autocast():
                out = self.model(
                    input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True
                )
            pieces.append(out.log_probs[:, -width:])
        return torch.cat(pieces)

    def _rollout_weights(self, batch, rollout_logps: list[list[float]]) -> torch.Tensor:
        """The batch's rollout importance weights, from the training model before the update
        (TRL's old log-probs when updates are off-policy, else a no-grad forward now)."""
        completion_ids, mask = batch["completion_ids"], batch["completion_mask"]
        train_logps = batch.get("old_per_token_logps")
        if train_logps is None:
            train_logps = self.completion_logps(
                batch["prompt_ids"], batch["prompt_mask"], completion_ids, mask
            )
        width = completion_ids.size(1)
        rollout = torch.full_like(train_logps, float("nan"))
        for i, row in enumerate(rollout_logps):
            row = row[:width]
            rollout[i, : len(row)] = torch.tensor(row, dtype=rollout.dtype)
        args = self.args
        weights = rollout_is_weights(
            train_logps.float(),
            rollout.float(),
            mask,
            args.vllm_importance_sampling_mode,
            args.vllm_importance_sampling_clip_min,
            args.vllm_importance_sampling_clip_max,
        )
        shown = weights.expand_as(mask)[mask.bool()]
        if shown.numel():
            self._metrics["train"]["sampling/importance_sampling_ratio/mean"].append(
                self.accelerator.gather(shown.mean()).mean().item()
            )
        return weights

    def _compute_self_distillation_loss(self, model, inputs, distillation_logits):
        weights = inputs.get("rollout_is_weights")
        logits = distillation_logits
        args = self.args
        if logits.loss_mask.sum() == 0 or (
            weights is None and args.distillation_mode != "full_logits"
        ):
            return super()._compute_self_distillation_loss(model, inputs, distillation_logits)
        # TRL's loss, with two changes: the rollout weight multiplied into each token's loss
        # (verl's SDPO loss: after its own is_clip ratio, before the per-sequence token mean),
        # and the full-logit divergence computed at the positions the loss keeps only (TRL
        # computes it over every padded position too, then masks it).
        if args.distillation_mode == "topk_logits":
            per_token = compute_topk_self_distillation_loss(
                logits.student_logits,
                logits.teacher_logits,
                distillation_topk=args.distillation_topk,
                distillation_alpha=args.distillation_alpha,
                distillation_add_tail=args.distillation_add_tail,
            )
        elif args.distillation_mode == "full_logits":
            kept = logits.loss_mask > 0
            per_token = logits.student_logits.new_zeros(kept.shape)
            per_token = per_token.masked_scatter(
                kept,
                compute_full_logit_self_distillation_loss(
                    logits.student_logits[kept],
                    logits.teacher_logits[kept],
                    distillation_alpha=args.distillation_alpha,
                ).to(per_token.dtype),
            )
        else:
            per_token = compute_sampled_token_self_distillation_loss(
                logits.student_logits,
                logits.teacher_logits,
                logits.completion_ids,
                distillation_alpha=args.distillation_alpha,
            )
        old = inputs.get("old_per_token_logps")
        if args.distillation_is_clip is not None and old is not None:
            student = selective_log_softmax(logits.student_logits, logits.completion_ids)
            per_token = apply_importance_sampling_clipping(
                per_token, student, old, args.distillation_is_clip
            )
        if weights is not None:
            per_token = per_token * weights.to(per_token.dtype)
        mask = logits.loss_mask
        loss = ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
        mode = "train" if model.training else "eval"
        mean = (per_token * mask).sum() / mask.sum().clamp(min=1.0)
        self._log_self_distillation_metric(mode, self.accelerator.gather(mean).mean().item())
        return loss

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        args = self.args
        if (
            return_outputs
            or not args.skip_inactive_rows
            or args.distillation_weight != 1.0
            or self.use_teacher_server
            or inputs.get("self_distillation_mask") is None
        ):
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        mode = "train" if self.model.training else "eval"
        rows = inputs["self_distillation_mask"].numel()
        active = (inputs["self_distillation_mask"] > 0) & (inputs["completion_mask"].sum(dim=1) > 0)
        index = active.nonzero(as_tuple=True)[0]
        self._metrics[mode]["self_distillation/active_row_fraction"].append(
            len(index) / max(rows, 1)
        )
        if len(index) == 0:
            # Nothing to distil: a one-row forward gives the zero loss (and zero gradients) that
            # TRL gets from the whole batch, keeping every parameter in the graph (DDP).
            one = _subset_rows(inputs, torch.zeros(1, dtype=torch.long, device=active.device))
            logits = self._forward_logits(
                model,
                torch.cat([one["prompt_ids"], one["completion_ids"]], dim=1),
                torch.cat([one["prompt_mask"], one["completion_mask"]], dim=1),
                one["completion_ids"].size(1),
            )
            self._log_self_distillation_metric(mode, 0.0)
            loss = logits.sum() * 0.0
        else:
            subset = _subset_rows(inputs, index)
            logits = self._compute_teacher_student_logits(model, self.teacher_model, subset)
            loss = self._compute_self_distillation_loss(model, subset, logits) * (len(index) / rows)
        scale = self.current_gradient_accumulation_steps if self.model.training else 1.0
        return loss / scale


def _subset_rows(inputs: dict, index: torch.Tensor) -> dict:
    """The batch restricted to `index` rows, with padding columns no kept row needs removed.

    Prompts (student and teacher) are left-padded and completions right-padded; the teacher
    sequence is its prompt followed by the same completion columns as the student's.
    """
    rows = inputs["completion_ids"].size(0)
    out = {
        key: value.index_select(0, index)
        if isinstance(value, torch.Tensor) and value.dim() >= 1 and value.size(0) == rows
        else value
        for key, value in inputs.items()
    }
    width = inputs["completion_ids"].size(1)
    used_c = out["completion_mask"].sum(dim=0).nonzero()
    keep_c = int(used_c.max().item()) + 1 if len(used_c) else 1
    prompt_used = out["prompt_mask"].sum(dim=0).nonzero()
    start_p = int(prompt_used.min().item()) if len(prompt_used) else 0
    out["prompt_ids"] = out["prompt_ids"][:, start_p:]
    out["prompt_mask"] = out["prompt_mask"][:, start_p:]
    for key in ("completion_ids", "completion_mask", "old_per_token_logps", "rollout_is_weights"):
        if isinstance(out.get(key), torch.Tensor):
            out[key] = out[key][:, :keep_c]
    if "teacher_input_ids" in out:
        t_ids, t_mask = out["teacher_input_ids"], out["teacher_attention_mask"]
        t_prompt = t_mask.size(1) - width
        used = t_mask[:, :t_prompt].sum(dim=0).nonzero()
        start_t = int(used.min().item()) if len(used) else 0
        out["teacher_input_ids"] = t_ids[:, start_t : t_prompt + keep_c]
        out["teacher_attention_mask"] = t_mask[:, start_t : t_prompt + keep_c]
    return out


# Method keys that are not CptSDPOConfig fields of the same name (every other key is one: TRL's
# SDPOConfig/GRPOConfig field, or cptlab's addition, so TRL's documentation applies to it).
RESOLVED_KEYS = ("teacher_model_kind", "teacher_anchor", "teacher_trust_region_mix",
                 "teacher_templates", "updates_per_generation")  # fmt: skip


def sdpo_args(
    params: SDPOSettings, common: dict, anchor_path: str | None, reasoning: str | None = None
) -> CptSDPOConfig:
    """A CptSDPOConfig from the method's params, the shared keys, the resolved anchor and the
    training benchmark's reasoning pattern."""
    reprompt, solution, feedback = TEACHER_TEMPLATES[params.teacher_templates]
    teacher = TEACHER_KINDS[params.teacher_model_kind]
    return CptSDPOConfig(
        **common,
        **params.trl_fields(RESOLVED_KEYS),
        teacher_model_kind=teacher.trl_kind,
        teacher_anchor_path=anchor_path,
        teacher_trust_region_mix=params.teacher_trust_region_mix if teacher.trust_region else None,
        # the study's templates come with its demonstration cleaning (its second thinking rule)
        remove_unopened_thinking=params.teacher_templates == "study",
        demonstration_reasoning=reasoning,
        feedback_from_reward=True,
        reprompt_template=reprompt,
        solution_template=solution,
        feedback_template=feedback,
    )
