"""The training settings as frozen dataclasses, TRL style: the config's `training` section
(`TrainingSettings`) and each trainer's method entry (`GRPOSettings`, `SDPOSettings`,
`SFTSettings`). Their defaults are the only ones in the code; the schema's `default:`s
(cptlab/schemas/config.schema.yaml) are tested equal to them. cptlab.train.spec fills and checks
them from a config; every other module reads them by attribute.

`as_dict()` gives a section as the stage's provenance records it (fingerprint, manifest, the
workflow's rerun triggers): the fields in declaration order, nested sections as dicts."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from cptlab.config import merge
from cptlab.train.teachers import ANCHOR_STAGE_START


class SettingsSection:
    """What every settings dataclass of this module offers."""

    @classmethod
    def names(cls) -> list[str]:
        """The section's keys, in declaration order."""
        return [f.name for f in fields(cls)]

    def as_dict(self) -> dict[str, Any]:
        """The section as its provenance records it (nested sections as dicts)."""
        return asdict(self)


@dataclass(frozen=True)
class KLProbeSettings(SettingsSection):
    """`training.kl_probe`: the KL to the stage start, estimated on a fixed probe (completions
    sampled once from the start model, rescored by the current model with the k3 estimator; no
    second model in memory). cptlab.train.probe.

    Parameters:
        prompts (`int`, *optional*, defaults to `8`):
            Probe prompts (0 disables the probe).
        max_tokens (`int`, *optional*, defaults to `128`):
            Probe completion tokens (at most `max_completion_length`).
        every (`int`, *optional*, defaults to `1`):
            Measure every N steps.
    """

    prompts: int = 8
    max_tokens: int = 128
    every: int = 1


@dataclass(frozen=True)
class CollapseSettings(SettingsSection):
    """`training.collapse`: the collapse monitor over each step's completions and verdicts
    (cptlab.train.monitor).

    Parameters:
        ngram (`int`, *optional*, defaults to `4`):
            n of the token n-grams.
        format_tokens (`dict[str, str]`, *optional*, defaults to `{"boxed": "\\boxed"}`):
            Name -> literal text counted per completion.
        thresholds (`dict[str, float]`, *optional*):
            Metric -> alarm level (alarm when the metric exceeds it); metrics:
            format_violation_rate, top_ngram_share, repeated_ngram_share,
            duplicate_completion_share, format/<name>/repeated_share,
            format/<name>/per_completion. Defaults to repeated_ngram_share 0.6, top_ngram_share
            0.5 and format/boxed/repeated_share 0.5. A config's mapping replaces it whole
            (cptlab.config.REPLACED_MAPPINGS).
        patience (`int`, *optional*, defaults to `2`):
            Consecutive alarming steps before acting.
        action (`str`, *optional*, defaults to `"warn"`):
            `warn` logs a warning; `stop` ends the stage and outputs the last checkpoint saved
            before the first alarming step (status `stopped` in the manifest); `error` fails the
            job.
    """

    ngram: int = 4
    format_tokens: dict[str, str] = field(default_factory=lambda: {"boxed": "\\boxed"})
    thresholds: dict[str, float] = field(
        default_factory=lambda: {
            "repeated_ngram_share": 0.6,
            "top_ngram_share": 0.5,
            "format/boxed/repeated_share": 0.5,
        }
    )
    patience: int = 2
    action: str = "warn"


@dataclass(frozen=True)
class TrainingSettings(SettingsSection):
    """The `training` section: hyper-parameters shared by every method and stage (one stage =
    one domain); a method's `training` mapping overrides them for that method.

    Parameters:
        steps (`int`, *optional*, defaults to `50`):
            Rollout batches per stage (each makes the method's `updates_per_generation`
            optimizer updates).
        domain_steps (`dict[str, int]`, *optional*, defaults to `{}`):
            Per-domain step counts that override `steps`, e.g. `{code: 20}`.
        prompts_per_step (`int`, *optional*, defaults to `32`):
            Prompts per step.
        num_generations (`int`, *optional*, defaults to `8`):
            Rollouts per prompt.
        per_device_train_batch_size (`int` or `None`, *optional*, defaults to `None`):
            Completions per forward/backward per device; gradient accumulation covers the rest
            of the step's prompts_per_step * num_generations (None: the whole step at once).
        log_prob_micro_batch_size_per_device (`int` or `None`, *optional*, defaults to `None`):
            Completions per forward of the log-probabilities computed without gradient over a
            rollout batch, per device (verl's `log_prob_micro_batch_size_per_gpu`): GRPO's old
            and reference log-probabilities, SDPO's rollout importance weights and old
            log-probabilities, the KL probe. None: per_device_train_batch_size's micro-batch.
        learning_rate (`float`, *optional*, defaults to `1e-5`):
            Peak learning rate.
        lr_scheduler_type (`str`, *optional*, defaults to `"constant_with_warmup"`):
            transformers scheduler name.
        warmup_steps (`int`, *optional*, defaults to `10`):
            Learning-rate warm-up, linear from 0, in the unit `lr_schedule_per` counts.
        lr_schedule_per (`str`, *optional*, defaults to `"rollout_batch"`):
            What the learning-rate schedule (its warm-up and length) counts. `rollout_batch`
            (verl's): every update of rollout batch k trains at learning_rate x schedule(k).
            `optimizer_update` (TRL's): the schedule advances at every update, so with
            updates_per_generation U a warm-up of W ends after W / U rollout batches. The same
            when U is 1.
        weight_decay (`float`, *optional*, defaults to `0.01`):
            AdamW weight decay.
        weight_decay_on (`str`, *optional*, defaults to `"except_biases_and_norms"`):
            The parameters weight_decay applies to: `except_biases_and_norms` (transformers'
            Trainer: not biases or normalisation weights) or `all` (verl's single AdamW
            parameter group).
        max_grad_norm (`float`, *optional*, defaults to `1.0`):
            Gradient clip (0: off).
        max_prompt_length (`int`, *optional*, defaults to `2048`):
            Prompt limit in tokens (longer prompts are dropped, with a warning).
        max_completion_length (`int`, *optional*, defaults to `8192`):
            Completion limit in tokens.
        temperature (`float`, *optional*, defaults to `1.0`):
            Rollout temperature.
        top_p (`float`, *optional*, defaults to `1.0`):
            Rollout nucleus sampling.
        chat_template_kwargs (`dict`, *optional*, defaults to `{}`):
            Passed to apply_chat_template, e.g. `{enable_thinking: false}` for Qwen3.
        save_steps (`int`, *optional*, defaults to `10`):
            Trainer checkpoint every N rollout batches (resuming starts from the last one).
        save_total_limit (`int` or `None`, *optional*, defaults to `2`):
            Trainer checkpoints kept in the state folder (None: all).
        dtype (`str`, *optional*, defaults to `"float32"`):
            dtype of the weights: `float32`, `bfloat16`, `float16` or `auto`.
        attn_implementation (`str` or `None`, *optional*, defaults to `None`):
            e.g. `sdpa` or `flash_attention_2` (None: transformers' choice).
        bf16 (`bool`, *optional*, defaults to `False`):
            bf16 mixed precision (needs a GPU).
        handoff_precision (`str`, *optional*, defaults to `"float32"`):
            The weights a stage hands to the next stage and to the analyses
            (cptlab.train.handoff). `float32`: under DeepSpeed's mixed precision, the fp32
            master weights, saved in fp32, and the next stage's masters start from them, as
            verl's actor keeps fp32 parameters and exports them. `model`: the model's own
            weights (bf16 with dtype bfloat16), the masters dropped, as verl's model merger
            exports bf16. The same weights for a float32 model, and for a bf16 model trained
            without `deepspeed` (no masters exist); the stage manifest's `handed_on` says which.
        gradient_checkpointing (`bool`, *optional*, defaults to `False`):
            Recompute activations in the backward pass (saves memory, costs time).
        deepspeed (`str` or `None`, *optional*, defaults to `None`):
            DeepSpeed JSON config for `accelerate launch` runs.
        use_vllm (`bool`, *optional*, defaults to `False`):
            TRL's vLLM rollouts instead of HF generate.
        vllm_mode (`str`, *optional*, defaults to `"colocate"`):
            `colocate`: vLLM in the training processes; `server`: a separate vLLM server.
        vllm (`dict`, *optional*, defaults to `{}`):
            TRL's vLLM options (their defaults are TRL's; the schema lists them).
        mask_truncated_completions (`bool`, *optional*, defaults to `False`):
            Exclude completions cut at max_completion_length from the loss.
        reward_workers (`int`, *optional*, defaults to `1`):
            Threads that score each training process's completions in parallel. Every verifier
            gives the verdict it gives with one: math-verify's checks, whose time limits need a
            main thread, run in worker processes spawned for them (cptlab.verifiers.symbolic).
        max_unscorable_fraction (`float`, *optional*, defaults to `0.05`):
            The largest share of a stage's completions (counted from its start) that its
            verifiers may fail to judge (`Verdict.unscorable`: a verifier that raised, a
            math-verify time-out, a sandbox that could not run the program). Past it the stage
            ends with an error naming the verifiers and their reasons
            (cptlab.train.rewards.UnscorableGuard). 1.0: never.
        reuse_verdicts (`bool`, *optional*, defaults to `False`):
            A verdict serves every later step of the stage that meets the same completion for
            the same row (cptlab.train.rewards.VerifierReward): a sharpened policy writes the
            same program step after step, and each costs a sandbox run. The same rewards
            wherever the verifier is a function of its input (the embedded ones). Off where it
            is not: a program near its time limit passes or fails by the machine's load, so the
            study's code rewards at paper scale judge each completion anew.
        shared_prompt_forward (`bool`, *optional*, defaults to `False`):
            GRPO and SDPO: forward each distinct prompt of a rollout batch once and its
            completions on its key/value cache, rows of similar completion length together,
            each group only as wide as its longest completion (cptlab.train.shared_prompt);
            equal to the whole-row forward up to float rounding. Off at paper scale: it
            materialises full logits, which suits a small vocabulary, not Qwen3's 151,936.
        compact_generation (`bool`, *optional*, defaults to `False`):
            GRPO and SDPO with HF generation (not vLLM): sample rollouts with each distinct
            prompt prefilled once and each row leaving the decode batch at its end token
            (cptlab.train.compact_generation); the same distribution as HF generate, but other
            draws. Off where a seed must give HF generate's rollouts (a comparison with a run
            made without it); vLLM rollouts ignore it.
        replay_share (`float`, *optional*, defaults to `0.0`):
            Share of a stage's prompts drawn from the training rows of the domains trained in
            earlier stages (none in stage 1), the rest from its own domain.
        kl_probe (`KLProbeSettings`, *optional*):
            The KL probe to the stage start; see `KLProbeSettings`.
        kl_budget (`float` or `None`, *optional*, defaults to `None`):
            Stop a stage at the first probe measurement whose KL to the stage start (per token)
            is at least this, with the weights of that step; `steps` stays the cap. Needs the
            probe (kl_probe.prompts > 0).
        collapse (`CollapseSettings`, *optional*):
            The collapse monitor; see `CollapseSettings`.
        measure_memory (`bool`, *optional*, defaults to `False`):
            Record each process's measured memory in the stage manifest (`memory`:
            cptlab.train.peak_memory), which the memory model (`cptlab plan-memory`) is checked
            against. On CUDA torch's allocator statistics, free; on a CPU a count of every
            tensor torch creates, which makes a small model's training about twice as slow.
        report_to (`str`, *optional*, defaults to `"none"`):
            TRL's logging integration: `none`, `tensorboard`, `wandb` or `trackio`, offline, one
            run per (chain, stage) grouped by chain (cptlab.train.tracking). Where the logs go,
            not what the stage computes: the workflow's rerun trigger leaves it out.
    """

    steps: int = 50
    domain_steps: dict[str, int] = field(default_factory=dict)
    prompts_per_step: int = 32
    num_generations: int = 8
    per_device_train_batch_size: int | None = None
    log_prob_micro_batch_size_per_device: int | None = None
    learning_rate: float = 1.0e-5
    lr_scheduler_type: str = "constant_with_warmup"
    warmup_steps: int = 10
    lr_schedule_per: str = "rollout_batch"
    weight_decay: float = 0.01
    weight_decay_on: str = "except_biases_and_norms"
    max_grad_norm: float = 1.0
    max_prompt_length: int = 2048
    max_completion_length: int = 8192
    temperature: float = 1.0
    top_p: float = 1.0
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    save_steps: int = 10
    save_total_limit: int | None = 2
    dtype: str = "float32"
    attn_implementation: str | None = None
    bf16: bool = False
    handoff_precision: str = "float32"
    gradient_checkpointing: bool = False
    deepspeed: str | None = None
    use_vllm: bool = False
    vllm_mode: str = "colocate"
    vllm: dict[str, Any] = field(default_factory=dict)
    mask_truncated_completions: bool = False
    reward_workers: int = 1
    max_unscorable_fraction: float = 0.05
    reuse_verdicts: bool = False
    shared_prompt_forward: bool = False
    compact_generation: bool = False
    replay_share: float = 0.0
    kl_probe: KLProbeSettings = field(default_factory=KLProbeSettings)
    kl_budget: float | None = None
    collapse: CollapseSettings = field(default_factory=CollapseSettings)
    measure_memory: bool = False
    report_to: str = "none"

    def with_overrides(self, overrides: Mapping) -> TrainingSettings:
        """These settings with `overrides` (the config's `training`, a method's `training`)
        merged over them (cptlab.config.merge: nested mappings key by key)."""
        values = merge(self.as_dict(), overrides)
        return TrainingSettings(
            **{
                **values,
                "kl_probe": KLProbeSettings(**values["kl_probe"]),
                "collapse": CollapseSettings(**values["collapse"]),
            }
        )

    def steps_of(self, domain: str) -> int:
        """Rollout batches of a stage in `domain` (its `domain_steps` entry, else `steps`)."""
        return int(self.domain_steps.get(domain, self.steps))


@dataclass(frozen=True)
class PolicySettings(SettingsSection):
    """The keys of the policy-gradient objective: GRPO's, and SDPO's policy term. Each is TRL's
    GRPOConfig field of the same name, except updates_per_generation.

    Parameters:
        epsilon (`float`, *optional*, defaults to `0.2`):
            Lower clip of the policy ratio.
        epsilon_high (`float`, *optional*, defaults to `0.28`):
            Upper clip of the policy ratio.
        scale_rewards (`str`, *optional*, defaults to `"none"`):
            Advantage normalisation by the reward std: `none` (as in verl), `group` or `batch`.
        loss_type (`str`, *optional*, defaults to `"dapo"`):
            Token aggregation of the policy loss: `grpo`, `bnpo`, `dr_grpo` or `dapo` (verl's
            token-mean over the batch).
        importance_sampling_level (`str`, *optional*, defaults to `"token"`):
            Importance ratio per `token` or per `sequence`.
        updates_per_generation (`int`, *optional*, defaults to `1`):
            Optimizer updates per rollout batch: the batch is split into this many mini-batches,
            each one update (the study's GRPO: 4; its SDPO: 1). Above 1 the later updates are
            off-policy, so the policy clip and distillation_is_clip take effect. TRL's
            steps_per_generation is this times the gradient accumulation steps of one update.
        vllm_importance_sampling_correction (`bool`, *optional*, defaults to `True`):
            vLLM rollouts only: weight each token's loss by the rollout importance ratio
            p_train / p_vllm (cptlab's SDPO applies it to the distillation loss, as the study
            does).
        vllm_importance_sampling_mode (`str`, *optional*, defaults to `"sequence_mask"`):
            Per token or per sequence (`token_truncate`, `token_mask`, `sequence_truncate`,
            `sequence_mask`); truncate clamps the ratio into [clip_min, clip_max], mask zeroes
            it outside.
        vllm_importance_sampling_clip_max (`float` or `None`, *optional*, defaults to `3.0`):
            Upper bound of the rollout importance ratio.
        vllm_importance_sampling_clip_min (`float` or `None`, *optional*, defaults to `None`):
            Lower bound of the rollout importance ratio (None: none).
    """

    epsilon: float = 0.2
    epsilon_high: float = 0.28
    scale_rewards: str = "none"
    loss_type: str = "dapo"
    importance_sampling_level: str = "token"
    updates_per_generation: int = 1
    vllm_importance_sampling_correction: bool = True
    vllm_importance_sampling_mode: str = "sequence_mask"
    vllm_importance_sampling_clip_max: float | None = 3.0
    vllm_importance_sampling_clip_min: float | None = None

    def trl_fields(self, resolved: Collection[str] = ()) -> dict[str, Any]:
        """The keys that are TRL config fields of the same name: all but updates_per_generation
        (TRL's steps_per_generation, which the shared keys carry) and `resolved` (the keys the
        trainer's arguments translate themselves)."""
        skipped = {"updates_per_generation", *resolved}
        return {key: value for key, value in self.as_dict().items() if key not in skipped}


@dataclass(frozen=True)
class GRPOSettings(PolicySettings):
    """A `grpo` method entry: TRL's GRPOTrainer. The policy keys (see `PolicySettings`) and:

    Parameters:
        beta (`float`, *optional*, defaults to `0.0`):
            KL coefficient to a reference model (0: none).
        delta (`float` or `None`, *optional*, defaults to `None`):
            Dual clip (TRL's GRPOConfig key): a token's ratio is capped at delta before the
            policy clip, so a negative-advantage token's loss is at most |advantage| x delta
            (verl's clip_ratio_c, 3.0 in the study). Must exceed 1 + epsilon_high (None: off).
    """

    beta: float = 0.0
    delta: float | None = None


@dataclass(frozen=True)
class SDPOSettings(PolicySettings):
    """An `sdpo` method entry: cptlab's subclass of TRL's experimental SDPOTrainer. The policy
    keys (see `PolicySettings`) and:

    Parameters:
        teacher_model_kind (`str`, *optional*, defaults to `"ema"`):
            The teacher (cptlab.train.teachers): `frozen`, a frozen copy of the
            teacher_anchor; `ema`, its EMA towards the student; `student`, the student itself;
            or `trust_region`, the SDPO reference's (logits = lerp(frozen anchor, student,
            teacher_trust_region_mix)). The former names `base` and `live` still work.
        teacher_update_rate (`float`, *optional*, defaults to `0.05`):
            EMA teacher update rate.
        teacher_sync_steps (`int`, *optional*, defaults to `1`):
            Sync the EMA teacher every N steps.
        teacher_trust_region_mix (`float`, *optional*, defaults to `0.05`):
            trust_region teacher: the student's share of the teacher logits.
        teacher_anchor (`str`, *optional*, defaults to `"stage_start"`):
            The checkpoint the frozen/EMA teacher starts from: `stage_start` (the stage's
            starting checkpoint), `base` (the original base model, in every stage) or a path.
        teacher_anchor_mix (`float`, *optional*, defaults to `1.0`):
            Initial teacher = (1 - a) * stage start + a * anchor.
        distillation_token_mask_ratio (`float`, *optional*, defaults to `0.0`):
            Share of response tokens randomly dropped from the distillation loss.
        remove_thinking_from_demonstration (`bool`, *optional*, defaults to `True`):
            Strip <think>...</think> from demonstrations (False: SDPO_0^CoT keeps them).
        distillation_mode (`str`, *optional*, defaults to `"sampled_token"`):
            `sampled_token` (reverse KL on the sampled token), `full_logits` or `topk_logits`.
        distillation_topk (`int` or `None`, *optional*, defaults to `None`):
            Top-k support; set exactly when distillation_mode is topk_logits.
        distillation_add_tail (`bool`, *optional*, defaults to `False`):
            Top-k plus a tail bucket.
        distillation_alpha (`float`, *optional*, defaults to `1.0`):
            Generalised JSD mixing: 0 forward KL, 1 reverse KL (sampled_token needs 1).
        distillation_is_clip (`float` or `None`, *optional*, defaults to `2.0`):
            Clip of the per-token importance weight (None disables).
        distillation_weight (`float`, *optional*, defaults to `1.0`):
            loss = (1 - w) * policy + w * distillation.
        include_environment_feedback (`bool`, *optional*, defaults to `False`):
            Put the verifier's feedback on a failed rollout into its teacher prompt.
        environment_feedback_only_without_solution (`bool`, *optional*, defaults to `False`):
            Use the feedback only when no sibling succeeded.
        environment_feedback_on_success (`bool`, *optional*, defaults to `False`):
            Also give a successful rollout its feedback.
        success_reward_threshold (`float`, *optional*, defaults to `1.0`):
            Reward that makes a rollout a demonstration.
        dont_reprompt_on_self_success (`bool`, *optional*, defaults to `True`):
            Never use a rollout as its own demonstration.
        max_reprompt_len (`int`, *optional*, defaults to `10240`):
            Teacher prompt token limit.
        reprompt_truncation (`str`, *optional*, defaults to `"left"`):
            A teacher prompt over max_reprompt_len: `left` keeps its last tokens (TRL), `right`
            its first (the study's), `error` stops the stage.
        skip_inactive_rows (`bool`, *optional*, defaults to `True`):
            Speed: with distillation_weight 1, forward student and teacher only on rollouts
            whose teacher prompt was reprompted (the others carry zero loss); the same loss.
        teacher_templates (`str`, *optional*, defaults to `"trl"`):
            The teacher prompt's templates: `trl`, TRL's SDPOConfig defaults, or `study`, the
            study's (cptlab.teacher_prompt).
    """

    teacher_model_kind: str = "ema"
    teacher_update_rate: float = 0.05
    teacher_sync_steps: int = 1
    teacher_trust_region_mix: float = 0.05
    teacher_anchor: str = ANCHOR_STAGE_START
    teacher_anchor_mix: float = 1.0
    distillation_token_mask_ratio: float = 0.0
    remove_thinking_from_demonstration: bool = True
    distillation_mode: str = "sampled_token"
    distillation_topk: int | None = None
    distillation_add_tail: bool = False
    distillation_alpha: float = 1.0
    distillation_is_clip: float | None = 2.0
    distillation_weight: float = 1.0
    include_environment_feedback: bool = False
    environment_feedback_only_without_solution: bool = False
    environment_feedback_on_success: bool = False
    success_reward_threshold: float = 1.0
    dont_reprompt_on_self_success: bool = True
    max_reprompt_len: int = 10240
    reprompt_truncation: str = "left"
    skip_inactive_rows: bool = True
    teacher_templates: str = "trl"


@dataclass(frozen=True)
class SFTSettings(SettingsSection):
    """An `sft` method entry: TRL's SFTTrainer on each training row's reference answer (each
    key is TRL's SFTConfig field of the same name).

    Parameters:
        completion_only_loss (`bool`, *optional*, defaults to `True`):
            The loss on the answer's tokens only.
    """

    completion_only_loss: bool = True

    @property
    def updates_per_generation(self) -> int:
        """One optimizer update per step (not a key of an sft entry: nothing is generated)."""
        return 1

    def trl_fields(self) -> dict[str, Any]:
        """The keys as TRL's SFTConfig fields (all of them)."""
        return self.as_dict()


MethodSettings = GRPOSettings | SDPOSettings | SFTSettings

# trainer -> the settings of its method entries
METHOD_SETTINGS: dict[str, type[MethodSettings]] = {
    "grpo": GRPOSettings,
    "sdpo": SDPOSettings,
    "sft": SFTSettings,
}
