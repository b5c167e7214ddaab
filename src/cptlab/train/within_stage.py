"""The checkpoints inside a stage (`evaluation.within_stage`): the weights a stage exports at each
trainer save, and how they leave the training job as complete artifacts.

    state_dir/exports/step<N>/   the model files of trainer checkpoint N rollout batches in (hard
                                 links: save_total_limit's rotation of the checkpoint leaves
                                 them), the tokenizer, manifest.json last; written when the
                                 trainer saves, so that a killed stage resumed from its last
                                 checkpoint still has every earlier export
    out/step<N>/                 the same files, published (linked) by the stage before its own
                                 manifest: the stage's manifest lists them, so a stage manifest on
                                 disk means every within-stage checkpoint is there

An export past the checkpoint a stage resumes from is removed (`prepare_exports`): the resumed
run saves it again. A stage that stopped early (collapse action `stop`, a KL budget) has no export
of the steps it did not save: it publishes its own weights as step N, with `reached: false` in the
step's manifest, since from its stop on the stage's model is the one it hands on.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from transformers import TrainerCallback

from cptlab.artifacts import MANIFEST, read_manifest, write_manifest
from cptlab.layout import step_name
from cptlab.train.state import EXPORTS

MODEL_FILES = ("config.json", "generation_config.json")
_STEP = re.compile(r"^step(\d+)$")


def model_files(folder: Path) -> list[Path]:
    """The files of a checkpoint folder that hold its model: its config, generation config and
    safetensors weights (not the trainer's optimizer, scheduler or random states)."""
    return sorted(
        path
        for path in Path(folder).iterdir()
        if path.is_file()
        and (
            path.name in MODEL_FILES
            or path.name.endswith((".safetensors", ".safetensors.index.json"))
        )
    )


def saved_steps(save_steps: int, steps: int) -> list[int]:
    """The rollout steps a stage of `steps` saves at before its last: its within-stage
    checkpoints."""
    return list(range(save_steps, steps, save_steps))


def link_or_copy(source: Path, dest: Path) -> None:
    """A hard link of `source` at `dest` (no bytes copied), a copy where the file system has
    none."""
    try:
        os.link(source, dest)
    except OSError:
        shutil.copy2(source, dest)


def exports_dir(state_dir: Path) -> Path:
    return Path(state_dir) / EXPORTS


def exported_steps(state_dir: Path) -> dict[int, Path]:
    """The complete exports (manifest written) of a state folder, by rollout step."""
    folder = exports_dir(state_dir)
    found = {}
    if folder.is_dir():
        for path in folder.iterdir():
            match = _STEP.match(path.name)
            if match and (path / MANIFEST).is_file():
                found[int(match.group(1))] = path
    return dict(sorted(found.items()))


def prepare_exports(state_dir: Path, resumed_step: int) -> None:
    """Remove the exports a resumed stage will make again (those past `resumed_step`, in rollout
    batches) and any an interrupted save left incomplete. Main process only."""
    folder = exports_dir(state_dir)
    if not folder.is_dir():
        return
    complete = exported_steps(state_dir)
    for path in folder.iterdir():
        match = _STEP.match(path.name)
        if match is None:
            continue
        if int(match.group(1)) > resumed_step or path not in complete.values():
            shutil.rmtree(path)


def write_export(source: Path, dest: Path, tokenizer, info: dict) -> None:
    """`dest`: the model files of checkpoint folder `source` linked, the tokenizer saved, then
    the manifest (`info`) last."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    files = model_files(source)
    if not any(f.name.endswith(".safetensors") for f in files):
        raise FileNotFoundError(f"{source}: no safetensors weights to export")
    for path in files:
        link_or_copy(path, dest / path.name)
    tokenizer.save_pretrained(dest)
    write_manifest(dest, info)


class ExportSaves(TrainerCallback):
    """At each trainer save before a stage's last step, exports the saved checkpoint's weights
    into the state folder (`state_dir/exports/step<N>/`). Main process only: the checkpoint's
    weights are on disk by then (the trainer saves, then calls `on_save`).

    Parameters:
        state_dir (`Path`): the stage's state folder (the trainer's output_dir).
        tokenizer: the stage's tokenizer, saved beside each export.
        updates (`int`): optimizer updates per rollout batch (a step of the stage).
        steps (`int`): the stage's rollout batches; its last is the stage's own checkpoint.
    """

    def __init__(self, state_dir: Path, tokenizer, updates: int, steps: int) -> None:
        self.state_dir = Path(state_dir)
        self.tokenizer = tokenizer
        self.updates = updates
        self.steps = steps

    def on_save(self, args, state, control, **kwargs):
        step, partial = divmod(state.global_step, self.updates)
        if state.is_world_process_zero and not partial and step < self.steps:
            source = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            info = {"step": step, "optimizer_step": state.global_step, "reached": True}
            write_export(
                source, exports_dir(self.state_dir) / step_name(step), self.tokenizer, info
            )
        return control


def publish(state_dir: Path, out: Path, steps: list[int], trained_all: bool) -> list[dict]:
    """Link each within-stage checkpoint of `steps` from the state folder's exports into
    `out/step<N>/` (manifest last), after `out` holds the stage's weights and tokenizer. A stage
    that stopped early (not `trained_all` its steps) gives the steps it has no export of its own
    weights. Returns what the stage's manifest lists. Main process only."""
    for path in Path(out).iterdir():  # another run's within-stage checkpoints
        if path.is_dir() and _STEP.match(path.name):
            shutil.rmtree(path)
    exported = exported_steps(state_dir)
    listed = []
    for step in steps:
        dest = Path(out) / step_name(step)
        dest.mkdir()
        if step in exported:
            source, info = exported[step], read_manifest(exported[step])
        elif trained_all:
            raise FileNotFoundError(
                f"{exports_dir(state_dir)}: no export of step {step}, which the stage trained "
                "and saved (its state was written without evaluation.within_stage?)"
            )
        else:
            source, info = Path(out), {"step": step, "reached": False}
        for path in source.iterdir():
            if path.is_file() and path.name != MANIFEST and not path.name.endswith(".jsonl"):
                link_or_copy(path, dest / path.name)
        write_manifest(dest, info)
        listed.append({"step": step, "folder": dest.name, "reached": info["reached"]})
    return listed
