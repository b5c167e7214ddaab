"""One continual-learning stage with GRPO, SDPO or SFT on TRL.

settings.py            the training section and the method entries as documented dataclasses
spec.py                one stage's settings: a method entry over its trainer's defaults
teachers.py            the SDPO teacher kinds: TRL kind, anchor, resume state, checks
ema_teacher.py         the EMA teacher's float32 weights and update, whatever the student's dtype
rewards.py             the verifier as a TRL reward function (reasons counted, never raises)
replay.py              which training rows each step draws, with replay of earlier stages
monitor.py             collapse monitor and the errors that stop a stage
probe.py               KL to the stage start on a fixed probe
mixin.py               per-step log line, timing, non-finite checks (shared by the trainers)
grpo.py                CptGRPOTrainer (TRL GRPOTrainer + mixin)
sdpo.py                CptSDPOConfig / CptSDPOTrainer (subclass of TRL's experimental SDPOTrainer)
sft.py                 SFT on the reference answers (TRL SFTTrainer + mixin), the baseline
shared_prompt.py       a rollout batch's forward with each distinct prompt computed once
compact_generation.py  rollouts with each prompt prefilled once, finished rows dropped
rollout_is.py          rollout importance sampling: vLLM's sampling against the trained model
vllm_sync.py           the weight sync of colocated vLLM rollouts on vLLM's CPU build
distributed.py         helpers for code run on one process or many (DeepSpeed ZeRO-3 gathering)
state.py               the resumable state folder
within_stage.py        the checkpoints inside a stage: its saves exported, then published
tracking.py            TRL's logs to tensorboard, wandb or trackio, offline (report_to)
handoff.py             the weights a stage hands on: the model's, or DeepSpeed's fp32 masters
peak_memory.py         a job's measured memory, for the memory model (cptlab.memory)
stage.py               train_stage(): a whole stage, in four steps (rows, resume, run, manifest)
cli.py                 the `train-stage` subcommand
"""
