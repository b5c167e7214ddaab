"""One continual-learning stage with GRPO or SDPO on TRL.

spec.py      method + training settings (defaults, validation against the config schema)
rewards.py   the verifier as a TRL reward function (reasons counted, never raises)
monitor.py   collapse monitor and the errors that stop a stage
probe.py     KL to the stage start on a fixed probe
mixin.py     per-step log line, timing, non-finite checks (shared by both trainers)
grpo.py      CptGRPOTrainer (TRL GRPOTrainer + mixin)
sdpo.py      CptSDPOConfig / CptSDPOTrainer (subclass of TRL's experimental SDPOTrainer)
state.py     the resumable state folder
stage.py     train_stage(): the whole stage
cli.py       the `train-stage` subcommand
"""

from __future__ import annotations

import importlib

# Lazy: importing TRL takes seconds, and `cptlab.train.cli` (imported by every `cptlab` command)
# must not pay for it.
_EXPORTS = {
    "CollapseError": "cptlab.train.monitor",
    "NonFiniteError": "cptlab.train.monitor",
    "StageError": "cptlab.train.monitor",
    "StageSettings": "cptlab.train.spec",
    "resolve_stage": "cptlab.train.spec",
    "build_trainer": "cptlab.train.stage",
    "train_stage": "cptlab.train.stage",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
