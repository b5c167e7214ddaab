"""cptlab: continual post-training lab.

Chains on-policy post-training stages (GRPO, SDPO and variants; SFT as the off-policy baseline)
over a sequence of domains, evaluates every checkpoint, and measures forgetting and drift.
This docstring and each package's are the module map (docs/design.md, "Module map": what each
package owns, its layer and its subcommands).

The stage packages, one per step of the workflow, each with its subcommands in its `cli.py`:

domains/             the benchmark registry, the synthetic domains and the study's datasets
base_model/          the embedded base model (`build-base`)
train/               one continual-learning stage on TRL (`train-stage`)
evaluation/          scoring a checkpoint on its benchmarks (`evaluate-checkpoint`)
results/             the tables, findings and figures of an experiment
drift/               parameter and response drift, data-set distances, collapse forensics
verifiers/           answer parsing and scoring, one module per answer family

The shared modules:

cli.py               the `cptlab` command: the subcommand registry (@command), one error path
__main__.py          `python -m cptlab`, for launchers that start a module in each process
errors.py            InputError (exit 2; ConfigError is one) and StageError (exit 3)
config.py            loading a config: YAML, `extends:` overlays, overrides, the schema
validation.py        the config's name and method checks, above plan and spec
config_reference.py  `cptlab config-reference`: config/README.md from the schema
layout.py            Layout: every path under results/<experiment>/ (or CPTLAB_RESULTS)
plan.py              the experiment's shape: data sets, benchmark lists, chains of stages
provenance.py        what each job depends on (settings, code hash), staged and committed
claims.py            who makes which job of a shared results folder; `claimed` starts each job
resources.py         per-rule compute (threads, GPUs, runtime, memory, launcher)
workload.py          `cptlab plan-hours`: every job's estimated work against its time limit
memory.py            `cptlab plan-memory`: each GPU job's predicted peak against its GPU
model_sizes.py       a decoder's sizes: parameters, KV cache, activations (for memory.py)
site.py              what a config asks of the machine, checked before the first job
locks.py             freeing the lock of a Snakemake run killed with -9
slurm.py             SLURM jobs a killed run left queued or running: the next run waits;
                     the watch of SLURM's controller during a run
progress.py          `cptlab watch`: what each running job is doing
artifacts.py         atomic writes; a manifest.json written last marks a folder complete
rows.py              the canonical row schema
chat.py              the ChatML format shared by tokenizer, training and evaluation
teacher_prompt.py    SDPO's teacher prompt (demonstration + feedback)
checkpoints.py       loading a checkpoint folder (weights, tokenizer); no downloads
plotting.py          matplotlib without a display; save_figure (PNG + PDF)
sandbox/             running model-written programs (docs/sandbox.md)
"""

import os
import platform

__version__ = "0.1.0"

# The CPU kernels' instruction set decides the last bits of every float result, and training
# amplifies them: the embedded base built with ATen's AVX2 kernels and with its generic ones are
# different models (docs/reliability.md, "Same seed, same numbers"). A cptlab process pins ATen's
# and MKL's x86 kernels to AVX2, which every x86-64 machine this project targets has, so that one
# kernel family serves every machine. It does not make an Intel and an AMD machine agree to the
# bit (MKL dispatches by vendor too; measured in that section). oneDNN is left alone: the float32
# embedded path does not reach it (the same 150-step digest either way), and capping it keeps
# AMX from being enabled, which aborts vLLM's bf16 CPU kernels. A value already in the
# environment wins. Set on import, before torch runs a kernel: ATen reads its variable at the
# first dispatch, MKL at its first call.
#
# The pin is for the float32 path. In bf16, ATen's AVX2 build of the CPU flash attention still
# takes its AMX packing path on a CPU with AMX and fails ("pack_vnni2 is only supported when
# avx512 is supported"). So the jobs of a config that computes in half precision run with
# CPTLAB_CPU_KERNELS=native (cptlab.resources.cptlab_invocation): such a process pins nothing and
# drops the pins a cptlab process above it set (the workflow's driver imports cptlab too), which
# CPTLAB_CPU_KERNEL_PINS_SET names; a value set by the user stays.
CPU_KERNEL_PINS = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2"}
CPU_KERNELS = os.environ.get("CPTLAB_CPU_KERNELS", "avx2")
_PINS_SET = "CPTLAB_CPU_KERNEL_PINS_SET"
if CPU_KERNELS not in ("avx2", "native"):
    raise RuntimeError(f"CPTLAB_CPU_KERNELS={CPU_KERNELS!r}: expected avx2 or native")
if CPU_KERNELS == "native":
    for _name in os.environ.pop(_PINS_SET, "").split(","):
        if _name in CPU_KERNEL_PINS:
            os.environ.pop(_name, None)
elif platform.machine().lower() in ("x86_64", "amd64"):
    _set = [name for name in CPU_KERNEL_PINS if name not in os.environ]
    for _name in _set:
        os.environ[_name] = CPU_KERNEL_PINS[_name]
    if _set:
        os.environ[_PINS_SET] = ",".join(_set)
