"""Training curves in the tools researchers already use (`training.report_to`): TRL's own
integrations, offline, one run per (chain, stage) grouped by chain, in
results/<experiment>/tracking/<method>/seed<s>/stage<k>_<domain>/ (cptlab.layout).

    tensorboard  TRL's metrics as event files in the stage's folder (the chain's folder groups
                 its stages: `tensorboard --logdir results/<experiment>/tracking`); each
                 evaluation of one of the stage's checkpoints adds its scores there, at the
                 checkpoint's optimizer step (`log_scores`)
    wandb        WANDB_MODE=offline, the stage's folder as WANDB_DIR, project <experiment>, group
                 <method>/seed<s>, name stage<k>_<domain>; `wandb sync` uploads later
    trackio      trackio's local database in the stage's folder (TRACKIO_DIR), project
                 <experiment>-<method>-seed<s> (a chain), name stage<k>_<domain>

Nothing here reaches the network. Where the logs go is not a setting of the stage's outputs: the
workflow's rerun trigger leaves `report_to` out (cptlab.train.spec).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from cptlab.errors import ConfigError

# report_to -> the package it needs
TRACKERS = {"tensorboard": "tensorboard", "wandb": "wandb", "trackio": "trackio"}


def check_tracker(report_to: str) -> None:
    """A ConfigError naming the package a tracker needs when it is not installed."""
    if report_to == "none":
        return
    if report_to not in TRACKERS:
        raise ConfigError(f"training.report_to: {report_to!r} not in {['none', *TRACKERS]}")
    package = TRACKERS[report_to]
    if importlib.util.find_spec(package) is None:
        raise ConfigError(
            f"training.report_to: {report_to} needs the {package} package, which is not "
            f"installed here (pip install {package})"
        )


def tracking_args(
    report_to: str, folder: Path | None, experiment: str, chain: str, stage: str
) -> dict:
    """The TrainingArguments keys that hand TRL's logs to `report_to`, its offline environment
    set: `folder` is the stage's run, `chain` (method/seed<s>) groups a chain's stages."""
    if report_to == "none":
        return {"report_to": "none"}
    check_tracker(report_to)
    if folder is None:
        raise ConfigError(f"training.report_to: {report_to} needs the stage's tracking folder")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if report_to == "tensorboard":
        os.environ["TENSORBOARD_LOGGING_DIR"] = str(folder)
    elif report_to == "wandb":
        os.environ.update(
            WANDB_MODE="offline",
            WANDB_DIR=str(folder),
            WANDB_PROJECT=experiment,
            WANDB_RUN_GROUP=chain,
        )
    else:
        os.environ["TRACKIO_DIR"] = str(folder)
        return {
            "report_to": report_to,
            "run_name": stage,
            "project": f"{experiment}-{chain.replace('/', '-')}",
        }
    return {"report_to": report_to, "run_name": stage}


def log_scores(report_to: str, folder: Path, step: int, scores: dict[str, float]) -> None:
    """Add an evaluation's `scores` (name -> value) to a stage's run at optimizer step `step`:
    tensorboard event files in the stage's folder. wandb and trackio keep TRL's training logs
    only: their runs are not reopened after the stage (an offline wandb run cannot be resumed)."""
    if report_to != "tensorboard":
        return
    check_tracker(report_to)
    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(log_dir=str(folder), filename_suffix=f".eval{step}") as writer:
        for name, value in scores.items():
            writer.add_scalar(name, value, global_step=step)
