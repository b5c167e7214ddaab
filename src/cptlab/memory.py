"""`cptlab plan-memory`: each GPU job's predicted peak memory per GPU at the config's sizes.

A job's peak is what it holds between steps plus the largest of the moments of a step. Every
term is printed with its arithmetic; the assumptions are the constants below, each with its
reason. Where a job's peak exceeds `resources.<kind>.gpu_memory_gib` the command prints one line
per such job and fails with a ConfigError (exit 2), as for any bad config.

Training (per process; each process has its GPU). Held between steps:
  weights       parameters x training.dtype, whole on every GPU (ZeRO-2 does not shard them)
  fp32 master   4 B x parameters / processes (DeepSpeed's mixed precision, ZeRO >= 1)
  optimizer     Adam's two moments, 8 B x parameters / processes (ZeRO >= 1); without DeepSpeed
                in the weights' dtype, whole (torch's AdamW)
  teacher       SDPO: a whole copy on every GPU in the student's dtype (TRL builds it as a
                ZeRO-0 engine; the EMA teacher's float32 weights live in host memory)
  vLLM          colocated rollouts: gpu_memory_utilization x the GPU's memory; with
                enable_sleep_mode only while it generates (TRL sleeps it at level 2 after)
  CUDA runtime  CUDA_RUNTIME_BYTES
The moments, one at a time: the rollouts (vLLM awake); the no-gradient log-probabilities over
the rollout batch (GRPO's old ones, SDPO's rollout weights; TRL's fused LM head, in chunks of
training.log_prob_micro_batch_size_per_device rows) and the KL probe (its logits materialised);
the update's forward, SDPO's teacher forward and entropy log, the logits' loss and backward,
the layers' backward (with the gradients: ZeRO-2's partition in data_types.grad_accum_dtype and
its buckets, made at the first backward and freed after the step); the optimizer step.

Evaluation (vLLM): the engine's share, gpu_memory_utilization x the GPU's memory, which holds
its weights and its KV cache; the job cannot start when the weights and one longest sequence do
not fit in it.

The sizes are the config's limits: every prompt and completion at its longest. No job imports
this module, so a change of an assumption reruns nothing; top-level imports stay light.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cptlab.cli import CONFIG, command
from cptlab.model_sizes import FP32, Architecture, model_config

GIB = 2**30
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}

# What CUDA, NCCL and a sleeping vLLM engine hold outside torch's allocations: the CUDA context
# (about 0.5 GiB with torch's kernels loaded), NCCL's communicator buffers over 8 GPUs, and the
# CUDA graphs a vLLM engine keeps asleep. An allowance, not a measurement.
CUDA_RUNTIME_BYTES = 3 * GIB

# TRL's GRPOConfig.vllm_gpu_memory_utilization default (tests/test_memory.py checks it).
TRL_VLLM_GPU_MEMORY_UTILIZATION = 0.3
# cptlab.evaluation.vllm_backend.build_llm's default share of the GPU (tested alike).
EVAL_VLLM_GPU_MEMORY_UTILIZATION = 0.9

# Which SDPO teacher kinds (cptlab.train.teachers) hold a second model on the GPU, in the
# student's dtype; the student kind is the student itself. The EMA kind's float32 weights, the
# EMA's state, are in host memory (cptlab.train.ema_teacher): a note, not a GPU term.
TEACHER_COPY = {"frozen": True, "trust_region": True, "ema": True, "student": False}

# Logits: one tensor of [rows, completion, vocabulary] in the model's dtype is a unit, u.
# SDPO's loss (top-k with a tail) and its backward, over the student's and the teacher's logits:
# the largest multiple bench/bench_sdpo_memory.py measured (4.27-4.79 u; notebook/speed.md).
SDPO_LOSS_MULTIPLE = 4.8
# cptlab's SDPO logs the student's entropy in fp32, ENTROPY_POSITIONS positions at a time: the
# log-softmax, its exp and their product live at once (cptlab.train.sdpo.mean_entropy).
ENTROPY_POSITIONS = 256
ENTROPY_FP32_COPIES = 3
# TRL's fused LM head (trl.kernels.chunked_logprob): a projection buffer of TILE_TOKENS x
# TILE_VOCAB in the compute dtype (fewer rows for fewer tokens, never fewer columns); its
# backward accumulates the head's and the hidden states' gradients in fp32 and returns them in
# the model's dtype. With Triton (CUDA) it scores the labelled positions only.
TILE_TOKENS, TILE_VOCAB = 4096, 32768
# Without Triton (a CPU) the kernel scores every position and folds each tile with torch
# operations: three fp32 copies of the tile's used columns in the forward, seven in the backward
# (_forward_tile, _backward_tile: the upcast, the scaled logits, log p, p, the gradient, two
# temporaries of the target's term).
FUSED_FALLBACK_FP32_COPIES = {"forward": 3, "backward": 7}
# A forward that materialises its logits for a loss with gradient (GRPO's shared-prompt
# forward): the logits, their temperature-scaled copy and the backward's gradient of them.
# Estimated from the code, not measured.
MATERIALISED_LOGITS_MULTIPLE = 3


def _gib(value: float) -> str:
    """Bytes in GiB, or in MiB below a tenth of one (a small model's terms)."""
    return f"{value / GIB:.2f} GiB" if value >= GIB / 10 else f"{value / 2**20:.2f} MiB"


def _count(parameters: int) -> str:
    return f"{parameters / 1e9:.2f} B" if parameters >= 1e8 else f"{parameters / 1e6:.2f} M"


@dataclass(frozen=True)
class Term:
    """One amount of memory: what it is, its bytes, and its arithmetic in words."""

    name: str
    bytes: float
    how: str


@dataclass(frozen=True)
class Moment:
    """A moment of a job's step: the memory it adds to what the job holds between steps."""

    name: str
    terms: tuple[Term, ...]

    @property
    def bytes(self) -> float:
        return sum(t.bytes for t in self.terms)


@dataclass
class JobMemory:
    """One kind of job's prediction, per GPU (per process on a CPU job)."""

    kind: str
    name: str
    jobs: list[str]
    resident: list[Term]
    moments: list[Moment]
    limit: float | None = None  # one GPU's bytes; None: no GPU, or its memory not stated
    per_gpu: int = 1  # processes sharing one GPU
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # reasons the job cannot start

    @property
    def peak_moment(self) -> Moment | None:
        return max(self.moments, key=lambda m: m.bytes, default=None)

    @property
    def peak(self) -> float:
        moment = self.peak_moment
        held = sum(t.bytes for t in self.resident)
        return (held + (moment.bytes if moment else 0)) * self.per_gpu

    @property
    def fits(self) -> bool:
        return not self.problems and (self.limit is None or self.peak <= self.limit)


@dataclass(frozen=True)
class Zero:
    """What a DeepSpeed config does to memory: its ZeRO stage, whether it keeps fp32 master
    weights (mixed precision), the dtype it accumulates gradients in, and its reduce buckets."""

    stage: int
    mixed: bool
    grad_bytes: int
    bucket_bytes: float

    @classmethod
    def read(cls, path: str, bf16: bool, weight_bytes: int, hidden: int) -> Zero:
        from cptlab.errors import ConfigError

        try:
            ds = json.loads(Path(path).read_text())
        except OSError as err:
            raise ConfigError(f"training.deepspeed: {path}: {err.strerror}") from err
        zero = ds.get("zero_optimization") or {}
        enabled = [ds.get(k, {}).get("enabled", False) for k in ("bf16", "fp16")]
        mixed = any(bf16 if e == "auto" else bool(e) for e in enabled) and weight_bytes < FP32
        accum = str((ds.get("data_types") or {}).get("grad_accum_dtype")).lower()
        grad_bytes = {"fp32": 4, "float32": 4, "bf16": 2, "bfloat16": 2, "fp16": 2}.get(
            accum, weight_bytes
        )
        bucket = zero.get("reduce_bucket_size", 5e8)
        bucket = hidden * hidden if bucket == "auto" else float(bucket)  # accelerate's "auto"
        buffers = 2 if zero.get("overlap_comm") else 1
        return cls(int(zero.get("stage", 0)), mixed, grad_bytes, buffers * bucket * weight_bytes)


@dataclass(frozen=True)
class Forward:
    """One forward's size: rows, tokens (its width) and the positions per row whose logits (or
    log-probabilities) it computes."""

    rows: int
    tokens: int
    kept: int


@dataclass(frozen=True)
class StepShape:
    """The largest forward of each kind in a training step.

    update: the student's forward with gradient (a micro-batch); teacher: SDPO's teacher
    forward; log_probs: a no-gradient log-probability forward over the rollout batch (GRPO's
    old log-probabilities, SDPO's rollout weights); probe: the KL probe's (cptlab.train.probe:
    logits over every token; kept = its completion).
    """

    update: Forward
    teacher: Forward | None = None
    log_probs: Forward | None = None
    probe: Forward | None = None


def log_prob_rows(training, micro: int) -> int:
    """Rows of a no-gradient log-probability forward over a rollout batch, and of the KL probe:
    training.log_prob_micro_batch_size_per_device, else the micro-batch (#49: no forward over
    more). Read where the key exists, so that this module runs beside a trainer without it."""
    return getattr(training, "log_prob_micro_batch_size_per_device", None) or micro


def step_shape(settings, processes: int) -> StepShape:
    """A stage's largest forwards at the config's sizes: every prompt and completion at its
    limit."""
    from cptlab.train.spec import step_shape as batch_split

    t = settings.training
    micro, _ = batch_split(settings.trainer, settings.params, t, processes)
    prompt, completion = t.max_prompt_length, t.max_completion_length
    chunk = log_prob_rows(t, micro)
    teacher = log_probs = probe = None
    if settings.trainer == "sdpo":
        teacher = Forward(micro, settings.params.max_reprompt_len + completion, completion)
    if t.use_vllm and settings.trainer in ("grpo", "sdpo"):
        log_probs = Forward(chunk, prompt + completion, completion)
    if t.kl_probe.prompts > 0:
        tokens = min(t.kl_probe.max_tokens, completion)
        probe = Forward(min(chunk, t.kl_probe.prompts), prompt + tokens, tokens)
    return StepShape(Forward(micro, prompt + completion, completion), teacher, log_probs, probe)


def measured_shape(settings, forwards: Mapping) -> StepShape:
    """The StepShape of the largest forwards a stage recorded (its manifest's `memory`, one
    process's `forwards`: cptlab.train.peak_memory), to predict what it measured."""

    def forward(kind: str, kept: int | None = None) -> Forward | None:
        seen = forwards.get(kind)
        if seen is None:
            return None
        return Forward(seen["rows"], seen["tokens"], kept or math.ceil(seen["kept"] / seen["rows"]))

    t = settings.training
    return StepShape(
        update=forward("grad"),
        teacher=forward("teacher") if settings.trainer == "sdpo" else None,
        log_probs=forward("nograd") if t.use_vllm else None,
        probe=forward("eval", min(t.kl_probe.max_tokens, t.max_completion_length)),
    )


def training_memory(
    settings,
    arch: Architecture,
    processes: int,
    shape: StepShape,
    gpu_bytes: float | None,
    on_gpu: bool = True,
) -> JobMemory:
    """One training stage's memory per process (cptlab.train.spec.StageSettings `settings`).
    `on_gpu` False (a CPU job, or what the rehearsal measures) leaves out vLLM's and CUDA's
    terms, and takes the fused LM head's fallback without Triton."""
    t = settings.training
    b = DTYPE_BYTES[arch.dtype if t.dtype == "auto" else t.dtype]
    n, gb = arch.parameters, _count(arch.parameters)
    zero = Zero.read(t.deepspeed, t.bf16, b, arch.hidden) if t.deepspeed else None
    job = JobMemory(
        "train", settings.method, [], held_terms(settings, arch, zero, processes, b), []
    )
    grads = gradient_term(arch, zero, processes, b)
    job.moments = update_moments(settings, arch, shape, b, grads, triton=on_gpu)
    if shape.log_probs is not None:
        name = "rollout weights" if settings.trainer == "sdpo" else "old log-probabilities"
        job.moments += fused_no_grad_moments(name, arch, shape.log_probs, b, triton=on_gpu)
    if shape.probe is not None:
        job.moments += probe_moments(arch, shape.probe, b)
    if zero is not None and zero.stage >= 1 and zero.mixed and zero.grad_bytes < FP32:
        fp32 = Term("fp32 gradients", n * FP32 / processes, f"{gb} x 4 B / {processes}")
        job.moments.append(Moment("optimizer step", (grads, fp32)))
    kind = settings.params.teacher_model_kind if settings.trainer == "sdpo" else None
    if kind == "ema" and b < FP32:
        # cptlab.train.ema_teacher: the update runs on the host's float32 weights, then writes
        # their rounding into the teacher one parameter at a time
        largest = Term("a parameter in fp32", arch.vocab * arch.hidden * FP32, "the embeddings")
        job.moments.append(Moment("teacher EMA update", (largest,)))
        job.notes.append(f"host memory: the EMA teacher's float32 weights, {_gib(n * FP32)}")
    job.limit = gpu_bytes
    if on_gpu:
        job.resident.append(Term("CUDA runtime", CUDA_RUNTIME_BYTES, "context, NCCL, allowance"))
        if t.use_vllm and t.vllm_mode == "colocate":
            share = float(t.vllm.get("gpu_memory_utilization", TRL_VLLM_GPU_MEMORY_UTILIZATION))
            vllm = Term("vLLM", share * (gpu_bytes or 0), f"{share:g} x the GPU's memory")
            if gpu_bytes is None:
                job.notes.append("vLLM's share not counted: the GPU's memory is not stated")
            elif t.vllm.get("enable_sleep_mode"):
                job.moments.append(Moment("rollouts (vLLM awake)", (vllm,)))
            else:
                job.resident.append(vllm)
            if gpu_bytes is not None:
                job.notes += vllm_capacity(arch, share, gpu_bytes, shape.update.tokens, b)
    elif t.use_vllm:
        job.notes.append(
            "CPU job: vLLM's CPU build sizes its process to gpu_memory_utilization x the host's "
            "memory (vllm/v1/worker/cpu_worker.py); not counted"
        )
    return job


def held_terms(
    settings, arch: Architecture, zero: Zero | None, processes: int, b: int
) -> list[Term]:
    """What a training process holds between steps: weights, optimizer state and the SDPO
    teacher (vLLM's share and CUDA's are added by training_memory)."""
    n, gb = arch.parameters, _count(arch.parameters)
    terms = [Term("weights", n * b, f"{gb} x {b} B, whole on every GPU")]
    if zero is None:
        terms.append(Term("optimizer", n * 2 * b, f"Adam's 2 moments, {gb} x 2 x {b} B"))
    else:
        shards = processes if zero.stage >= 1 else 1
        if zero.mixed:
            terms.append(Term("fp32 master", n * FP32 / shards, f"{gb} x 4 B / {shards}"))
        terms.append(
            Term("optimizer", n * 2 * FP32 / shards, f"Adam's 2 moments, {gb} x 8 B / {shards}")
        )
    if settings.trainer == "sdpo" and TEACHER_COPY[settings.params.teacher_model_kind]:
        kind = settings.params.teacher_model_kind
        terms.append(Term("teacher", n * b, f"{kind}: {gb} x {b} B, whole on every GPU"))
    return terms


def gradient_term(arch: Architecture, zero: Zero | None, processes: int, b: int) -> Term:
    """The gradients of an update, from its first backward to the optimizer step: ZeRO-2's
    partition and its reduce buckets (made at the first backward, freed after the step), or
    whole gradients."""
    n, gb = arch.parameters, _count(arch.parameters)
    if zero is None:
        return Term("gradients", n * b, f"{gb} x {b} B")
    shards = processes if zero.stage >= 2 else 1
    return Term(
        "gradients",
        n * zero.grad_bytes / shards + zero.bucket_bytes,
        f"{gb} x {zero.grad_bytes} B / {shards} + reduce buckets {_gib(zero.bucket_bytes)} "
        f"(ZeRO-{zero.stage})",
    )


def fused_head_terms(
    arch: Architecture, rows: int, tokens: int, kept: int, b: int, triton: bool, backward: bool
) -> list[Term]:
    """TRL's fused LM head over `rows` x `tokens` (`kept` labelled positions per row): its
    projection buffer, and without Triton its torch fold; the backward's fp32 gradients."""
    n = rows * kept if triton else rows * (tokens - 1)
    tile_rows, columns = min(n, TILE_TOKENS), min(arch.vocab, TILE_VOCAB)
    terms = [
        Term("logits tile", tile_rows * TILE_VOCAB * b, f"[{tile_rows:,}, {TILE_VOCAB:,}] x {b} B")
    ]
    if not triton:
        copies = FUSED_FALLBACK_FP32_COPIES["backward" if backward else "forward"]
        terms.append(
            Term(
                "tile fold (torch)",
                copies * tile_rows * columns * FP32,
                f"{copies} x [{tile_rows:,}, {columns:,}] x 4 B, no Triton",
            )
        )
    if backward:
        terms.append(
            Term(
                "head gradients",
                (FP32 + b) * (arch.vocab + n) * arch.hidden,
                f"[{arch.vocab:,} + {n:,}, {arch.hidden:,}] x (4 + {b}) B",
            )
        )
    return terms


def update_moments(
    settings, arch: Architecture, shape: StepShape, b: int, grads: Term, triton: bool = True
) -> list[Moment]:
    """The update's moments: the forward with gradient, the logits' loss and backward, the
    layers' backward; SDPO adds its teacher's forward and the entropy log. The gradients exist
    from an update's first backward on, so in every moment of it."""
    t = settings.training
    update = shape.update
    m, s, c, v = update.rows, update.tokens, update.kept, arch.vocab
    layer = arch.layer_activations(m, s, b)
    outside = arch.outside_layers(m, s, b)
    if t.gradient_checkpointing:
        kept = arch.layers * m * s * arch.hidden * b + outside
        saved = Term(
            "activations", kept, f"checkpointed: {arch.layers} layer inputs of {m} x {s:,} tokens"
        )
        recompute = Term("layer recomputed", layer, f"one layer's activations, {m} x {s:,} tokens")
    else:
        saved = Term(
            "activations", arch.layers * layer + outside, f"{arch.layers} layers, {m} x {s:,}"
        )
        recompute = Term("layer recomputed", 0.0, "no checkpointing")
    head_grad = Term("LM head gradient", v * arch.hidden * b, f"[{v:,}, {arch.hidden:,}] x {b} B")
    backward = Moment("update: layers' backward", (saved, grads, recompute, head_grad))
    unit = m * c * v * b
    u = f"[{m}, {c:,}, {v:,}] x {b} B = {_gib(unit)}"
    if settings.trainer == "sdpo":
        teacher = shape.teacher or update
        teacher_layer = arch.no_grad_layer(teacher.rows, teacher.tokens, b)
        positions = min(m * c, ENTROPY_POSITIONS)
        entropy = ENTROPY_FP32_COPIES * positions * v * FP32
        moments = [
            Moment("update: student forward", (saved, grads, Term("logits", 2 * unit, f"2 x {u}"))),
            Moment(
                "update: teacher forward",
                (
                    saved,
                    grads,
                    Term("student logits", unit, u),
                    Term(
                        "teacher",
                        max(teacher_layer, 2 * unit),
                        f"a layer at {teacher.rows} x {teacher.tokens:,} tokens, or 2 logits",
                    ),
                ),
            ),
            Moment(
                "update: entropy log",
                (
                    saved,
                    grads,
                    Term("logits", 2 * unit, f"student's and teacher's, 2 x {u}"),
                    Term(
                        "entropy",
                        entropy,
                        f"{ENTROPY_FP32_COPIES} x [{positions:,}, {v:,}] x 4 B",
                    ),
                ),
            ),
            Moment(
                "update: loss and backward",
                (
                    saved,
                    grads,
                    Term("logits", SDPO_LOSS_MULTIPLE * unit, f"{SDPO_LOSS_MULTIPLE} x {u}"),
                ),
            ),
            backward,
        ]
        if settings.params.teacher_model_kind == "trust_region":
            lerp = Term("logits", 4 * unit, f"student, teacher, student as teacher, lerp: 4 x {u}")
            moments.append(Moment("update: trust region", (saved, grads, lerp)))
        return moments
    if t.shared_prompt_forward:
        logits = Term(
            "logits", MATERIALISED_LOGITS_MULTIPLE * unit, f"{MATERIALISED_LOGITS_MULTIPLE} x {u}"
        )
        return [Moment("update: forward and loss", (saved, grads, logits)), backward]
    head = fused_head_terms(arch, m, s, c, b, triton, backward=True)
    return [Moment("update: fused LM head", (saved, grads, *head)), backward]


def fused_no_grad_moments(
    name: str, arch: Architecture, forward: Forward, b: int, triton: bool = True
) -> list[Moment]:
    """A no-gradient forward through TRL's fused LM head: its layers, one at a time, then the
    head's tiles."""
    r, s, c = forward.rows, forward.tokens, forward.kept
    layer = Term("layer", arch.no_grad_layer(r, s, b), f"one layer without gradient, {r} x {s:,}")
    head = fused_head_terms(arch, r, s, c, b, triton, backward=False)
    return [
        Moment(f"{name} (no gradient): layers", (layer,)),
        Moment(f"{name} (no gradient): fused LM head", tuple(head)),
    ]


def probe_moments(arch: Architecture, forward: Forward, b: int) -> list[Moment]:
    """The KL probe's forward without gradient (cptlab.train.probe): its layers, one at a time,
    then the logits of every position, and an fp32 copy and log-softmax of the completion's."""
    r, s, c, v = forward.rows, forward.tokens, forward.kept, arch.vocab
    layer = Term("layer", arch.no_grad_layer(r, s, b), f"one layer without gradient, {r} x {s:,}")
    fp32 = r * c * v * FP32
    logits = Term(
        "logits",
        max(r * s * v * b + fp32, 2 * fp32),
        f"[{r}, {s:,}, {v:,}] x {b} B + [{r}, {c:,}, {v:,}] x 4 B",
    )
    return [
        Moment("KL probe (no gradient): layers", (layer,)),
        Moment("KL probe (no gradient): logits", (logits,)),
    ]


def vllm_capacity(
    arch: Architecture, share: float, gpu_bytes: float, tokens: int, b: int
) -> list[str]:
    """What vLLM's share holds beside the weights: how many sequences of `tokens` its KV cache
    keeps (an upper bound: vLLM's own activations come out of it too)."""
    free = share * gpu_bytes - arch.parameters * b
    per_sequence = arch.kv_cache_per_token(b) * tokens
    return [
        f"vLLM: {_gib(share * gpu_bytes)} - weights {_gib(arch.parameters * b)} leaves at most "
        f"{max(free, 0) / per_sequence:.1f} sequences of {tokens:,} tokens in its KV cache "
        f"({arch.kv_cache_per_token(b) / 1024:.0f} KiB a token)"
    ]


def evaluation_memory(
    config: Mapping, arch: Architecture, gpu_bytes: float | None, on_gpu: bool = True
) -> JobMemory:
    """An evaluation job's memory: the vLLM engine's share of its GPU, or (backend hf) the
    weights, the KV cache of one generate batch and its last logits. On a CPU (`on_gpu`
    False, `gpu_bytes` the host's memory) vLLM's CPU build sizes the whole process to its share
    (vllm/v1/worker/cpu_worker.py: the KV cache is the share less the process's memory)."""
    from cptlab.evaluation.settings import EvalSettings

    ev = EvalSettings.from_config(config)
    b = DTYPE_BYTES.get(str(ev.vllm.get("dtype", arch.dtype)), DTYPE_BYTES[arch.dtype])
    tokens = (ev.max_prompt_length or 0) + ev.max_new_tokens
    job = JobMemory("evaluate", "every checkpoint", [], [], [], gpu_bytes if on_gpu else None)
    if ev.backend == "vllm":
        share = float(ev.vllm.get("gpu_memory_utilization", EVAL_VLLM_GPU_MEMORY_UTILIZATION))
        if gpu_bytes is None:
            job.notes.append("the GPU's memory is not stated: vLLM's share not counted")
            return job
        if not on_gpu:
            job.resident = [Term("vLLM (CPU)", share * gpu_bytes, f"{share:g} x the host's memory")]
            return job
        job.resident = [
            Term("vLLM", share * gpu_bytes, f"{share:g} x the GPU's memory: weights, KV cache"),
            Term("CUDA runtime", CUDA_RUNTIME_BYTES, "context, allowance"),
        ]
        job.notes = vllm_capacity(arch, share, gpu_bytes, tokens, b)
        if share * gpu_bytes < arch.parameters * b + arch.kv_cache_per_token(b) * tokens:
            job.problems.append(
                f"vLLM's share {_gib(share * gpu_bytes)} does not hold the weights and one "
                f"sequence of {tokens:,} tokens"
            )
        return job
    rows = ev.batch_size
    job.resident = [
        Term("weights", arch.parameters * b, f"{_count(arch.parameters)} x {b} B"),
        Term("KV cache", rows * tokens * arch.kv_cache_per_token(b), f"{rows} x {tokens:,} tokens"),
        Term("logits", rows * arch.vocab * FP32 * 2, f"[{rows}, {arch.vocab:,}] x 4 B x 2"),
    ]
    return job


def job_limit(spec: Mapping) -> float | None:
    """One GPU's memory in bytes (`gpu_memory_gib`) for a job with GPUs, else None."""
    if not spec.get("gpu") or spec.get("gpu_memory_gib") is None:
        return None
    return float(spec["gpu_memory_gib"]) * GIB


def plan(config: Mapping) -> tuple[Architecture | None, str, list[JobMemory]]:
    """The architecture, where it came from, and every job kind's prediction (training grouped
    by method: a method's stages differ only in their rows)."""
    from cptlab.layout import Layout
    from cptlab.plan import Plan, builds_base
    from cptlab.resources import launcher_processes, rule_resources
    from cptlab.train.spec import resolve_stage

    base = str(Layout.of(config).base_dir) if builds_base(config) else config["base"]["path"]
    found = model_config(base)
    if found is None:
        return None, f"{base}: no config.json here and no published architecture", []
    arch = Architecture.from_config(found[0])
    jobs: list[JobMemory] = []
    spec = rule_resources(config, "train")
    processes = launcher_processes(spec.get("launcher", ""))
    gpus = int(spec["gpu"])
    layout_plan = Plan.from_config(config)
    for method in layout_plan.methods:
        stages = [(k, d) for k, d in enumerate(layout_plan.sequence, start=1)]
        settings = resolve_stage(dict(config), method, stages[0][1])
        job = training_memory(
            settings, arch, processes, step_shape(settings, processes), job_limit(spec), gpus > 0
        )
        job.per_gpu = math.ceil(processes / gpus) if gpus else 1
        job.jobs = [f"stage {k} ({d})" for k, d in stages]
        jobs.append(job)
    ev_spec = rule_resources(config, "evaluate")
    if ev_spec["gpu"]:
        jobs.append(evaluation_memory(config, arch, job_limit(ev_spec)))
    return arch, found[1], jobs


def job_lines(job: JobMemory) -> list[str]:
    """The job's terms, its moments and its peak against its GPU."""
    where = "per GPU" if job.limit is not None else "per process"
    lines = [f"{job.kind} {job.name}: {', '.join(job.jobs) or 'each job'}; {where}"]
    lines.append("  held between steps:")
    lines += [f"    {t.name:<22} {_gib(t.bytes):>12}   {t.how}" for t in job.resident]
    resident = sum(t.bytes for t in job.resident)
    lines.append(f"    {'together':<22} {_gib(resident):>12}")
    peak = job.peak_moment
    for moment in job.moments:
        mark = "  <- peak" if moment is peak else ""
        lines.append(f"  + {moment.name}: {_gib(moment.bytes)}{mark}")
        lines += [f"      {t.name:<20} {_gib(t.bytes):>12}   {t.how}" for t in moment.terms]
    if job.per_gpu > 1:
        lines.append(f"  x {job.per_gpu} processes on one GPU")
    if job.limit is None:
        verdict = "(not checked: no GPU, or resources.<kind>.gpu_memory_gib unset)"
    else:
        verdict = f"of {_gib(job.limit)} ({job.peak / job.limit:.0%}): " + (
            "fits" if job.fits else "DOES NOT FIT"
        )
    lines.append(f"  peak: {_gib(job.peak)} {verdict}")
    lines += [f"  note: {note}" for note in job.notes]
    lines += [f"  problem: {problem}" for problem in job.problems]
    return lines


def report(config: Mapping, source: str) -> tuple[list[str], list[str]]:
    """The command's lines, and one failure line per job kind that does not fit its GPU."""
    arch, found, jobs = plan(config)
    lines = [f"plan-memory: {source} (experiment {config['experiment']})"]
    if arch is None:
        return lines + [f"  architecture unknown: {found}"], []
    lines += [f"  model: {arch.describe()}", f"  from {found}", ""]
    failures = []
    for job in jobs:
        lines += [*job_lines(job), ""]
        if not job.fits:
            reason = "; ".join(job.problems) or (
                f"predicted {_gib(job.peak)} per GPU > {_gib(job.limit)} "
                f"(resources.{job.kind}.gpu_memory_gib)"
            )
            failures.append(
                f"{job.kind} {job.name} ({', '.join(job.jobs) or 'each job'}): {reason}"
            )
    from cptlab.resources import rule_resources

    if rule_resources(config, "drift")["gpu"]:
        lines.append(
            "drift: not modelled (its GPU holds one weight matrix pair and its SVD factors at a "
            "time, and a sentence embedder)"
        )
    return lines, failures


@command(
    "plan-memory",
    "predict each GPU job's peak memory per GPU; an error where one exceeds its GPU",
    CONFIG,
)
def plan_memory(args: argparse.Namespace) -> None:
    from cptlab.errors import ConfigError
    from cptlab.validation import load_config

    config = load_config(args.config)
    lines, failures = report(config, str(args.config))
    print("\n".join(lines))
    for failure in failures:
        print(f"cptlab plan-memory: does not fit: {failure}", file=sys.stderr)
    if failures:
        raise ConfigError(f"{len(failures)} kind(s) of GPU job do not fit their GPU (above)")
