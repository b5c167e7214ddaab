"""One continual-learning stage with GRPO or SDPO on TRL.

settings.py  the training section and each trainer's method entry as documented dataclasses
             (the defaults)
spec.py      one stage's settings from a config (validation against the config schema)
rewards.py   the verifier as a TRL reward function (reasons counted, never raises)
monitor.py   collapse monitor and the errors that stop a stage
probe.py     KL to the stage start on a fixed probe
mixin.py     per-step log line, timing, non-finite checks (shared by both trainers)
grpo.py      CptGRPOTrainer (TRL GRPOTrainer + mixin)
sdpo.py      CptSDPOConfig / CptSDPOTrainer (subclass of TRL's experimental SDPOTrainer)
teachers.py  the SDPO teacher kinds (teacher_model_kind): one registry
distributed.py  helpers for code run on one process or many (DeepSpeed ZeRO-3 gathering)
state.py     the resumable state folder
stage.py     train_stage(): the whole stage
cli.py       the `train-stage` subcommand
"""
