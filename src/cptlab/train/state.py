"""The resumable state folder of a stage (outside its output folder, which Snakemake clears).

    <state_dir>/stage.json         what this state belongs to (method, domain, seed, start, ...)
    <state_dir>/train_log.jsonl    one line per finished step, appended during training
    <state_dir>/checkpoint-<N>/    TRL/transformers trainer checkpoints (+ EMA teacher)
    <state_dir>/exports/step<N>/   the weights of the trainer's saves, for within-stage
                                   evaluation (cptlab.train.within_stage)

A checkpoint is complete when its trainer_state.json exists (written last). On resume, partial
checkpoints are removed and log lines past the resumed step are dropped (they will be redone).
State written for different settings is discarded, not resumed.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
from pathlib import Path

from cptlab.artifacts import atomic_write_json, atomic_write_text
from cptlab.errors import InputError
from cptlab.layout import TRAIN_LOG

log = logging.getLogger(__name__)

FINGERPRINT = "stage.json"
LOG = TRAIN_LOG  # the same name as in the stage's output folder
EXPORTS = "exports"
TRAINER_STATE = "trainer_state.json"
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")


def checkpoints(state_dir: Path, required: tuple[str, ...] = ()) -> dict[int, Path]:
    """Complete trainer checkpoints by step."""
    found = {}
    if not state_dir.is_dir():
        return found
    for path in state_dir.iterdir():
        match = _CHECKPOINT.match(path.name)
        if match and path.is_dir() and (path / TRAINER_STATE).exists():
            if all((path / name).exists() for name in required):
                found[int(match.group(1))] = path
    return dict(sorted(found.items()))


def checkpoint_step(path: Path) -> int:
    """The optimizer step of a `checkpoint-<step>` folder."""
    match = _CHECKPOINT.match(Path(path).name)
    if match is None:
        raise InputError(f"{path}: not a trainer checkpoint folder")
    return int(match.group(1))


def prepare_state(
    state_dir: Path, fingerprint: dict, required: tuple[str, ...] = ()
) -> Path | None:
    """Make `state_dir` ready and return the checkpoint to resume from (or None).

    Call on the main process only.
    """
    state_dir.mkdir(parents=True, exist_ok=True)
    marker = state_dir / FINGERPRINT
    if marker.exists() and json.loads(marker.read_text()) != fingerprint:
        log.warning("%s holds state of other settings; starting the stage afresh", state_dir)
        clear_state(state_dir)
    atomic_write_json(marker, fingerprint)
    complete = checkpoints(state_dir, required)
    for path in state_dir.iterdir():
        if _CHECKPOINT.match(path.name) and path.is_dir() and path not in complete.values():
            log.warning("removing incomplete checkpoint %s", path)
            shutil.rmtree(path)
    resume = complete[max(complete)] if complete else None
    truncate_log(state_dir / LOG, max(complete) if complete else 0)
    return resume


def clear_state(state_dir: Path) -> None:
    """Remove what cptlab wrote into `state_dir` (and nothing else)."""
    for path in state_dir.iterdir():
        if _CHECKPOINT.match(path.name) and path.is_dir():
            shutil.rmtree(path)
        elif path.name in (LOG, FINGERPRINT):
            path.unlink()
        elif path.name == EXPORTS and path.is_dir():
            shutil.rmtree(path)


def truncate_log(path: Path, last_step: int) -> None:
    """Keep the log lines of steps up to `last_step` (later ones will be trained again)."""
    if not path.exists():
        return
    keep = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:  # a line cut by a kill
            continue
        if record.get("step", 0) <= last_step:
            keep.append(line + "\n")
    atomic_write_text(path, keep)


def read_log(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
