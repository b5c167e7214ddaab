#!/usr/bin/env bash
# Run by Snakemake in the new envs/cptlab.yaml environment, once, from the workflow's working
# directory (the repository root): `make setup`'s installs in its order. torch first, pinned (an
# unpinned one, or one pulled in by another package, may be another build); DeepSpeed's source
# package built against it (--no-build-isolation); cptlab itself.
set -euo pipefail
if [ ! -f envs/requirements.txt ]; then
    echo "cptlab: envs/requirements.txt not found in $PWD: run snakemake from the repository root" >&2
    exit 1
fi
python -m pip install torch==2.13.0
python -m pip install -r envs/requirements.txt
python -m pip install --no-build-isolation deepspeed==0.19.8
python -m pip install --no-deps -e .
