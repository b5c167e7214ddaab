"""The training settings (cptlab.train.settings): each key documented and in the schema, and
the settings as the stages' provenance records them: every shipped experiment's
resolved stage settings equal, key for key and in order, those written by the dict-based spec
of main 599dd4b (tests/fixtures/stage_settings.json; since then, teacher kinds `base` and `live`
are named `frozen` and `student`). A stage's fingerprint, its manifest and
the workflow's rerun triggers hash that dict, so a default changed here reruns every stage:
change the fixture by hand only with such a change."""

from __future__ import annotations

import json
from dataclasses import fields, is_dataclass
from pathlib import Path

import pytest

from cptlab.config import schema
from cptlab.train.settings import (
    METHOD_SETTINGS,
    CollapseSettings,
    GRPOSettings,
    KLProbeSettings,
    PolicySettings,
    SDPOSettings,
    SFTSettings,
    TrainingSettings,
)
from cptlab.train.spec import resolve_stage, training_section
from cptlab.validation import load_config

FIXTURE = json.loads(Path("tests/fixtures/stage_settings.json").read_text())


def same(value, expected) -> bool:
    """Equal as the provenance writes them: JSON text, key order and int/float included."""
    return json.dumps(value) == json.dumps(expected)


@pytest.mark.parametrize("experiment", list(FIXTURE))
def test_stage_settings_equal_the_recorded_ones(experiment):
    config = load_config(Path("config") / f"{experiment}.yaml")
    recorded = FIXTURE[experiment]
    assert same(training_section(config).as_dict(), recorded["training"])
    for method, expected in recorded["stages"].items():
        settings = resolve_stage(config, method, expected["domain"])
        assert same(settings.as_dict(), expected), method
        # the workflow's rerun trigger: without the other domains' step counts, nor where the
        # logs go
        training = {
            k: v for k, v in expected["training"].items() if k not in ("domain_steps", "report_to")
        }
        assert same(settings.as_dict(domain_steps=False), {**expected, "training": training})
    for stage, steps in recorded["steps"].items():
        method, domain = stage.split("/")
        assert resolve_stage(config, method, domain).steps == steps, stage


SECTIONS = [
    TrainingSettings,
    KLProbeSettings,
    CollapseSettings,
    PolicySettings,
    GRPOSettings,
    SDPOSettings,
    SFTSettings,
]


def test_every_setting_is_a_schema_key_and_every_schema_key_a_setting():
    methods = schema()["properties"]["methods"]["additionalProperties"]["properties"]
    method_keys = {key for cls in METHOD_SETTINGS.values() for key in cls.names()}
    assert set(methods) - {"trainer", "training"} == method_keys
    training = schema()["properties"]["training"]["properties"]
    assert set(training) == set(TrainingSettings.names())
    for key, cls in (("kl_probe", KLProbeSettings), ("collapse", CollapseSettings)):
        assert set(training[key]["properties"]) == set(cls.names()), key


@pytest.mark.parametrize("cls", SECTIONS, ids=lambda cls: cls.__name__)
def test_every_setting_is_documented(cls):
    inherited = {f.name for base in cls.__mro__[1:] if is_dataclass(base) for f in fields(base)}
    parameters = cls.__doc__.split("Parameters:")[1]
    for name in set(cls.names()) - inherited:
        assert f"\n        {name} (`" in parameters, name
