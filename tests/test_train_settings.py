"""The training settings as the stages' provenance records them: every shipped experiment's
resolved stage settings equal, key for key and in order, those written by the dict-based spec
of main 599dd4b (tests/fixtures/stage_settings.json). A stage's fingerprint, its manifest and
the workflow's rerun triggers hash that dict, so a default changed here reruns every stage:
change the fixture by hand only with such a change."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cptlab.config import load_config
from cptlab.train.spec import resolve_stage, training_section

FIXTURE = json.loads(Path("tests/fixtures/stage_settings.json").read_text())


def same(value, expected) -> bool:
    """Equal as the provenance writes them: JSON text, key order and int/float included."""
    return json.dumps(value) == json.dumps(expected)


@pytest.mark.parametrize("experiment", list(FIXTURE))
def test_stage_settings_equal_the_recorded_ones(experiment):
    config = load_config(Path("config") / f"{experiment}.yaml")
    recorded = FIXTURE[experiment]
    assert same(training_section(config), recorded["training"])
    for method, expected in recorded["stages"].items():
        settings = resolve_stage(config, method, expected["domain"])
        assert same(settings.as_dict(), expected), method
    for stage, steps in recorded["steps"].items():
        method, domain = stage.split("/")
        assert resolve_stage(config, method, domain).steps == steps, stage
