"""Every malformed config stops `snakemake -n` at parse time with one line naming the key and
the problem, and no traceback: the Snakefile runs every check `cptlab` runs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from workflow_helpers import copy_workflow, snakemake

pytestmark = pytest.mark.integration

SMOKE = yaml.safe_load(Path("config/smoke.yaml").read_text())


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return copy_workflow(tmp_path_factory.mktemp("config_errors"))


def overlay(workdir: Path, name: str, text: str) -> str:
    (workdir / f"{name}.yaml").write_text(text)
    return f"{name}.yaml"


def edit(edit_config) -> str:
    config = yaml.safe_load(yaml.safe_dump(SMOKE))
    edit_config(config)
    return yaml.safe_dump(config, sort_keys=False)


CASES = {
    "unknown benchmark": (
        edit(lambda c: c["data"]["domains"]["math"].update(id=["math_idd"])),
        "data.domains.math.id: unknown benchmark 'math_idd' (did you mean 'math_id'",
    ),
    "unknown benchmark in data.sizes.benchmarks": (
        edit(lambda c: c["data"]["sizes"].update(benchmarks={"copying_pretrian": 4000})),
        "data.sizes.benchmarks: unknown benchmark 'copying_pretrian' (did you mean "
        "'copying_pretrain'",
    ),
    "unknown method": (
        edit(lambda c: c["run"].update(methods=["grpo", "sdpo_frozn"])),
        "run.methods[1]: unknown method 'sdpo_frozn' (did you mean 'sdpo_frozen'",
    ),
    "unknown domain": (
        edit(lambda c: c["run"].update(sequence=["math", "sciense"])),
        "run.sequence[1]: unknown domain 'sciense' (did you mean 'science'",
    ),
    "unknown domain in domain_steps": (
        edit(lambda c: c["training"].update(domain_steps={"maths": 3})),
        "training.domain_steps: unknown domain 'maths'",
    ),
    "a sequence domain that cannot train": (
        edit(lambda c: c["run"].update(sequence=["math", "logic"])),
        "run.sequence[1]: domain 'logic' has no `train` split",
    ),
    "batch shape against the micro-batch": (
        edit(lambda c: c["training"].update(per_device_train_batch_size=3)),
        "= 4 completions per rollout batch must split into updates_per_generation 1 x "
        "per_device_train_batch_size 3 x 1 process(es)",
    ),
    "mini-batches of whole prompts": (
        edit(lambda c: c["methods"]["grpo"].update(updates_per_generation=3)),
        "methods.grpo (training): prompts_per_step 2 must split into updates_per_generation 3",
    ),
    "batch shape against the launcher's processes": (
        edit(
            lambda c: c["resources"]["train"].update(launcher="accelerate launch --num_processes 3")
        ),
        "must split into updates_per_generation 1 x per_device_train_batch_size 1 x 3 process(es)",
    ),
    "a key the trainer does not take": (
        edit(lambda c: c["methods"]["grpo"].update(teacher_model_kind="base")),
        "methods.grpo: the grpo trainer takes no key 'teacher_model_kind'",
    ),
    "an unknown key": (
        edit(lambda c: c["evaluation"].update(samplez=2)),
        "evaluation.samplez: unknown key",
    ),
    "a bad value": (
        edit(lambda c: c["training"].update(steps=0)),
        "training.steps: 0 is less than the minimum of 1",
    ),
    "an extends loop": ("extends: loop.yaml\nexperiment: loop\n", "`extends` loops back"),
    "a missing extends file": (
        "extends: config/nowhere.yaml\n",
        "config/nowhere.yaml: no such config file (extended by",
    ),
    "YAML syntax in an extended file": (
        "extends: broken.yaml\n",
        'broken.yaml: not valid YAML (while parsing a flow sequence in "',
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_malformed_config_gives_one_line(workdir, case):
    text, message = CASES[case]
    name = "loop" if case == "an extends loop" else case.replace(" ", "_").replace("'", "")
    (workdir / "broken.yaml").write_text("experiment: [unclosed\n")
    done = snakemake(workdir, "-n", "--cores", "1", "--configfile", overlay(workdir, name, text))
    lines = [
        line
        for line in (done.stdout + done.stderr).splitlines()
        if line.strip() and not line.startswith("Using workflow specific profile")
    ]
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(lines) == 1, lines
    assert lines[0].startswith("cptlab: error: ") and message in lines[0], lines[0]
    assert "Traceback" not in done.stderr and 'File "' not in done.stderr


def test_yaml_syntax_in_the_configfile_itself_is_snakemakes_one_message(workdir):
    """Snakemake parses a --configfile before the Snakefile runs, so its own message reports
    a syntax error there; a file reached through `extends:` gets cptlab's, with the line."""
    done = snakemake(
        workdir, "-n", "--cores", "1", "--configfile", overlay(workdir, "bad", "a: [\n")
    )
    assert done.returncode != 0
    assert "Config file is not valid JSON or YAML" in done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
