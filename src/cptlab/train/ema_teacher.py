"""The SDPO teacher's float32 weights, whatever the student's dtype, as the study keeps them.

TRL's `SyncTeacherModelCallback` moves the EMA teacher towards the student in place, in the
teacher's own dtype. In bf16 (config/paper.yaml) an increment rate x (student - teacher) smaller
than half a bf16 step of the teacher's weight rounds away: at the paper's rate 0.05 most do,
and the teacher barely moves. The study's teacher is verl's `ref` module, built in float32
(verl/workers/fsdp_workers.py:325-327, `model_dtype` fp32) and updated in float32
(verl/workers/actor/dp_actor.py:132-151); its forward runs in bf16, FSDP's mixed precision
casting the float32 weights, which live in host memory (`CPUOffload(offload_params=True)` for
the ref role, fsdp_workers.py).

`EMATeacher` does the same. The float32 weights, the EMA's state, live in host memory; the
teacher model that runs the forward holds their rounding to its own dtype, written after every
update, so its forward and its memory on the accelerator are what they were. A float32 teacher
(the embedded default) is its own state and moves in place, with TRL's arithmetic. A trainer
checkpoint holds the state, and a resumed stage continues it.

The start is rounded once too: `float32_start` reads the anchor's weights in float32, and an
anchor mix (`teacher_anchor_mix`) is computed in float32 before the teacher takes it (TRL's
`SyncRefModelCallback.sync_target_model` mixes in the teacher's dtype, rounding twice).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from transformers import TrainerCallback

from cptlab.train.distributed import gathered_parameters


@torch.no_grad()
def move_towards(targets: list[torch.Tensor], sources: Iterable[torch.Tensor], rate: float) -> None:
    """targets <- (1 - rate) * targets + rate * sources, in the targets' dtype: TRL's
    `SyncRefModelCallback._sync_target_model` arithmetic, and verl's `_update_teacher`."""
    for target, source in zip(targets, sources, strict=True):
        target.mul_(1.0 - rate).add_(source.to(target.device, target.dtype), alpha=rate)


@torch.no_grad()
def write_rounded(params: list[torch.nn.Parameter], weights: list[torch.Tensor]) -> None:
    """Each parameter takes its weight rounded (to nearest) to the parameter's dtype."""
    for param, weight in zip(params, weights, strict=True):
        param.data.copy_(weight)


@torch.no_grad()
def float32_start(model: torch.nn.Module, load_float32) -> list[torch.Tensor]:
    """The float32 values, in host memory, of the weights `model` was loaded with: its own when
    it holds float32, else those of `load_float32()` (the same checkpoint read in float32, since
    the model's own are already rounded)."""
    params = list(model.parameters())
    if any(p.dtype != torch.float32 for p in params):
        params = list(load_float32().parameters())
    with gathered_parameters(params):
        return [p.detach().to("cpu", torch.float32, copy=True) for p in params]


class EMATeacher(TrainerCallback):
    """The EMA teacher's update (`teacher_update_rate` every `teacher_sync_steps` optimizer
    updates), in float32.

    Parameters:
        teacher (`torch.nn.Module`): the teacher as the trainer runs it (wrapped or not).
        accelerator (`accelerate.Accelerator`): the trainer's, to unwrap the models.
        weights (`list[torch.Tensor]`, *optional*): the teacher's float32 weights in host
            memory, where the teacher holds another dtype; `None`: the teacher is float32 and
            its parameters are the state.
    """

    def __init__(self, teacher, accelerator, weights: list[torch.Tensor] | None = None) -> None:
        self.teacher = teacher
        self.accelerator = accelerator
        self.weights = weights

    def parameters(self) -> list[torch.nn.Parameter]:
        return list(self.accelerator.unwrap_model(self.teacher).parameters())

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if state.global_step % args.teacher_sync_steps == 0:
            self.update(self.accelerator.unwrap_model(model), args.teacher_update_rate)

    @torch.no_grad()
    def update(self, student: torch.nn.Module, rate: float) -> None:
        """Move the teacher towards `student` by `rate`."""
        sources, params = list(student.parameters()), self.parameters()
        # Under ZeRO-3 every process computes the update on whole tensors; process 0's is kept.
        with gathered_parameters(sources + params, modifier_rank=0):
            if self.weights is None:
                move_towards([p.data for p in params], sources, rate)
            else:
                move_towards(self.weights, sources, rate)
                write_rounded(params, self.weights)

    def state(self) -> list[torch.Tensor]:
        """What a trainer checkpoint saves: the float32 weights, in host memory."""
        if self.weights is not None:
            return self.weights
        params = self.parameters()
        with gathered_parameters(params):
            return [p.detach().cpu().clone() for p in params]

    @torch.no_grad()
    def load(self, saved: list[torch.Tensor]) -> None:
        """Continue from a checkpoint's `state()` (one written in the teacher's dtype, as
        before the float32 weights, is read as it is)."""
        params = self.parameters()
        with gathered_parameters(params, modifier_rank=0):
            if self.weights is None:
                write_rounded(params, saved)
            else:
                for weight, value in zip(self.weights, saved, strict=True):
                    weight.copy_(value)
                write_rounded(params, self.weights)
