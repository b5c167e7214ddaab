"""cptlab: continual post-training lab.

Chains on-policy post-training stages (GRPO, SDPO and variants) over a sequence of domains,
evaluates every checkpoint, and measures forgetting and drift.
"""

import os
import platform

__version__ = "0.1.0"

# The CPU kernels' instruction set decides the last bits of every float result, and training
# amplifies them: the embedded base built with ATen's AVX2 kernels and with its generic ones are
# different models (docs/reliability.md, "Same seed, same numbers"). Every cptlab process pins
# ATen's and MKL's x86 kernels to AVX2, which every x86-64 machine this project targets has, so
# that one kernel family serves every machine. It does not make an Intel and an AMD machine agree
# to the bit (MKL dispatches by vendor too; measured in that section). oneDNN is left alone: the
# float32 embedded path does not reach it (the same 150-step digest either way), and capping it
# keeps AMX from being enabled, which aborts vLLM's bf16 CPU kernels. A value already in the
# environment wins. Set on import, before torch runs a kernel: ATen reads its variable at the
# first dispatch, MKL at its first call.
CPU_KERNEL_PINS = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2"}
if platform.machine().lower() in ("x86_64", "amd64"):
    for _name, _value in CPU_KERNEL_PINS.items():
        os.environ.setdefault(_name, _value)
