"""The weights a stage hands to the next stage and to the analyses (`training.handoff_precision`).

Under DeepSpeed's bf16 mixed precision a stage trains fp32 master weights and computes with
their bf16 copy. At lr 1e-5 over 50 steps a weight's update is a few bf16 ulps, so which of the
two a stage hands on is a visible part of that update:

    model     the model's own weights (bf16 in paper.yaml): the masters are dropped, and the next
              stage's masters start from their bf16 rounding, as verl's model merger exports a
              checkpoint (scripts/legacy_model_merger.py casts every tensor to bf16).
    float32   the fp32 master weights, saved as fp32; the next stage's masters start from them
              (its bf16 copy is their rounding), as verl's actor keeps fp32 parameters
              (verl/workers/fsdp_workers.py:325-327) and its checkpoints' HF export writes them
              (verl/utils/checkpoint/fsdp_checkpoint_manager.py:303-348).

A model trained in float32 has no separate masters, nor has a bf16 model trained without DeepSpeed
(its optimizer updates the bf16 weights themselves): both settings then hand on the model's
weights, and the stage's manifest says which it handed on (`handed_on`).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open
from transformers import TrainerCallback

from cptlab.artifacts import atomic_write_text

HANDOFF_PRECISIONS = ("model", "float32")


def hands_on_masters(precision: str, trainer) -> bool:
    """Whether the stage hands on fp32 masters that differ from the model's own weights: a
    low-precision model under DeepSpeed, whose optimizer keeps them. Without DeepSpeed no masters
    exist, and a bf16 model's own weights are all the stage has (the manifest's `handed_on`)."""
    model = trainer.accelerator.unwrap_model(trainer.model)
    low_precision = next(model.parameters()).dtype != torch.float32
    return precision == "float32" and low_precision and trainer.is_deepspeed_enabled


def handed_on(precision: str, trainer) -> str:
    """What the stage's weights are, for its manifest."""
    if hands_on_masters(precision, trainer):
        return "float32 master weights"
    model = trainer.accelerator.unwrap_model(trainer.model)
    return f"the model's {str(next(model.parameters()).dtype).removeprefix('torch.')} weights"


def master_state_dict(model: torch.nn.Module, skip: set[str]) -> dict[str, torch.Tensor]:
    """The model's state dict with every parameter's fp32 master weight in place of its low-
    precision copy (DeepSpeed ZeRO-1/2/3's partitions, gathered). Call on every process: the
    gather is a collective. Parameters named in `skip` (tied copies) are left out."""
    from deepspeed.utils import safe_get_full_fp32_param

    params = dict(model.named_parameters(remove_duplicate=False))
    state = {}
    for name, value in model.state_dict().items():  # persistent buffers too, in one order
        if name in skip:
            continue
        if name not in params:
            state[name] = value.detach().cpu()
            continue
        master = safe_get_full_fp32_param(params[name])
        if master is None:
            raise RuntimeError(
                f"no fp32 master weight for {name}: training.handoff_precision float32 needs "
                "DeepSpeed's mixed precision (training.deepspeed), or a float32 model"
            )
        state[name] = master.detach().cpu()
    return state


def save_fp32(model: torch.nn.Module, state: dict[str, torch.Tensor], out: Path) -> None:
    """`model.save_pretrained` of `state`, with the config's dtype set to float32 (save_pretrained
    writes the model's own, so that a loader with dtype="auto" would round the weights)."""
    model.save_pretrained(out, state_dict=state)
    config = Path(out) / "config.json"
    fields = {**json.loads(config.read_text()), "dtype": "float32"}
    atomic_write_text(config, json.dumps(fields, indent=2, sort_keys=True) + "\n")


def stored_in_fp32(folder: str | Path) -> bool:
    """Whether a checkpoint folder's weights are all stored in fp32 (a float32 handoff; a bf16
    checkpoint's masters can only be its own values)."""
    dtypes = set()
    for path in Path(folder).glob("*.safetensors"):
        with safe_open(str(path), framework="pt") as handle:
            dtypes.update(handle.get_slice(key).get_dtype() for key in handle.keys())
    return dtypes == {"F32"}


class RestoreMasterWeights(TrainerCallback):
    """At the start of a stage that is not resumed, sets DeepSpeed's fp32 master weights to the
    start checkpoint's fp32 values: DeepSpeed builds its masters from the bf16 model, which
    would round away what the previous stage handed on. A resumed stage restores its masters
    from its own checkpoint instead.

    Parameters:
        trainer: the stage's trainer (its model is wrapped by then).
        start (`Path`): the start checkpoint's folder, stored in fp32 (`stored_in_fp32`).
    """

    def __init__(self, trainer, start: str | Path) -> None:
        self.trainer = trainer
        self.start = Path(start)

    def on_train_begin(self, args, state, control, **kwargs):
        from deepspeed.utils import safe_set_full_fp32_param

        model = self.trainer.accelerator.unwrap_model(self.trainer.model)
        params = dict(model.named_parameters())
        restored = set()
        for path in sorted(self.start.glob("*.safetensors")):  # a tensor at a time in memory
            with safe_open(str(path), framework="pt") as handle:
                for name in handle.keys():
                    if name in params:
                        value = handle.get_tensor(name).to(params[name].device)
                        safe_set_full_fp32_param(params[name], value)
                        restored.add(name)
        if missing := sorted(params.keys() - restored):
            raise KeyError(f"{self.start}: no fp32 weights for {missing[:3]}")
