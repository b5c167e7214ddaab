"""The training settings as frozen dataclasses, TRL style: the config's `training` section
(`TrainingSettings`) and each trainer's method entry (`GRPOSettings`, `SDPOSettings`,
`SFTSettings`). Each key is stated here once: its type, default and accepted values
(`cptlab.config.setting`) on its field, its description in its class docstring. The config
schema's `methods` and `training` sections are generated from them (`schema_sections`), and
config/README.md from the schema. cptlab.train.spec fills and checks them from a config; every
other module reads them by attribute.

`as_dict()` gives a section as the stage's provenance records it (fingerprint, manifest, the
workflow's rerun triggers): the fields in declaration order, nested sections as dicts."""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from cptlab.config import dataclass_schema, merge, setting
from cptlab.train.teachers import ANCHOR_STAGE_START, RENAMED, TEACHER_KINDS


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
        prompts:
            Probe prompts (0 disables the probe).
        max_tokens:
            Probe completion tokens (at most `max_completion_length`).
        every:
            Measure every N steps.
    """

    prompts: int = setting(8, minimum=0)
    max_tokens: int = setting(128, minimum=1)
    every: int = setting(1, minimum=1)


@dataclass(frozen=True)
class CollapseSettings(SettingsSection):
    """`training.collapse`: the collapse monitor over each step's completions and verdicts
    (cptlab.train.monitor).

    Parameters:
        ngram:
            n of the token n-grams.
        format_tokens:
            Name -> literal text counted per completion.
        thresholds:
            Metric -> alarm level (alarm when the metric exceeds it); metrics:
            format_violation_rate, top_ngram_share, repeated_ngram_share,
            duplicate_completion_share, format/<name>/repeated_share,
            format/<name>/per_completion. Defaults to repeated_ngram_share 0.6, top_ngram_share
            0.5 and format/boxed/repeated_share 0.5. A config's mapping replaces it whole
            (cptlab.config.REPLACED_MAPPINGS).
        patience:
            Consecutive alarming steps before acting.
        action:
            `warn` logs a warning; `stop` ends the stage and outputs the last checkpoint saved
            before the first alarming step (status `stopped` in the manifest); `error` fails the
            job.
    """

    ngram: int = setting(4, minimum=1)
    format_tokens: dict[str, str] = setting(
        factory=lambda: {"boxed": "\\boxed"},
        additionalProperties={"type": "string", "minLength": 1},
    )
    thresholds: dict[str, float] = field(
        default_factory=lambda: {
            "repeated_ngram_share": 0.6,
            "top_ngram_share": 0.5,
            "format/boxed/repeated_share": 0.5,
        }
    )
    patience: int = setting(2, minimum=1)
    action: str = setting("warn", enum=("warn", "stop", "error"))


# `training.vllm`: the options of TRL's vLLM rollouts that a config may set; TRL's defaults apply
# to the others. Each is the field vllm_<key> of TRL's GRPOConfig (cptlab.train.stage).
TRL_VLLM_OPTIONS = {
    "gpu_memory_utilization": {
        "type": "number",
        "exclusiveMinimum": 0,
        "maximum": 1,
        "description": "share of GPU memory vLLM may take (colocate)",
    },
    "tensor_parallel_size": {
        "type": "integer",
        "minimum": 1,
        "description": "GPUs per vLLM engine (colocate)",
    },
    "max_model_length": {
        "type": ["integer", "null"],
        "minimum": 1,
        "description": "vLLM's context length (null: the model's)",
    },
    "enable_sleep_mode": {
        "type": "boolean",
        "description": "offload vLLM's weights and cache between generations (colocate)",
    },
    "server_base_url": {
        "type": ["string", "null"],
        "description": "base URL of the vLLM server (server mode; null: host and port)",
    },
    "server_host": {"type": "string", "description": "host of the vLLM server (server mode)"},
    "server_port": {"type": "integer", "description": "port of the vLLM server (server mode)"},
    "server_timeout": {
        "type": "number",
        "exclusiveMinimum": 0,
        "description": "seconds to wait for the vLLM server",
    },
}


@dataclass(frozen=True)
class TrainingSettings(SettingsSection):
    """The `training` section: hyper-parameters shared by every method and stage (one stage =
    one domain); a method's `training` mapping overrides them for that method.

    Parameters:
        steps:
            Rollout batches per stage (each makes the method's `updates_per_generation`
            optimizer updates).
        domain_steps:
            Per-domain step counts that override `steps`, e.g. `{code: 20}`.
        prompts_per_step:
            Prompts per step.
        num_generations:
            Rollouts per prompt.
        per_device_train_batch_size:
            Completions per forward/backward per device; gradient accumulation covers the rest
            of the step's prompts_per_step * num_generations (None: the whole step at once).
        log_prob_micro_batch_size_per_device:
            Completions per forward of the log-probabilities computed without gradient over a
            rollout batch, per device (verl's `log_prob_micro_batch_size_per_gpu`): GRPO's old
            and reference log-probabilities, SDPO's rollout importance weights and old
            log-probabilities, the KL probe. None: per_device_train_batch_size's micro-batch.
        learning_rate:
            Peak learning rate.
        lr_scheduler_type:
            transformers scheduler name.
        warmup_steps:
            Learning-rate warm-up, linear from 0, in the unit `lr_schedule_per` counts (rollout
            batches by default).
        lr_schedule_per:
            What the learning-rate schedule (its warm-up and length) counts. `rollout_batch`
            (verl's, which steps its scheduler once per update_actor call): every update of
            rollout batch k trains at learning_rate x schedule(k). `optimizer_update` (TRL's):
            the schedule advances at every update, so with updates_per_generation U a warm-up of
            W ends after W / U rollout batches. The same when U is 1.
        weight_decay:
            AdamW weight decay.
        weight_decay_on:
            The parameters weight_decay applies to: `except_biases_and_norms` (transformers'
            Trainer: not biases or normalisation weights) or `all` (verl's single AdamW
            parameter group).
        max_grad_norm:
            Gradient clip (0: off).
        max_prompt_length:
            Prompt limit in tokens (longer prompts are dropped, with a warning).
        max_completion_length:
            Completion limit in tokens.
        temperature:
            Rollout temperature.
        top_p:
            Rollout nucleus sampling.
        chat_template_kwargs:
            Passed to apply_chat_template, e.g. `{enable_thinking: false}` for Qwen3.
        save_steps:
            Trainer checkpoint every N rollout batches (resuming starts from the last one).
        save_total_limit:
            Trainer checkpoints kept in the state folder (None: all).
        dtype:
            dtype of the weights: `float32`, `bfloat16`, `float16` or `auto`.
        attn_implementation:
            e.g. `sdpa` or `flash_attention_2` (None: transformers' choice).
        bf16:
            bf16 mixed precision (needs a GPU).
        handoff_precision:
            The weights a stage hands to the next stage and to the analyses
            (cptlab.train.handoff). `float32`: under DeepSpeed's mixed precision, the fp32
            master weights, saved in fp32, and the next stage's masters start from them, as
            verl's actor keeps fp32 parameters and exports them. `model`: the model's own
            weights (bf16 with dtype bfloat16), the masters dropped, as verl's model merger
            exports bf16. The same weights for a float32 model, and for a bf16 model trained
            without `deepspeed` (no masters exist); the stage manifest's `handed_on` says which.
        gradient_checkpointing:
            Recompute activations in the backward pass (saves memory, costs time).
        deepspeed:
            DeepSpeed JSON config for `accelerate launch` runs.
        use_vllm:
            TRL's vLLM rollouts instead of HF generate.
        vllm_mode:
            `colocate`: vLLM in the training processes; `server`: a separate vLLM server.
        vllm:
            TRL's vLLM options (their defaults are TRL's; the schema lists them).
        mask_truncated_completions:
            Exclude completions cut at max_completion_length from the loss.
        reward_workers:
            Threads that score each training process's completions in parallel. Every verifier
            gives the verdict it gives with one: math-verify's checks, whose time limits need a
            main thread, run in worker processes spawned for them (cptlab.verifiers.symbolic).
        max_unscorable_fraction:
            The largest share of a stage's completions (counted from its start) that its
            verifiers may fail to judge (`Verdict.unscorable`: a verifier that raised, a
            math-verify time-out, a sandbox that could not run the program). Past it the stage
            ends with an error naming the verifiers and their reasons
            (cptlab.train.rewards.UnscorableGuard). 1.0: never.
        reuse_verdicts:
            A verdict serves every later step of the stage that meets the same completion for
            the same row (cptlab.train.rewards.VerifierReward): a sharpened policy writes the
            same program step after step, and each costs a sandbox run. The same rewards
            wherever the verifier is a function of its input (the embedded ones). Off where it
            is not: a program near its time limit passes or fails by the machine's load, so the
            study's code rewards at paper scale judge each completion anew.
        shared_prompt_forward:
            GRPO and SDPO: forward each distinct prompt of a rollout batch once and its
            completions on its key/value cache, rows of similar completion length together,
            each group only as wide as its longest completion (cptlab.train.shared_prompt);
            equal to the whole-row forward up to float rounding. Off at paper scale: it
            materialises full logits, which suits a small vocabulary, not Qwen3's 151,936.
        compact_generation:
            GRPO and SDPO with HF generation (not vLLM): sample rollouts with each distinct
            prompt prefilled once and each row leaving the decode batch at its end token
            (cptlab.train.compact_generation); the same distribution as HF generate, but other
            draws. Off where a seed must give HF generate's rollouts (a comparison with a run
            made without it); vLLM rollouts ignore it.
        replay_share:
            Share of a stage's prompts drawn from the training rows of the domains trained in
            earlier stages (none in stage 1), the rest from its own domain.
        kl_probe:
            The KL probe to the stage start (`KLProbeSettings`).
        kl_budget:
            Stop a stage at the first probe measurement whose KL to the stage start
            (`kl_to_start`, per token) is at least this, with the weights of that step; `steps`
            stays the cap. Equal budgets compare methods at a matched movement rather than at
            equal steps (docs/reference.md). Needs the probe (kl_probe.prompts > 0).
        collapse:
            The collapse monitor (`CollapseSettings`).
        measure_memory:
            Record each process's measured memory in the stage manifest (`memory`:
            cptlab.train.peak_memory), which the memory model (`cptlab plan-memory`) is checked
            against. On CUDA torch's allocator statistics, free; on a CPU a count of every
            tensor torch creates, which makes a small model's training about twice as slow.
        report_to:
            Hand TRL's training logs to a tracker (`none`, `tensorboard`, `wandb` or `trackio`),
            offline, one run per (chain, stage) grouped by chain, in
            results/<experiment>/tracking/ (wandb runs with WANDB_MODE=offline); each evaluation
            of a checkpoint adds its scores to the stage's run at its step
            (cptlab.train.tracking). Where the logs go, not what the stage computes: changing it
            reruns nothing.
    """

    steps: int = setting(50, minimum=1)
    domain_steps: dict[str, int] = setting(
        factory=dict, additionalProperties={"type": "integer", "minimum": 1}
    )
    prompts_per_step: int = setting(32, minimum=1)
    num_generations: int = setting(8, minimum=2)
    per_device_train_batch_size: int | None = setting(None, minimum=1)
    log_prob_micro_batch_size_per_device: int | None = setting(None, minimum=1)
    learning_rate: float = setting(1.0e-5, exclusiveMinimum=0)
    lr_scheduler_type: str = "constant_with_warmup"
    warmup_steps: int = setting(10, minimum=0)
    lr_schedule_per: str = setting("rollout_batch", enum=("rollout_batch", "optimizer_update"))
    weight_decay: float = setting(0.01, minimum=0)
    weight_decay_on: str = setting(
        "except_biases_and_norms", enum=("except_biases_and_norms", "all")
    )
    max_grad_norm: float = setting(1.0, minimum=0)
    max_prompt_length: int = setting(2048, minimum=1)
    max_completion_length: int = setting(8192, minimum=1)
    temperature: float = setting(1.0, exclusiveMinimum=0)
    top_p: float = setting(1.0, exclusiveMinimum=0, maximum=1)
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    save_steps: int = setting(10, minimum=1)
    save_total_limit: int | None = setting(2, minimum=1)
    dtype: str = setting("float32", enum=("float32", "bfloat16", "float16", "auto"))
    attn_implementation: str | None = None
    bf16: bool = False
    handoff_precision: str = setting("float32", enum=("float32", "model"))
    gradient_checkpointing: bool = False
    deepspeed: str | None = None
    use_vllm: bool = False
    vllm_mode: str = setting("colocate", enum=("colocate", "server"))
    vllm: dict[str, Any] = setting(
        factory=dict, additionalProperties=False, properties=TRL_VLLM_OPTIONS
    )
    mask_truncated_completions: bool = False
    reward_workers: int = setting(1, minimum=1)
    max_unscorable_fraction: float = setting(0.05, minimum=0, maximum=1)
    reuse_verdicts: bool = False
    shared_prompt_forward: bool = False
    compact_generation: bool = False
    replay_share: float = setting(0.0, minimum=0, exclusiveMaximum=1)
    kl_probe: KLProbeSettings = field(default_factory=KLProbeSettings)
    kl_budget: float | None = setting(None, exclusiveMinimum=0)
    collapse: CollapseSettings = field(default_factory=CollapseSettings)
    measure_memory: bool = False
    report_to: str = setting("none", enum=("none", "tensorboard", "wandb", "trackio"))

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
        epsilon:
            Lower clip of the policy ratio.
        epsilon_high:
            Upper clip of the policy ratio.
        scale_rewards:
            Advantage normalisation by the reward std: `none` (as in verl), `group` or `batch`.
        loss_type:
            Token aggregation of the policy loss: `grpo`, `bnpo`, `dr_grpo` or `dapo` (verl's
            token-mean over the batch).
        importance_sampling_level:
            Importance ratio per `token` or per `sequence`.
        updates_per_generation:
            Optimizer updates per rollout batch: the batch is split into this many mini-batches,
            each one update (the study's GRPO: 4, ppo_mini_batch_size 8 of 32 prompts; its SDPO:
            1). Above 1 the later updates are off-policy, so the policy clip and
            distillation_is_clip take effect. TRL's steps_per_generation is this times the
            gradient accumulation steps of one update.
        vllm_importance_sampling_correction:
            vLLM rollouts only: weight each token's loss by the rollout importance ratio
            p_train / p_vllm (cptlab's SDPO applies it to the distillation loss, as the study
            does).
        vllm_importance_sampling_mode:
            Per token or per sequence; truncate clamps the ratio into [clip_min, clip_max], mask
            zeroes it outside (the study: token_truncate, clip_max 2.0).
        vllm_importance_sampling_clip_max:
            Upper bound of the rollout importance ratio.
        vllm_importance_sampling_clip_min:
            Lower bound of the rollout importance ratio (None: none).
    """

    epsilon: float = setting(0.2, exclusiveMinimum=0)
    epsilon_high: float = setting(0.28, exclusiveMinimum=0)
    scale_rewards: str = setting("none", enum=("none", "group", "batch"))
    loss_type: str = setting("dapo", enum=("grpo", "bnpo", "dr_grpo", "dapo"))
    importance_sampling_level: str = setting("token", enum=("token", "sequence"))
    updates_per_generation: int = setting(1, minimum=1)
    vllm_importance_sampling_correction: bool = True
    vllm_importance_sampling_mode: str = setting(
        "sequence_mask", enum=("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")
    )
    vllm_importance_sampling_clip_max: float | None = setting(3.0, exclusiveMinimum=0)
    vllm_importance_sampling_clip_min: float | None = setting(None, minimum=0)

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
        beta:
            KL coefficient to a reference model (0: none).
        delta:
            Dual clip (TRL's GRPOConfig key): a token's ratio is capped at delta before the
            policy clip, so a negative-advantage token's loss is at most |advantage| x delta
            (verl's clip_ratio_c, 3.0 in the study). Must exceed 1 + epsilon_high (None: off).
    """

    beta: float = setting(0.0, minimum=0)
    delta: float | None = setting(None, exclusiveMinimum=1)


@dataclass(frozen=True)
class SDPOSettings(PolicySettings):
    """An `sdpo` method entry: cptlab's subclass of TRL's experimental SDPOTrainer. The policy
    keys (see `PolicySettings`) and:

    Parameters:
        teacher_model_kind:
            The SDPO teacher (cptlab.train.teachers): `frozen`, a frozen copy of the
            teacher_anchor (the stage start by default); `ema`, the anchor moved towards the
            student at teacher_update_rate; `student`, the student itself; or `trust_region`,
            the SDPO reference's (logits = lerp(frozen anchor, student,
            teacher_trust_region_mix), both on the teacher's input). Former names: `base` (now
            frozen), `live` (now student).
        teacher_update_rate:
            EMA teacher update rate.
        teacher_sync_steps:
            Sync the EMA teacher every N steps.
        teacher_trust_region_mix:
            trust_region teacher: the student's share of the teacher logits (the study's
            teacher_update_rate, which serves both teacher kinds).
        teacher_anchor:
            The checkpoint the frozen, ema or trust_region teacher starts from: `stage_start`
            (the stage's starting checkpoint), `base` (the original base model, in every stage)
            or a path.
        teacher_anchor_mix:
            Initial teacher = (1 - a) * stage start + a * anchor.
        distillation_token_mask_ratio:
            Share of response tokens randomly dropped from the distillation loss.
        remove_thinking_from_demonstration:
            Strip <think>...</think> from demonstrations (False: SDPO_0^CoT keeps them).
        distillation_mode:
            `sampled_token` (reverse KL on the sampled token), `full_logits` or `topk_logits`.
        distillation_topk:
            Top-k support; set exactly when distillation_mode is topk_logits.
        distillation_add_tail:
            Top-k plus a tail bucket.
        distillation_alpha:
            Generalised JSD mixing: 0 forward KL, 1 reverse KL (sampled_token needs 1).
        distillation_is_clip:
            Clip of the per-token importance weight (None disables).
        distillation_weight:
            loss = (1 - w) * policy + w * distillation.
        include_environment_feedback:
            Put the verifier's feedback on a failed rollout into its teacher prompt.
        environment_feedback_only_without_solution:
            Use the feedback only when no sibling succeeded.
        environment_feedback_on_success:
            Also give a successful rollout its feedback (the study keeps every rollout's; its
            verifiers give one to a success only when a math answer was truncated).
        success_reward_threshold:
            Reward that makes a rollout a demonstration.
        dont_reprompt_on_self_success:
            Never use a rollout as its own demonstration.
        max_reprompt_len:
            Teacher prompt token limit.
        reprompt_truncation:
            A teacher prompt over max_reprompt_len: `left` keeps its last tokens (TRL), `right`
            its first (the study's actor.yaml), `error` stops the stage.
        skip_inactive_rows:
            Speed: with distillation_weight 1, forward student and teacher only on rollouts
            whose teacher prompt was reprompted (the others carry zero loss); the same loss.
        teacher_templates:
            The teacher prompt's templates: `trl`, TRL's SDPOConfig defaults (the embedded base
            learns them), or `study`, the study's (no trailing newlines; cptlab.teacher_prompt).
    """

    teacher_model_kind: str = setting("ema", enum=(*TEACHER_KINDS, *RENAMED))
    teacher_update_rate: float = setting(0.05, minimum=0, maximum=1)
    teacher_sync_steps: int = setting(1, minimum=1)
    teacher_trust_region_mix: float = setting(0.05, minimum=0, maximum=1)
    teacher_anchor: str = setting(ANCHOR_STAGE_START, minLength=1)
    teacher_anchor_mix: float = setting(1.0, minimum=0, maximum=1)
    distillation_token_mask_ratio: float = setting(0.0, minimum=0, exclusiveMaximum=1)
    remove_thinking_from_demonstration: bool = True
    distillation_mode: str = setting(
        "sampled_token", enum=("sampled_token", "full_logits", "topk_logits")
    )
    distillation_topk: int | None = setting(None, minimum=1)
    distillation_add_tail: bool = False
    distillation_alpha: float = setting(1.0, minimum=0, maximum=1)
    distillation_is_clip: float | None = setting(2.0, exclusiveMinimum=0)
    distillation_weight: float = setting(1.0, minimum=0, maximum=1)
    include_environment_feedback: bool = False
    environment_feedback_only_without_solution: bool = False
    environment_feedback_on_success: bool = False
    success_reward_threshold: float = 1.0
    dont_reprompt_on_self_success: bool = True
    max_reprompt_len: int = setting(10240, minimum=1)
    reprompt_truncation: str = setting("left", enum=("left", "right", "error"))
    skip_inactive_rows: bool = True
    teacher_templates: str = setting("trl", enum=("trl", "study"))


@dataclass(frozen=True)
class SFTSettings(SettingsSection):
    """An `sft` method entry: TRL's SFTTrainer on each training row's reference answer (each
    key is TRL's SFTConfig field of the same name).

    Parameters:
        completion_only_loss:
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


@functools.cache
def schema_sections() -> dict[str, dict]:
    """The config schema's sections that these dataclasses state (cptlab.config.dataclass_schema):
    `methods`, each entry with its trainer's keys, and `training`. Made once per process: read
    it, do not change it."""
    keys: dict[str, dict] = {}
    takers: dict[str, list[str]] = {}
    for trainer, cls in METHOD_SETTINGS.items():
        for key, spec in dataclass_schema(cls)["properties"].items():
            if keys.setdefault(key, spec) != spec:
                raise TypeError(f"method key {key!r}: the trainers state it differently")
            takers.setdefault(key, []).append(trainer)
    for key, trainers in takers.items():
        if len(trainers) < len(METHOD_SETTINGS):
            described = f"[{', '.join(trainers)}] {keys[key]['description']}"
            keys[key] = {**keys[key], "description": described}
    entry = {
        "type": "object",
        "additionalProperties": False,
        "required": ["trainer"],
        "properties": {
            "trainer": {
                "enum": list(METHOD_SETTINGS),
                "description": "grpo: TRL's GRPOTrainer; sdpo: cptlab's subclass of TRL's "
                "experimental SDPOTrainer; sft: TRL's SFTTrainer on each training row's reference "
                "answer (metadata.solution), prompts_per_step examples per step",
            },
            "training": {
                "type": "object",
                "description": "per-method overrides of the top-level `training` keys",
            },
            **keys,
        },
    }
    methods = {
        "type": "object",
        "minProperties": 1,
        "propertyNames": {"pattern": "^[A-Za-z0-9_.-]+$"},
        "additionalProperties": entry,
        "description": "Training methods by name. Adding a method is adding an entry: `trainer` "
        "picks the algorithm, the other keys override its defaults. A method may also carry a "
        "`training` mapping that overrides keys of the top-level `training` section for that "
        "method only.",
    }
    return {"methods": methods, "training": dataclass_schema(TrainingSettings)}
