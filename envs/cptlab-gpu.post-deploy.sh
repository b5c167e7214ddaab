#!/usr/bin/env bash
# Run by Snakemake in the new envs/cptlab-gpu.yaml environment, once, from the workflow's working
# directory (the repository root). The install order of the README's venv route: torch first (the
# lock's pin: PyPI's CUDA build), then the lock with --no-build-isolation, so that DeepSpeed's
# source package builds against that torch rather than fetching another, then cptlab itself.
set -euo pipefail
lock=envs/requirements-gpu.txt
if [ ! -f "$lock" ]; then
    echo "cptlab-gpu: $lock not found in $PWD: run snakemake from the repository root" >&2
    exit 1
fi
python -m pip install "$(grep '^torch==' "$lock")"
python -m pip install --no-build-isolation -r "$lock"
python -m pip install --no-deps -e .
