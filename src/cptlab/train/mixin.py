"""What the cptlab trainers add to TRL's: the per-step log line, step timing, KL to the stage
start, the collapse monitor's decisions, the non-finite checks, and weights saved under the
same tensor names on every launch path."""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from accelerate.utils import gather_object
from torch.optim.lr_scheduler import LambdaLR
from trl.models import unwrap_model_for_generation

from cptlab.errors import ConfigError
from cptlab.train import compact_generation
from cptlab.train.monitor import CollapseError, CollapseMonitor, NonFiniteError
from cptlab.train.probe import KLProbe
from cptlab.train.rewards import UnscorableGuard, VerifierReward, merge_step_stats
from cptlab.train.settings import TrainingSettings
from cptlab.train.shared_prompt import LENGTH_GROUPS, shareable

log = logging.getLogger(__name__)

# TRL metric -> the common name both trainers' log lines carry (analysis reads these).
ALIASES = {
    "self_distillation/reprompt_sample_fraction": "reprompt_fraction",
    "self_distillation/success_group_fraction": "success_group_fraction",
    "self_distillation/distillation_loss": "distillation_loss",
}


@dataclass
class StageRecorder:
    """The per-stage state the trainer mixin reads and writes.

    Parameters:
        log_path (`Path`): the JSONL log written during training (one line per step), in the
            state folder so that it survives a kill; lines past a resumed checkpoint are dropped.
        reward (`VerifierReward`): the reward function (reward and reason statistics).
        monitor (`CollapseMonitor`): collapse statistics and thresholds.
        probe (`KLProbe | None`): the fixed probe for KL to the stage start.
        success_reward_threshold (`float`): reward counted as a success.
        kl_budget (`float | None`): stop the stage at the first probe measurement whose
            `kl_to_start` is at least this (`training.kl_budget`).
        unscorable (`UnscorableGuard`): ends the stage when its verifiers could not judge too
            many completions (`training.max_unscorable_fraction`).
    """

    log_path: Path
    reward: VerifierReward
    monitor: CollapseMonitor
    probe: KLProbe | None = None
    success_reward_threshold: float = 1.0
    kl_budget: float | None = None
    unscorable: UnscorableGuard = field(
        default_factory=lambda: UnscorableGuard(TrainingSettings.max_unscorable_fraction)
    )
    # outcome
    stopped: dict | None = None
    budget_reached: dict | None = None
    step_started: float | None = field(default=None, repr=False)


class StageTrainerMixin:
    """Mixed into TRL trainers (first in the bases). Needs `self.recorder` (a StageRecorder).

    Parameters:
        lr_schedule_per (`str`, *optional*, defaults to `"optimizer_update"`):
            What the learning-rate schedule counts. `"optimizer_update"` (TRL's behaviour): the
            scheduler steps once per optimizer update, and its warm-up and length are counted in
            updates. `"rollout_batch"` (verl's): the schedule, its warm-up and its length are
            counted in rollout batches, so every update of rollout batch k trains at
            `learning_rate * schedule(k)`. The two differ only when a rollout batch makes more
            than one update (`updates_per_generation`).
        weight_decay_on (`str`, *optional*, defaults to `"except_biases_and_norms"`):
            The parameters AdamW decays. `"except_biases_and_norms"` (transformers' `Trainer`):
            every parameter but biases and normalisation weights. `"all"` (verl's, one
            parameter group): every parameter.
    """

    recorder: StageRecorder
    lr_schedule_per: str
    weight_decay_on: str

    def __init__(
        self,
        *args,
        lr_schedule_per: str = "optimizer_update",
        weight_decay_on: str = "except_biases_and_norms",
        **kwargs,
    ) -> None:
        if lr_schedule_per not in ("optimizer_update", "rollout_batch"):
            raise ValueError(f"lr_schedule_per: unknown value {lr_schedule_per!r}")
        if weight_decay_on not in ("except_biases_and_norms", "all"):
            raise ValueError(f"weight_decay_on: unknown value {weight_decay_on!r}")
        self.lr_schedule_per = lr_schedule_per
        self.weight_decay_on = weight_decay_on
        super().__init__(*args, **kwargs)

    # ----- the optimizer and its schedule -------------------------------------------------------

    def get_decay_parameter_names(self, model: torch.nn.Module) -> list[str]:
        if self.weight_decay_on == "all":
            return [name for name, _ in model.named_parameters()]
        return super().get_decay_parameter_names(model)

    def create_scheduler(
        self, num_training_steps: int, optimizer: torch.optim.Optimizer | None = None
    ) -> torch.optim.lr_scheduler.LRScheduler:
        updates = self.updates_per_log_line()
        if self.lr_scheduler is not None or self.lr_schedule_per != "rollout_batch" or updates == 1:
            return super().create_scheduler(num_training_steps, optimizer)
        # transformers' schedule over the stage's rollout batches (warm-up included, counted by
        # get_warmup_steps in the same unit), then read at each update's rollout batch. Under
        # DeepSpeed without a scheduler section the Trainer builds it here too.
        scheduler = super().create_scheduler(num_training_steps // updates, optimizer)
        if not isinstance(scheduler, LambdaLR):  # spec.METRIC_SCHEDULERS, refused in the config
            raise TypeError(f"lr_schedule_per rollout_batch needs a LambdaLR, got {scheduler}")
        scheduler.lr_lambdas = [per_rollout_batch(f, updates) for f in scheduler.lr_lambdas]
        return scheduler

    # ----- saving -----------------------------------------------------------------------------

    def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
        # Under DeepSpeed the Trainer saves a state dict gathered from the engine, in which a
        # tied weight (Qwen's embedding and output layer) is two tensors: the checkpoint would
        # gain an `lm_head.weight` that the base lacks, and the drift analyses, which read the
        # tensors by name, would compare a different set. Saved as the model saves itself.
        if state_dict is not None:
            copies = tied_copies(self.accelerator.unwrap_model(self.model))
            state_dict = {k: v for k, v in state_dict.items() if k not in copies}
        super()._save(output_dir, state_dict=state_dict)

    # ----- the shared-prompt forward -----------------------------------------------------------

    def shares_prompts(self, model) -> bool:
        """Whether this forward of `model` takes cptlab.train.shared_prompt: the option is on
        (`shared_prompt_forward`, set by the RL trainers) and the model allows it."""
        return getattr(self, "shared_prompt_forward", False) and shareable(
            model, self.accelerator.unwrap_model(model)
        )

    def prompt_forward_groups(self) -> int:
        """How many length groups the shared-prompt forward splits a batch into."""
        return LENGTH_GROUPS

    # ----- compact rollout sampling -----------------------------------------------------------

    def check_compact_generation(self) -> None:
        """Fail at the start, not at the first rollout, when `compact_generation` is on and the
        trainer's sampling settings are ones it does not reproduce (the RL trainers call it)."""
        if getattr(self, "compact_generation", False) and not self.use_vllm:
            try:
                compact_generation.rollout_sampling(self.generation_kwargs)
            except ValueError as error:
                raise ConfigError(f"training.compact_generation: {error}") from None

    def samples_compactly(self) -> bool:
        """Whether rollouts take cptlab.train.compact_generation: the option is on (set by the
        RL trainers) and generation is HF's, not vLLM's."""
        return getattr(self, "compact_generation", False) and not self.use_vllm

    def compact_rollouts(self, prompt_ids: list[list[int]]) -> list[list[int]]:
        """One sampled completion per prompt row (ids up to and including its end token), from
        the model unwrapped as TRL unwraps it for `generate`."""
        with (
            unwrap_model_for_generation(
                self.model_wrapped,
                self.accelerator,
                gather_deepspeed3_params=self.args.ds3_gather_for_generation,
                generation_kwargs=self.generation_kwargs,
            ) as unwrapped,
            torch.no_grad(),
        ):
            return compact_generation.sample_completions(
                unwrapped, prompt_ids, **compact_generation.rollout_sampling(self.generation_kwargs)
            )

    # ----- timing and non-finite checks -------------------------------------------------------

    def updates_per_log_line(self) -> int:
        """Optimizer updates per logged step: a rollout batch's (RL), or one (SFT)."""
        per_batch = getattr(self.args, "steps_per_generation", None)
        return max(1, (per_batch or 0) // self.args.gradient_accumulation_steps)

    def training_step(self, model, inputs, num_items_in_batch=None):
        accumulation = self.args.gradient_accumulation_steps
        micro = getattr(self, "_stage_micro_steps", 0)  # micro-steps since this run started
        self._stage_micro_steps = micro + 1
        if micro % (accumulation * self.updates_per_log_line()) == 0:  # a logged step starts
            self.recorder.step_started = time.perf_counter()
        loss = super().training_step(model, inputs, num_items_in_batch)
        if not torch.isfinite(loss).all():
            raise NonFiniteError(
                f"non-finite loss ({loss.detach().float().cpu().tolist()}) at step "
                f"{self.state.global_step + 1} (micro-batch {micro % accumulation + 1}"
                f" of {accumulation}); the last good checkpoint is in {self.args.output_dir}"
            )
        return loss

    def _get_grad_norm(self, model, grad_norm=None):
        # Runs after clipping and before optimizer.step(): the weights are still finite here.
        grad_norm = super()._get_grad_norm(model, grad_norm=grad_norm)
        value = float(grad_norm) if grad_norm is not None else 0.0
        if not math.isfinite(value):
            raise NonFiniteError(
                f"non-finite gradient norm ({value}) at step {self.state.global_step + 1}; "
                f"the last good checkpoint is in {self.args.output_dir}"
            )
        return grad_norm

    # ----- the per-step log line --------------------------------------------------------------

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        rec = self.recorder
        is_step = "loss" in logs and self.model.training
        if not is_step:
            return super().log(logs, start_time)
        step = self.state.global_step
        if "grad_norm" in logs and logs["grad_norm"] is not None:
            if not math.isfinite(float(logs["grad_norm"])):  # e.g. DeepSpeed, checked late
                raise NonFiniteError(f"non-finite gradient norm at step {step}")
        extra: dict[str, float] = {}
        if rec.step_started is not None:
            extra["step_seconds"] = time.perf_counter() - rec.step_started
        stats = gather_object([rec.reward.take_step_stats(rec.success_reward_threshold)])
        reward_metrics, reasons = merge_step_stats(stats)
        extra.update(reward_metrics)
        extra.update(rec.monitor.step_metrics(gather_object([rec.monitor.take_batch()])))
        # Logged once per rollout batch (logging_steps = updates per rollout batch).
        logged_step = step // self.updates_per_log_line()
        if hasattr(self.args, "steps_per_generation"):
            extra["rollout_batch"] = logged_step
        if rec.probe is not None and logged_step % rec.probe.every == 0:
            extra.update(rec.probe.measure(self.model))
        logs.update(extra)
        super().log(logs, start_time)  # TRL adds its metrics to `logs` here
        record = dict(self.state.log_history[-1])
        for source, alias in ALIASES.items():
            if source in record:
                record[alias] = record[source]
        record["reasons"] = reasons
        if len(stats) > 1:  # which prompts each process trained on (disjoint, whole groups)
            record["rank_rows"] = [part["rows"] for part in stats]
        if self.is_world_process_zero():
            _append_line(rec.log_path, record)
        rec.unscorable.add(stats)
        rec.unscorable.check(logged_step)  # every process has the same gathered counts

        action = rec.monitor.judge(step, record)
        if rec.monitor.streak and rec.monitor.action != "warn":
            # Alarming weights are never checkpointed when the alarm may end the stage: the last
            # checkpoint then is the last good one (and save_total_limit cannot rotate it away).
            self.control.should_save = False
        if action == "warn":
            log.warning("%s", rec.monitor.message)
        elif action == "error":
            raise CollapseError(rec.monitor.message)
        elif action == "stop":
            log.error("%s: stopping the stage", rec.monitor.message)
            rec.stopped = {
                "step": step,
                "message": rec.monitor.message,
                "last_ok_step": rec.monitor.last_ok_step,
            }
            self.control.should_training_stop = True
        if rec.kl_budget is not None and rec.stopped is None:
            self.stop_at_budget(logged_step, record.get("kl_to_start"))

    def stop_at_budget(self, logged_step: int, kl: float | None) -> None:
        """End the stage once the probe's KL to the stage start reaches `kl_budget`; the
        weights of this step are the stage's."""
        kl = gather_object([kl])[0]  # process 0's measurement decides for every process
        if kl is None or kl < self.recorder.kl_budget:
            return
        log.info("KL to the stage start %.4f reached the budget: the stage ends", kl)
        self.recorder.budget_reached = {"step": logged_step, "kl_to_start": kl}
        self.control.should_training_stop = True


def per_rollout_batch(lr_lambda: Callable[[int], float], updates: int) -> Callable[[int], float]:
    """`lr_lambda` (a multiplier per scheduler step) read once per rollout batch of `updates`
    optimizer updates: update u trains at `lr_lambda(u // updates)`, as verl steps its scheduler
    once per rollout batch (`update_actor`) while its optimizer steps once per mini-batch.

    A plain function, not an object: LambdaLR saves no state for it, so a checkpoint's scheduler
    state is its step count alone, and a resumed stage rebuilds the same function."""

    def at_rollout_batch(update: int) -> float:
        return lr_lambda(update // updates)

    return at_rollout_batch


def tied_copies(model: torch.nn.Module) -> set[str]:
    """The names under which a parameter appears a second time (tied weights): a model's own
    `save_pretrained` writes each such parameter once, under its first name."""
    seen: set[int] = set()
    copies = set()
    for name, parameter in model.named_parameters(remove_duplicate=False):
        if id(parameter) in seen:
            copies.add(name)
        seen.add(id(parameter))
    return copies


def _append_line(path: Path, record: dict) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        # No fsync: lines past the resumed checkpoint are dropped and redone on resume anyway.
        handle.write(json.dumps(record, sort_keys=True, default=_jsonable) + "\n")


def _jsonable(value):
    if isinstance(value, torch.Tensor):
        return value.item() if value.numel() == 1 else value.tolist()
    return str(value)
