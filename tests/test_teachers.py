"""The SDPO teacher kinds' registry (cptlab.train.teachers): the schema names every kind, former
names resolve to current ones, each kind reaches TRL as its own and keeps its checks. That every
kind resumes to the same weights is tested in test_train_stage.py."""

from __future__ import annotations

import logging

import pytest
from tiny_world import tiny_config

from cptlab.config import ConfigError
from cptlab.train.sdpo import CptSDPOConfig, sdpo_args
from cptlab.train.spec import resolve_stage
from cptlab.train.teachers import RENAMED, TEACHER_KINDS, trl_teacher
from cptlab.validation import schema


def sdpo_config(**method: object) -> dict:
    config = tiny_config()
    config["methods"]["sdpo"] = {"trainer": "sdpo", **method}
    return config


def test_the_schema_names_every_kind_and_former_name():
    entry = schema()["properties"]["methods"]["additionalProperties"]["properties"]
    assert entry["teacher_model_kind"]["enum"] == [*TEACHER_KINDS, *RENAMED]
    assert set(RENAMED.values()) <= set(TEACHER_KINDS)


def test_trl_runs_each_kind_as_one_of_its_own():
    for kind in TEACHER_KINDS.values():
        assert kind.trl_kind in ("base", "ema", "live"), kind.name  # SDPOConfig's documented
        assert trl_teacher(kind.trl_kind, kind.trust_region) is kind  # one kind per TRL setup


@pytest.mark.parametrize("name", TEACHER_KINDS)
def test_each_kind_reaches_trl(tmp_path, name):
    settings = resolve_stage(sdpo_config(teacher_model_kind=name), "sdpo", "math")
    kind = TEACHER_KINDS[name]
    assert settings.teacher is kind
    args = sdpo_args(settings.params, {"output_dir": str(tmp_path), "use_cpu": True}, None)
    assert args.teacher_model_kind == kind.trl_kind and args.teacher is kind
    assert (args.teacher_trust_region_mix is not None) == kind.trust_region


@pytest.mark.parametrize("old, new", RENAMED.items())
def test_a_former_name_resolves_to_the_current_one_with_a_warning(old, new, caplog):
    with caplog.at_level(logging.WARNING, logger="cptlab.train.teachers"):
        former = resolve_stage(sdpo_config(teacher_model_kind=old), "sdpo", "math")
    assert f"teacher_model_kind {old!r} is deprecated; use {new!r}" in caplog.text
    current = resolve_stage(sdpo_config(teacher_model_kind=new), "sdpo", "math")
    assert former.params.teacher_model_kind == new
    assert former.as_dict() == current.as_dict()  # the same stage, the same provenance


@pytest.mark.parametrize("name", TEACHER_KINDS)
def test_a_kind_without_an_anchor_rejects_anchor_keys(name):
    for anchor in ({"teacher_anchor": "base"}, {"teacher_anchor_mix": 0.5}):
        config = sdpo_config(teacher_model_kind=name, **anchor)
        if TEACHER_KINDS[name].anchored:
            resolve_stage(config, "sdpo", "math")
        else:
            with pytest.raises(
                ConfigError, match=f"a {name} teacher is .* takes no teacher_anchor"
            ):
                resolve_stage(config, "sdpo", "math")


def test_trl_config_checks_the_kind(tmp_path):
    common = {"output_dir": str(tmp_path), "use_cpu": True}
    with pytest.raises(ValueError, match="no teacher kind runs as TRL's 'ema' with a trust"):
        CptSDPOConfig(**common, teacher_model_kind="ema", teacher_trust_region_mix=0.1)
    with pytest.raises(ValueError, match="A student teacher is the student itself"):
        CptSDPOConfig(**common, teacher_model_kind="live", teacher_anchor_mix=0.5)
