"""One stage's settings: a named method entry and the `training` section, with defaults filled
in and checked against the schema those sections' dataclasses state (cptlab.train.settings).
Errors are ConfigError naming the key."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cptlab.config import check_schema
from cptlab.errors import ConfigError
from cptlab.train.settings import (
    METHOD_SETTINGS,
    MethodSettings,
    TrainingSettings,
    schema_sections,
)
from cptlab.train.teachers import TEACHER_KINDS, TeacherKind, canonical_kind

# transformers schedulers driven by a metric rather than a step count: nothing to count in
# rollout batches (training.lr_schedule_per).
METRIC_SCHEDULERS = ("reduce_lr_on_plateau", "greedy")


def _validate(section: str, value: Any, where: str) -> None:
    """Check one top-level section (`methods` or `training`) against the project schema."""
    check_schema(value, schema_sections()[section], where, section)


def training_section(config: dict, source: str = "config") -> TrainingSettings:
    """The config's `training` section over its defaults (no method's overrides)."""
    _validate("training", config.get("training", {}), source)
    return TrainingSettings().with_overrides(config.get("training", {}))


@dataclass(frozen=True)
class StageSettings:
    """Everything one stage needs from the config, resolved and checked.

    Parameters:
        method (`str`): the method's name in `methods`.
        trainer (`str`): `grpo`, `sdpo` or `sft`.
        params (`GRPOSettings`, `SDPOSettings` or `SFTSettings`): the method's keys with the
            trainer's defaults filled in.
        training (`TrainingSettings`): the `training` section with defaults and the method's
            overrides.
        domain (`str`): the domain trained in this stage.
        train_benchmark (`str`): the domain's `train` benchmark (its rows are the prompts).
        steps (`int`): rollout batches of this stage (`domain_steps[domain]` or `steps`).
    """

    method: str
    trainer: str
    params: MethodSettings = field(repr=False)
    training: TrainingSettings = field(repr=False)
    domain: str
    train_benchmark: str
    steps: int

    @property
    def teacher(self) -> TeacherKind | None:
        """The SDPO teacher's kind (cptlab.train.teachers); None for another trainer."""
        return TEACHER_KINDS[self.params.teacher_model_kind] if self.trainer == "sdpo" else None

    @property
    def updates(self) -> int:
        """Optimizer updates per rollout batch."""
        return int(self.params.updates_per_generation)

    @property
    def optimizer_steps(self) -> int:
        """Optimizer updates of this stage (TRL's max_steps)."""
        return self.steps * self.updates

    def as_dict(self, domain_steps: bool = True) -> dict:
        """The settings as the stage's provenance records them (fingerprint, manifest).
        `domain_steps` False gives the workflow's rerun trigger: without training.domain_steps,
        the other domains' step counts (this stage's is `steps`), so that changing one domain's
        count reruns only that domain's stages, and without training.report_to, where the logs
        go (it changes nothing the stage computes)."""
        training = self.training.as_dict()
        if not domain_steps:
            del training["domain_steps"], training["report_to"]
        return {
            "method": self.method,
            "trainer": self.trainer,
            "params": self.params.as_dict(),
            "training": training,
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
    return StageSettings(
        method=method,
        trainer=trainer,
        params=params,
        training=training,
        domain=domain,
        train_benchmark=domains[domain]["train"],
        steps=training.steps_of(domain),
    )


def method_settings(
    config: dict, method: str, source: str = "config"
) -> tuple[str, MethodSettings, TrainingSettings]:
    """(trainer, the method's keys over its trainer's defaults, the training section with the
    method's overrides), checked: every key is one its trainer takes, and the keys agree."""
    entry = dict(config["methods"][method])
    trainer = entry.pop("trainer")
    overrides = entry.pop("training", {})
    where = f"{source}: methods.{method}"
    settings_class = METHOD_SETTINGS[trainer]
    unknown = sorted(set(entry) - set(settings_class.names()))
    if unknown:
        raise ConfigError(
            f"{where}: the {trainer} trainer takes no key {unknown[0]!r}; its keys: "
            f"{', '.join(['trainer', 'training', *settings_class.names()])}"
        )
    _validate("training", overrides, f"{where}.training")
    training = training_section(config, source).with_overrides(overrides)
    if trainer == "sdpo" and "teacher_model_kind" in entry:
        entry["teacher_model_kind"] = canonical_kind(entry["teacher_model_kind"], where)
    params = settings_class(**entry)
    _check_semantics(trainer, params, training, where)
    return trainer, params, training


def batch_shape(
    training: TrainingSettings, world: int, updates: int = 1, where: str = "training"
) -> tuple[int, int]:
    """(completions per micro-batch and process, gradient accumulation steps of one optimizer
    update) when one rollout batch of prompts_per_step x num_generations completions over
    `world` processes makes `updates` optimizer updates."""
    batch = training.prompts_per_step * training.num_generations
    if training.prompts_per_step % updates:
        raise ConfigError(
            f"{where}: prompts_per_step {training.prompts_per_step} must split into "
            f"updates_per_generation {updates} mini-batches of whole prompts"
        )
    micro = training.per_device_train_batch_size or batch // (world * updates)
    if micro < 1 or batch % (micro * world * updates):
        raise ConfigError(
            f"{where}: prompts_per_step * num_generations = {batch} completions per rollout "
            f"batch must split into updates_per_generation {updates} x per_device_train_batch_size "
            f"{micro} x {world} process(es)"
        )
    return micro, batch // (micro * world * updates)


def sft_batch_shape(
    training: TrainingSettings, world: int, where: str = "training"
) -> tuple[int, int]:
    """(examples per micro-batch and process, gradient accumulation steps) of one SFT step of
    prompts_per_step examples (one reference answer per prompt) over `world` processes."""
    prompts = training.prompts_per_step
    micro = training.per_device_train_batch_size or prompts // world
    if micro < 1 or prompts % (micro * world):
        raise ConfigError(
            f"{where}: prompts_per_step {prompts} examples per SFT step must split into "
            f"per_device_train_batch_size {micro} x {world} process(es)"
        )
    return micro, prompts // (micro * world)


def step_shape(
    trainer: str,
    params: MethodSettings,
    training: TrainingSettings,
    world: int,
    where: str = "training",
) -> tuple[int, int]:
    """(micro-batch per process, gradient accumulation steps) of one optimizer update of
    `trainer`: an SFT step's examples, or a share of an RL rollout batch."""
    if trainer == "sft":
        return sft_batch_shape(training, world, where)
    return batch_shape(training, world, params.updates_per_generation, where)


def check_methods(config: dict, processes: int = 1, source: str = "config") -> None:
    """Check every method entry as its stages will use it, on `processes` training processes
    (what `cptlab train-stage` would find out only when a stage starts)."""
    for method in config.get("methods") or {}:
        trainer, params, training = method_settings(config, method, source)
        step_shape(trainer, params, training, processes, f"{source}: methods.{method} (training)")


def _check_semantics(trainer: str, p: MethodSettings, t: TrainingSettings, where: str) -> None:
    """Cross-key rules the schema cannot express."""
    if trainer == "sdpo":
        if p.distillation_mode == "sampled_token" and p.distillation_alpha != 1.0:
            raise ConfigError(
                f"{where}: distillation_mode sampled_token is reverse KL only; "
                f"set distillation_alpha 1.0 (got {p.distillation_alpha})"
            )
        if (p.distillation_mode == "topk_logits") != (p.distillation_topk is not None):
            raise ConfigError(
                f"{where}: distillation_topk must be set exactly when distillation_mode is "
                "topk_logits"
            )
        problem = TEACHER_KINDS[p.teacher_model_kind].check(p)
        if problem:
            raise ConfigError(f"{where}: {problem}")
    if trainer == "grpo" and p.delta is not None and p.delta <= 1 + p.epsilon_high:
        # At or below 1 + epsilon_high TRL's bound would also cap positive advantages' ratios:
        # no longer the dual clip, which acts on negative advantages only.
        bound = 1 + p.epsilon_high
        raise ConfigError(f"{where}: delta {p.delta} must be above 1 + epsilon_high = {bound:g}")
    if (
        t.lr_schedule_per == "rollout_batch"
        and p.updates_per_generation > 1
        and t.lr_scheduler_type in METRIC_SCHEDULERS
    ):
        raise ConfigError(
            f"{where}: training.lr_schedule_per rollout_batch counts a schedule in rollout "
            f"batches; lr_scheduler_type {t.lr_scheduler_type} follows a metric, not a count "
            "(use lr_schedule_per optimizer_update)"
        )
    if t.kl_budget is not None and t.kl_probe.prompts == 0:
        raise ConfigError(
            f"{where}: training.kl_budget stops a stage on the KL probe's measurement; "
            "set kl_probe.prompts above 0"
        )
    if t.bf16 and t.dtype == "float16":
        raise ConfigError(f"{where}: bf16 mixed precision with float16 weights; use dtype bfloat16")
