"""A job's measured memory, which the memory model (cptlab.memory, `cptlab plan-memory`) is
checked against: a training stage's manifest keeps each process's (`memory`), an evaluation's
EVAL.json its process's (tests/test_rehearsal_results.py compares them with the predictions).

`StageMemory` measures a stage's training (its `trainer.train()`). On CUDA it reads torch's
allocator statistics. On the CPU torch keeps none, so `TorchBytes`, a TorchDispatchMode, counts
the bytes of every storage an operation creates, until the storage is freed, from the start of
training, with the student's and the teacher's parameters and buffers counted as live from the
start. It does not see storages made and freed inside one operation (a kernel's workspace), nor
what exists before training other than the two models (vLLM's engine, the tokenizer, the rows).
vLLM's generation and weight sync are left out: the engine's memory is its own reservation,
which the model counts as gpu_memory_utilization x the device's memory.

Recorded per process (`record()`):
  device        "cuda" or "cpu"
  state_bytes   the most torch bytes live at the end of an optimizer step: weights, teacher,
                optimizer state (what the model holds between steps, less vLLM's and CUDA's);
                ZeRO-2 makes its gradient partition at a step's first backward and frees it
                after the step, and Adam's moments appear at the first step
  peak_bytes    the most torch bytes live at once during training
  forwards      the largest forward of each kind: `grad` (the student with gradient), `nograd`
                (the student in training mode without: SDPO's rollout weights), `eval` (the
                student in eval mode: the KL probe), `teacher`; each its rows, tokens (width) and
                kept (positions whose logits or log-probabilities it computes)
  cuda          on CUDA: max_memory_allocated and max_memory_reserved during training, and
                the device's memory in use at the end (every process on it, vLLM's too)

`process_memory()` is what an evaluation records: the process's peak resident memory (VmHWM),
the machine's and its memory node's memory, and on CUDA the device's memory in use and total.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from transformers import TrainerCallback


class TorchBytes(TorchDispatchMode):
    """Live bytes of the torch storages that operations create while the mode is active (and of
    those `adopt`ed), and their peak. An operation whose output aliases an input (a view, an
    in-place or `out=` operation) creates nothing; `excluded()` turns the mode off for a while."""

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self._excluded = 0
        self._finalizers: dict[int, weakref.finalize] = {}

    def adopt(self, tensors: Iterable[torch.Tensor]) -> None:
        """Count the storages of `tensors` as live (they exist before the mode starts)."""
        for tensor in tensors:
            self._track(tensor.untyped_storage())

    @contextmanager
    def excluded(self) -> Iterator[None]:
        """The mode is off inside: what is created there is not counted (nor freed). Off, not
        only ignoring: vLLM compiles its model with torch.compile, which refuses to trace under
        a Python dispatch mode."""
        if self._excluded:
            yield
            return
        self._excluded += 1
        self.__exit__(None, None, None)
        try:
            yield
        finally:
            self.__enter__()
            self._excluded -= 1

    def _track(self, storage: torch.UntypedStorage) -> None:
        key = id(storage)
        if key in self._finalizers or storage.device.type == "meta":
            return
        size = storage.nbytes()
        self._finalizers[key] = weakref.finalize(storage, self._free, key, size)
        self.live += size
        self.peak = max(self.peak, self.live)

    def _free(self, key: int, size: int) -> None:
        self._finalizers.pop(key, None)
        self.live -= size

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if any(r.alias_info is not None for r in func._schema.returns):
            return out
        for leaf in tree_leaves(out):
            if isinstance(leaf, torch.Tensor):
                self._track(leaf.untyped_storage())
        return out


def _forward_size(args: tuple, kwargs: dict) -> tuple[int, int, int] | None:
    """(rows, tokens, kept positions) of a causal LM's forward call."""
    ids = kwargs.get("input_ids", args[0] if args else None)
    if not isinstance(ids, torch.Tensor) or ids.dim() != 2:
        return None
    rows, tokens = ids.shape
    labels, keep = kwargs.get("labels"), kwargs.get("logits_to_keep")
    if isinstance(labels, torch.Tensor):  # TRL's fused LM head scores the labelled positions
        kept = int((labels[:, 1:] != -100).sum())
    elif isinstance(keep, int) and keep > 0:
        kept = rows * keep
    else:
        kept = rows * tokens
    return rows, tokens, kept


class StageMemory(TrainerCallback):
    """A training stage's measured memory (see the module docstring): a context manager around
    `trainer.train()`, also a callback of the trainer for the step boundaries."""

    def __init__(self, trainer) -> None:
        self.trainer = trainer
        self.cuda = torch.cuda.is_available()
        self.bytes = None if self.cuda else TorchBytes()
        self.state = 0
        self.forwards: dict[str, dict[str, int]] = {}
        self._hooks: list = []
        self._restore: list[tuple[object, str, object]] = []

    # ----- the measurement window ---------------------------------------------------------------

    def __enter__(self) -> StageMemory:
        trainer = self.trainer
        student = trainer.accelerator.unwrap_model(trainer.model)
        teacher = getattr(trainer, "teacher_model", None)
        teacher = None if teacher is None else trainer.accelerator.unwrap_model(teacher)
        if teacher is student:
            teacher = None
        self._hooks.append(student.register_forward_pre_hook(self._student_hook, with_kwargs=True))
        if teacher is not None:
            self._hooks.append(
                teacher.register_forward_pre_hook(self._teacher_hook, with_kwargs=True)
            )
        trainer.add_callback(self)
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
        else:
            models = [student] + ([teacher] if teacher is not None else [])
            self.bytes.adopt(t for m in models for t in [*m.parameters(), *m.buffers()])
            generation = getattr(trainer, "vllm_generation", None)
            for name in ("generate", "sync_weights"):
                if generation is not None and hasattr(generation, name):
                    self._exclude(generation, name)
            self.bytes.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.bytes is not None:
            self.bytes.__exit__(*exc)
        for hook in self._hooks:
            hook.remove()
        for owner, name, original in self._restore:
            setattr(owner, name, original)
        self.trainer.remove_callback(self)

    def _exclude(self, owner, name: str) -> None:
        original = getattr(owner, name)

        def without_counting(*args, **kwargs):
            with self.bytes.excluded():
                return original(*args, **kwargs)

        setattr(owner, name, without_counting)
        self._restore.append((owner, name, original))

    # ----- what happens inside it ---------------------------------------------------------------

    def _live(self) -> int:
        return torch.cuda.memory_allocated() if self.cuda else self.bytes.live

    def on_step_end(self, args, state, control, **kwargs):
        # after the optimizer step: Adam's moments exist (made at the first step), the gradients
        # are freed (ZeRO-2 releases its partition after the step)
        self.state = max(self.state, self._live())

    def _note(self, kind: str, args: tuple, kwargs: dict) -> None:
        size = _forward_size(args, kwargs)
        if size is None:
            return
        rows, tokens, kept = size
        best = self.forwards.get(kind)
        if best is None or rows * tokens > best["rows"] * best["tokens"]:
            self.forwards[kind] = {"rows": rows, "tokens": tokens, "kept": kept}

    def _student_hook(self, module, args, kwargs):
        if not module.training:
            kind = "eval"
        else:
            kind = "grad" if torch.is_grad_enabled() else "nograd"
        self._note(kind, args, kwargs)

    def _teacher_hook(self, module, args, kwargs):
        self._note("teacher", args, kwargs)

    def record(self) -> dict:
        """This process's measurement (see the module docstring)."""
        out = {
            "device": "cuda" if self.cuda else "cpu",
            "state_bytes": int(self.state),
            "forwards": self.forwards,
        }
        if self.cuda:
            free, total = torch.cuda.mem_get_info()
            out["peak_bytes"] = int(torch.cuda.max_memory_allocated())
            out["cuda"] = {
                "max_allocated_bytes": int(torch.cuda.max_memory_allocated()),
                "max_reserved_bytes": int(torch.cuda.max_memory_reserved()),
                "device_used_bytes": int(total - free),
                "device_total_bytes": int(total),
            }
        else:
            out["peak_bytes"] = int(self.bytes.peak)
        return out


def process_memory() -> dict:
    """The process's peak resident memory (VmHWM, Linux); the machine's memory (MemTotal) and
    that of the memory node of the first CPU it may run on (what vLLM's CPU build takes its
    gpu_memory_utilization of: vllm/utils/cpu_resource_utils.py); on CUDA the device's memory in
    use (by every process on it) and its total."""
    out = {
        "device": "cuda" if torch.cuda.is_available() else "cpu",
        "peak_rss_bytes": _kib_field("/proc/self/status", "VmHWM"),
        "host_total_bytes": _kib_field("/proc/meminfo", "MemTotal"),
    }
    out["memory_node_total_bytes"] = _memory_node_total() or out["host_total_bytes"]
    if out["device"] == "cuda":
        free, total = torch.cuda.mem_get_info()
        out["device_used_bytes"], out["device_total_bytes"] = int(total - free), int(total)
    return out


def _kib_field(path: str, key: str) -> int | None:
    """A `key: N kB` line of a /proc file, in bytes (None where there is none)."""
    try:
        with open(path, encoding="ascii") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _memory_node_total() -> int | None:
    """MemTotal of the NUMA node of the lowest CPU this process may run on (Linux sysfs)."""
    try:
        cpu = min(os.sched_getaffinity(0))
        nodes = sorted(Path(f"/sys/devices/system/cpu/cpu{cpu}").glob("node[0-9]*"))
        if not nodes:
            return None
        with open(f"/sys/devices/system/node/{nodes[0].name}/meminfo", encoding="ascii") as f:
            for line in f:  # "Node 0 MemTotal:  24683772 kB"
                parts = line.split()
                if parts[2] == "MemTotal:":
                    return int(parts[3]) * 1024
    except (OSError, AttributeError, IndexError, ValueError):
        pass
    return None
