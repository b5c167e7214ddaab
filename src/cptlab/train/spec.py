"""One stage's settings: a named method entry and the `training` section, with defaults filled
in and checked against the project config schema (`methods` and `training` under `properties`
of cptlab/schemas/config.schema.yaml). Errors are ConfigError naming the key."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Any

import cptlab.config
from cptlab.config import ConfigError, check_schema, merge
from cptlab.train.teachers import TEACHER_KINDS, TeacherKind, canonical_kind

TRAINING_DEFAULTS: dict[str, Any] = {
    "steps": 50,
    "domain_steps": {},
    "prompts_per_step": 32,
    "num_generations": 8,
    "per_device_train_batch_size": None,
    "learning_rate": 1.0e-5,
    "lr_scheduler_type": "constant_with_warmup",
    "warmup_steps": 10,
    "lr_schedule_per": "rollout_batch",
    "weight_decay": 0.01,
    "weight_decay_on": "except_biases_and_norms",
    "max_grad_norm": 1.0,
    "max_prompt_length": 2048,
    "max_completion_length": 8192,
    "temperature": 1.0,
    "top_p": 1.0,
    "chat_template_kwargs": {},
    "save_steps": 10,
    "save_total_limit": 2,
    "dtype": "float32",
    "attn_implementation": None,
    "bf16": False,
    "gradient_checkpointing": False,
    "deepspeed": None,
    "use_vllm": False,
    "vllm_mode": "colocate",
    "vllm": {},
    "mask_truncated_completions": False,
    "reward_workers": 1,
    "shared_prompt_forward": False,
    "compact_generation": False,
    "replay_share": 0.0,
    "kl_probe": {"prompts": 8, "max_tokens": 128, "every": 1},
    "kl_budget": None,
    "collapse": {
        "ngram": 4,
        "format_tokens": {"boxed": "\\boxed"},
        "thresholds": {
            "repeated_ngram_share": 0.6,
            "top_ngram_share": 0.5,
            "format/boxed/repeated_share": 0.5,
        },
        "patience": 2,
        "action": "warn",
    },
}

# Keys the policy-gradient objective uses (GRPO, and SDPO's policy term).
POLICY_DEFAULTS: dict[str, Any] = {
    "epsilon": 0.2,
    "epsilon_high": 0.28,
    "scale_rewards": "none",
    "loss_type": "dapo",
    "importance_sampling_level": "token",
    "updates_per_generation": 1,
    # TRL's GRPOConfig keys and defaults; they act on vLLM rollouts only.
    "vllm_importance_sampling_correction": True,
    "vllm_importance_sampling_mode": "sequence_mask",
    "vllm_importance_sampling_clip_max": 3.0,
    "vllm_importance_sampling_clip_min": None,
}

METHOD_DEFAULTS: dict[str, dict[str, Any]] = {
    # delta: TRL's dual-clip bound on the ratio of negative-advantage tokens (None: off).
    "grpo": {**POLICY_DEFAULTS, "beta": 0.0, "delta": None},
    "sdpo": {
        **POLICY_DEFAULTS,
        "teacher_model_kind": "ema",
        "teacher_update_rate": 0.05,
        "teacher_sync_steps": 1,
        "teacher_trust_region_mix": 0.05,
        "teacher_anchor": "stage_start",
        "teacher_anchor_mix": 1.0,
        "distillation_token_mask_ratio": 0.0,
        "remove_thinking_from_demonstration": True,
        "distillation_mode": "sampled_token",
        "distillation_topk": None,
        "distillation_add_tail": False,
        "distillation_alpha": 1.0,
        "distillation_is_clip": 2.0,
        "distillation_weight": 1.0,
        "include_environment_feedback": False,
        "environment_feedback_only_without_solution": False,
        "environment_feedback_on_success": False,
        "success_reward_threshold": 1.0,
        "dont_reprompt_on_self_success": True,
        "max_reprompt_len": 10240,
        "reprompt_truncation": "left",
        "skip_inactive_rows": True,
        "teacher_templates": "trl",
    },
    # Supervised training on the reference answers (TRL's SFTConfig field names).
    "sft": {"completion_only_loss": True},
}

# transformers schedulers driven by a metric rather than a step count: nothing to count in
# rollout batches (training.lr_schedule_per).
METRIC_SCHEDULERS = ("reduce_lr_on_plateau", "greedy")


def _validate(section: str, value: Any, where: str) -> None:
    """Check one top-level section (`methods` or `training`) against the project schema."""
    check_schema(value, _section_schema(section), where, section)


@cache
def _section_schema(section: str) -> dict:
    return cptlab.config.schema()["properties"][section]


def training_section(config: dict, source: str = "config") -> dict:
    """The config's `training` section over TRAINING_DEFAULTS (no method's overrides)."""
    _validate("training", config.get("training", {}), source)
    return merge(TRAINING_DEFAULTS, config.get("training", {}))


@dataclass(frozen=True)
class StageSettings:
    """Everything one stage needs from the config, resolved and checked.

    Parameters:
        method (`str`): the method's name in `methods`.
        trainer (`str`): `grpo`, `sdpo` or `sft`.
        params (`dict`): the method's keys with the trainer's defaults filled in.
        training (`dict`): the `training` section with defaults and the method's overrides.
        domain (`str`): the domain trained in this stage.
        train_benchmark (`str`): the domain's `train` benchmark (its rows are the prompts).
        steps (`int`): rollout batches of this stage (`domain_steps[domain]` or `steps`).
    """

    method: str
    trainer: str
    params: dict = field(repr=False)
    training: dict = field(repr=False)
    domain: str
    train_benchmark: str
    steps: int

    @property
    def teacher(self) -> TeacherKind | None:
        """The SDPO teacher's kind (cptlab.train.teachers); None for another trainer."""
        return TEACHER_KINDS[self.params["teacher_model_kind"]] if self.trainer == "sdpo" else None

    @property
    def updates(self) -> int:
        """Optimizer updates per rollout batch."""
        return int(self.params.get("updates_per_generation", 1))  # SFT: one per step

    @property
    def optimizer_steps(self) -> int:
        """Optimizer updates of this stage (TRL's max_steps)."""
        return self.steps * self.updates

    def as_dict(self) -> dict:
        return {
            "method": self.method,
            "trainer": self.trainer,
            "params": self.params,
            "training": self.training,
            "domain": self.domain,
            "train_benchmark": self.train_benchmark,
            "steps": self.steps,
        }


def resolve_stage(config: dict, method: str, domain: str, source: str = "config") -> StageSettings:
    """The settings of stage (`method`, `domain`); raises ConfigError naming a bad key."""
    methods = config.get("methods")
    if not methods:
        raise ConfigError(
            f"{source}: no `methods` section; add e.g. methods: {{grpo: {{trainer: grpo}}}}"
        )
    _validate("methods", methods, source)
    if method not in methods:
        raise ConfigError(f"{source}: unknown method {method!r}; known: {sorted(methods)}")
    for other in methods:  # a broken entry is an error whichever method runs
        method_settings(config, other, source)
    trainer, params, training = method_settings(config, method, source)

    domains = config.get("data", {}).get("domains", {})
    if domain not in domains or not domains[domain].get("train"):
        trainable = sorted(d for d, spec in domains.items() if spec.get("train"))
        raise ConfigError(
            f"{source}: domain {domain!r} has no `train` benchmark in data.domains; "
            f"trainable domains: {trainable}"
        )
    steps = training["domain_steps"].get(domain, training["steps"])
    return StageSettings(
        method=method,
        trainer=trainer,
        params=params,
        training=training,
        domain=domain,
        train_benchmark=domains[domain]["train"],
        steps=int(steps),
    )


def method_settings(config: dict, method: str, source: str = "config") -> tuple[str, dict, dict]:
    """(trainer, the method's keys over its trainer's defaults, the training section with the
    method's overrides), checked: every key is one its trainer takes, and the keys agree."""
    entry = dict(config["methods"][method])
    trainer = entry.pop("trainer")
    overrides = entry.pop("training", {})
    where = f"{source}: methods.{method}"
    unknown = sorted(set(entry) - set(METHOD_DEFAULTS[trainer]))
    if unknown:
        raise ConfigError(
            f"{where}: the {trainer} trainer takes no key {unknown[0]!r}; its keys: "
            f"{', '.join(['trainer', 'training', *METHOD_DEFAULTS[trainer]])}"
        )
    _validate("training", overrides, f"{where}.training")
    training = merge(training_section(config, source), overrides)
    params = {**METHOD_DEFAULTS[trainer], **entry}
    if trainer == "sdpo":
        params["teacher_model_kind"] = canonical_kind(params["teacher_model_kind"], where)
    _check_semantics(trainer, params, training, where)
    return trainer, params, training


def batch_shape(
    training: dict, world: int, updates: int = 1, where: str = "training"
) -> tuple[int, int]:
    """(completions per micro-batch and process, gradient accumulation steps of one optimizer
    update) when one rollout batch of prompts_per_step x num_generations completions over
    `world` processes makes `updates` optimizer updates."""
    batch = training["prompts_per_step"] * training["num_generations"]
    if training["prompts_per_step"] % updates:
        raise ConfigError(
            f"{where}: prompts_per_step {training['prompts_per_step']} must split into "
            f"updates_per_generation {updates} mini-batches of whole prompts"
        )
    micro = training["per_device_train_batch_size"] or batch // (world * updates)
    if micro < 1 or batch % (micro * world * updates):
        raise ConfigError(
            f"{where}: prompts_per_step * num_generations = {batch} completions per rollout "
            f"batch must split into updates_per_generation {updates} x per_device_train_batch_size "
            f"{micro} x {world} process(es)"
        )
    return micro, batch // (micro * world * updates)


def sft_batch_shape(training: dict, world: int, where: str = "training") -> tuple[int, int]:
    """(examples per micro-batch and process, gradient accumulation steps) of one SFT step of
    prompts_per_step examples (one reference answer per prompt) over `world` processes."""
    prompts = training["prompts_per_step"]
    micro = training["per_device_train_batch_size"] or prompts // world
    if micro < 1 or prompts % (micro * world):
        raise ConfigError(
            f"{where}: prompts_per_step {prompts} examples per SFT step must split into "
            f"per_device_train_batch_size {micro} x {world} process(es)"
        )
    return micro, prompts // (micro * world)


def step_shape(
    trainer: str, params: dict, training: dict, world: int, where: str = "training"
) -> tuple[int, int]:
    """(micro-batch per process, gradient accumulation steps) of one optimizer update of
    `trainer`: an SFT step's examples, or a share of an RL rollout batch."""
    if trainer == "sft":
        return sft_batch_shape(training, world, where)
    return batch_shape(training, world, params["updates_per_generation"], where)


def check_methods(config: dict, processes: int = 1, source: str = "config") -> None:
    """Check every method entry as its stages will use it, on `processes` training processes
    (what `cptlab train-stage` would find out only when a stage starts)."""
    for method in config.get("methods") or {}:
        trainer, params, training = method_settings(config, method, source)
        step_shape(trainer, params, training, processes, f"{source}: methods.{method} (training)")


def _check_semantics(trainer: str, p: dict, t: dict, where: str) -> None:
    """Cross-key rules the schema cannot express."""
    if trainer == "sdpo":
        if p["distillation_mode"] == "sampled_token" and p["distillation_alpha"] != 1.0:
            raise ConfigError(
                f"{where}: distillation_mode sampled_token is reverse KL only; "
                f"set distillation_alpha 1.0 (got {p['distillation_alpha']})"
            )
        if (p["distillation_mode"] == "topk_logits") != (p["distillation_topk"] is not None):
            raise ConfigError(
                f"{where}: distillation_topk must be set exactly when distillation_mode is "
                "topk_logits"
            )
        problem = TEACHER_KINDS[p["teacher_model_kind"]].check(p)
        if problem:
            raise ConfigError(f"{where}: {problem}")
    if trainer == "grpo" and p["delta"] is not None and p["delta"] <= 1 + p["epsilon_high"]:
        # At or below 1 + epsilon_high TRL's bound would also cap positive advantages' ratios:
        # no longer the dual clip, which acts on negative advantages only.
        bound = 1 + p["epsilon_high"]
        raise ConfigError(f"{where}: delta {p['delta']} must be above 1 + epsilon_high = {bound:g}")
    if (
        t["lr_schedule_per"] == "rollout_batch"
        and p.get("updates_per_generation", 1) > 1
        and t["lr_scheduler_type"] in METRIC_SCHEDULERS
    ):
        raise ConfigError(
            f"{where}: training.lr_schedule_per rollout_batch counts a schedule in rollout "
            f"batches; lr_scheduler_type {t['lr_scheduler_type']} follows a metric, not a count "
            "(use lr_schedule_per optimizer_update)"
        )
    if t["kl_budget"] is not None and t["kl_probe"]["prompts"] == 0:
        raise ConfigError(
            f"{where}: training.kl_budget stops a stage on the KL probe's measurement; "
            "set kl_probe.prompts above 0"
        )
    if t["bf16"] and t["dtype"] == "float16":
        raise ConfigError(f"{where}: bf16 mixed precision with float16 weights; use dtype bfloat16")
