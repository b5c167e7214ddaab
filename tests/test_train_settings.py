"""The training settings (cptlab.train.settings) state the config schema's `methods` and
`training` sections (cptlab.config.dataclass_schema): each field's type, default, accepted values
and description, once. These tests check the generator on its own dataclasses, and that the
sections it makes accept every default and every shipped experiment's stages, and refuse what
the fields' rules refuse."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import jsonschema
import pytest

from cptlab.config import dataclass_schema, parameter_docs, setting
from cptlab.train.settings import METHOD_SETTINGS, TrainingSettings, schema_sections
from cptlab.train.spec import resolve_stage
from cptlab.validation import load_config


@dataclass(frozen=True)
class Inner:
    """`outer.inner`: a nested section.

    Parameters:
        depth:
            How deep.
    """

    depth: int = setting(3, minimum=1)


@dataclass(frozen=True)
class Outer:
    """The `outer` section.

    Parameters:
        name:
            A name
            over two lines.
        size:    aligned form: an int or nothing
                 (None: any size).
        kind:
            One of two.
        weights:
            Name -> weight.
        tags:
            Tags.
        inner:
            The nested one.

    Text after the parameters is not a parameter's.
    """

    name: str
    size: int | None = setting(None, minimum=0)
    kind: str = setting("a", enum=("a", "b"))
    weights: dict[str, float] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    inner: Inner = field(default_factory=Inner)


def test_a_dataclass_states_its_section():
    spec = dataclass_schema(Outer)
    assert spec["description"] == "The `outer` section."
    assert spec["required"] == ["name"] and spec["additionalProperties"] is False
    keys = spec["properties"]
    assert keys["name"] == {"type": "string", "description": "A name over two lines."}
    assert keys["size"] == {
        "type": ["integer", "null"],
        "minimum": 0,
        "default": None,
        "description": "aligned form: an int or nothing (None: any size).",
    }
    assert keys["kind"]["enum"] == ["a", "b"] and keys["kind"]["default"] == "a"
    assert keys["weights"]["additionalProperties"] == {"type": "number"}
    assert keys["tags"] == {
        "type": "array", "items": {"type": "string"}, "default": [], "description": "Tags."
    }  # fmt: skip
    assert keys["inner"]["description"] == "`outer.inner`: a nested section."
    assert keys["inner"]["properties"]["depth"]["minimum"] == 1
    assert parameter_docs(Outer)["inner"] == "The nested one."  # the text after it is not


def test_the_section_refuses_what_the_rules_refuse():
    validator = jsonschema.Draft202012Validator(dataclass_schema(Outer))
    assert not list(validator.iter_errors({"name": "x", "size": None, "inner": {"depth": 2}}))
    for bad in (
        {"size": 1},  # name is required
        {"name": "x", "size": -1},
        {"name": "x", "kind": "c"},
        {"name": "x", "weights": {"a": "heavy"}},
        {"name": "x", "inner": {"depth": 0}},
        {"name": "x", "colour": "red"},
    ):
        assert list(validator.iter_errors(bad)), bad


def test_an_undocumented_field_is_an_error():
    @dataclass
    class Undocumented:
        """Parameters:
        a:
            Documented.
        """

        a: int = 1
        b: int = 2

    with pytest.raises(TypeError, match=r"Undocumented\.b: no entry under Parameters:"):
        dataclass_schema(Undocumented)


def test_every_default_is_accepted_by_its_own_section():
    sections = schema_sections()
    jsonschema.validate(TrainingSettings().as_dict(), sections["training"])
    entry = sections["methods"]["additionalProperties"]
    for trainer, cls in METHOD_SETTINGS.items():
        jsonschema.validate({"trainer": trainer, **cls().as_dict()}, entry)


def test_a_method_key_names_the_trainers_that_take_it():
    entry = schema_sections()["methods"]["additionalProperties"]["properties"]
    assert entry["beta"]["description"].startswith("[grpo] ")
    assert entry["epsilon"]["description"].startswith("[grpo, sdpo] ")
    assert entry["completion_only_loss"]["description"].startswith("[sft] ")
    every = set.intersection(*(set(cls.names()) for cls in METHOD_SETTINGS.values()))
    assert all(not entry[key]["description"].startswith("[") for key in every)


@pytest.mark.parametrize("experiment", sorted(p.stem for p in Path("config").glob("*.yaml")))
def test_every_shipped_stage_is_one_its_sections_accept(experiment):
    config = load_config(Path("config") / f"{experiment}.yaml")
    sections = schema_sections()
    entry = sections["methods"]["additionalProperties"]
    for method, spec in config["methods"].items():
        for domain in config["run"]["sequence"]:
            stage = resolve_stage(config, method, domain)
            jsonschema.validate({"trainer": spec["trainer"], **stage.params.as_dict()}, entry)
            jsonschema.validate(stage.training.as_dict(), sections["training"])
            assert [f.name for f in dataclasses.fields(stage.training)] == list(
                stage.training.as_dict()
            )  # the provenance's key order is the declaration order
