"""The GPU environment of config/paper.yaml: its lock against the CPU one, and how rules take it.

`make check-gpu-env` (CI) resolves envs/requirements-gpu.in with uv, the committed lock as
constraints, and compares the pins with the lock's; these tests read the committed files only
(no network): the lock holds the GPU stack, differs from envs/requirements.txt in exactly the
three pins that vLLM forces, and fits pyproject.toml's ranges; each conda environment names
the sha256 of what its post-deploy script installs (Snakemake rebuilds an environment only when
its own files change); the rules take the GPU environment when the config gives a rule a GPU.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import tomllib

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from workflow_helpers import ROOT, copy_workflow

ENVS = ROOT / "envs"
GPU_STACK = {
    "torch": "2.13.0",
    "transformers": "5.24.0",
    "trl": "1.16.0",
    "vllm": "0.30.0",
    "deepspeed": "0.19.8",
    "accelerate": "1.15.0",
}
# vLLM >= 0.27 caps numpy below 2.4 on Python <= 3.12 (mistral-common); the SLURM plugin's
# releases >= 2.7 need numpy >= 2.4.5, and those <= 2.6.1 need pandas < 3.
UV_COMMAND = (
    "uv pip compile",
    "--python-version 3.11",
    "--python-platform x86_64-manylinux_2_31",
    "--exclude-newer",
    "envs/requirements-gpu.in",
)
CHANGED = {"numpy": "2.3.5", "pandas": "2.3.3", "snakemake-executor-plugin-slurm": "2.6.1"}


def pins(path) -> dict[str, str]:
    found = {}
    for line in path.read_text().splitlines():
        if match := re.match(r"([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==(\S+)", line):
            found[canonicalize_name(match[1])] = match[2]
    return found


def test_the_gpu_lock_holds_the_gpu_stack():
    lock = pins(ENVS / "requirements-gpu.txt")
    assert {name: lock.get(name) for name in GPU_STACK} == GPU_STACK
    assert {name: lock.get(name) for name in CHANGED} == CHANGED


def test_the_gpu_lock_differs_from_the_cpu_pins_in_the_three_that_vllm_forces():
    """Every package of envs/requirements.txt is in the GPU lock at the same version, but for
    the three: what the CPU suite tested is what the cluster runs (torch aside: the CPU wheel
    there, its CUDA build here)."""
    cpu, gpu = pins(ENVS / "requirements.txt"), pins(ENVS / "requirements-gpu.txt")
    differ = {name: (version, gpu.get(name)) for name, version in cpu.items()}
    differ = {name: pair for name, pair in differ.items() if pair[0] != pair[1]}
    assert differ == {name: (cpu[name], CHANGED[name]) for name in CHANGED}


def test_the_lock_header_says_how_it_was_made_and_why_three_pins_differ():
    header = (ENVS / "requirements-gpu.txt").read_text().split("\n")[:20]
    for part in UV_COMMAND:
        assert part in header[1]
    assert any("numpy 2.3.5 (not 2.4.6)" in line for line in header)


def test_the_gpu_lock_pins_every_package_of_its_slurm_driver():
    """`make gpu-driver` installs envs/requirements-gpu-driver.in with the GPU lock as
    constraints: each of its packages is in the lock, so that the driver gets the lock's
    version, plugin 2.6.1 among them (pip leaves a package the lock lacks unconstrained)."""
    lock = pins(ENVS / "requirements-gpu.txt")
    lines = (ENVS / "requirements-gpu-driver.in").read_text().splitlines()
    driver = [Requirement(line) for line in lines if line.strip() and not line.startswith("#")]
    assert "snakemake-executor-plugin-slurm" in {canonicalize_name(r.name) for r in driver}
    assert [r.name for r in driver if canonicalize_name(r.name) not in lock] == []
    assert all(not r.specifier for r in driver)  # the lock says which version


@pytest.mark.parametrize("lock", ["requirements.txt", "requirements-gpu.txt"])
def test_pyproject_admits_both_environments(lock):
    """`pip install -e .` (and `pip check`) accept either environment's pins."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pinned = pins(ENVS / lock)
    for requirement in map(Requirement, project["dependencies"]):
        version = pinned.get(canonicalize_name(requirement.name))
        if version is not None:  # torch is installed apart from envs/requirements.txt
            assert requirement.specifier.contains(version), (requirement, version)


@pytest.mark.parametrize(
    "env, installs, marker",
    [
        ("cptlab-gpu", "requirements-gpu.txt", "lock"),
        ("cptlab", "requirements.txt", "requirements"),
    ],
)
def test_each_conda_environment_names_what_its_post_deploy_script_installs(env, installs, marker):
    """Snakemake hashes the environment file and its post-deploy script, not the requirements
    the script reads: the file carries their sha256, so that a new lock is a new environment.
    No pip: list with relative paths (Snakemake creates the environment from a copy of the file
    in .snakemake/conda/, where they would not resolve)."""
    text = (ENVS / f"{env}.yaml").read_text()
    digest = hashlib.sha256((ENVS / installs).read_bytes()).hexdigest()
    assert f"# {marker} sha256: {digest}\n" in text, f"set that line of envs/{env}.yaml to {digest}"
    assert "pip:" not in text.split("dependencies:")[1]
    assert f"envs/{installs}" in (ENVS / f"{env}.post-deploy.sh").read_text()


CONDA_ENVS = """
import sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings

with SnakemakeApi(OutputSettings()) as api:
    workflow = api.workflow(
        resource_settings=ResourceSettings(),
        config_settings=ConfigSettings(configfiles=[Path(p) for p in sys.argv[1:]]),
        snakefile=Path("Snakefile"),
    )._workflow
    print(sorted({str(rule.conda_env) for rule in workflow.rules if rule.conda_env}))
"""


@pytest.mark.parametrize(
    "configfiles, env",
    [(["config/paper.yaml"], "cptlab-gpu.yaml"), ([], "cptlab.yaml")],
    ids=["paper-gpu", "embedded-cpu"],
)
def test_every_rule_takes_the_gpu_environment_when_a_rule_asks_for_a_gpu(
    tmp_path, configfiles, env
):
    workdir = copy_workflow(tmp_path)
    parsed = subprocess.run(
        [sys.executable, "-c", CONDA_ENVS, *configfiles],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert parsed.returncode == 0, parsed.stderr
    assert parsed.stdout.strip().splitlines()[-1] == str([f"../../envs/{env}"])
