"""Config validation: errors name the bad key."""

import pytest
import yaml

from cptlab.config import merge
from cptlab.errors import ConfigError
from cptlab.validation import load_config, schema, validate_config


def embedded():
    return yaml.safe_load(open("config/config.yaml"))


def test_default_config_is_valid():
    assert load_config("config/config.yaml")["experiment"] == "embedded"


@pytest.mark.parametrize(
    "mutate, key",
    [
        (lambda c: c["base"]["sft"].update(steps=0), "base.sft.steps"),
        (lambda c: c["base"]["sft"].update(stepz=10), "base.sft"),
        (lambda c: c["data"].update(seed="zero"), "data.seed"),
        (lambda c: c.update(experiment="has space"), "experiment"),
    ],
)
def test_schema_errors_name_the_key(mutate, key):
    config = embedded()
    mutate(config)
    with pytest.raises(ConfigError) as err:
        validate_config(config)
    assert key in str(err.value)


def test_unknown_benchmark_in_domains_is_named():
    config = embedded()
    config["data"]["domains"]["math"]["ood"] = ["math_oood"]
    with pytest.raises(ConfigError, match="data.domains.math.ood: unknown benchmark 'math_oood'"):
        validate_config(config)


def test_invalid_yaml_names_the_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("experiment: [unclosed\n")
    with pytest.raises(ConfigError, match="bad.yaml: not valid YAML"):
        load_config(path)


def test_json_config_keeps_exponent_numbers(tmp_path):
    """The workflow hands rules a JSON config; 3e-05 must stay a number."""
    import json

    config = embedded()
    config["training"]["learning_rate"] = 3e-05
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert load_config(path)["training"]["learning_rate"] == 3e-05


# --- extends: overlays ----------------------------------------------------------------------


def write(path, text: str):
    path.write_text(text)
    return path


def test_an_overlay_states_only_what_it_changes(tmp_path):
    write(tmp_path / "parent.yaml", open("config/config.yaml").read())
    write(
        tmp_path / "child.yaml",
        "extends: parent.yaml\nexperiment: child\nrun: {seeds: [0, 1]}\nevaluation: {n: 10}\n",
    )
    parent, child = load_config(tmp_path / "parent.yaml"), load_config(tmp_path / "child.yaml")
    assert child["experiment"] == "child" and child["run"]["seeds"] == [0, 1]
    assert child["run"]["sequence"] == parent["run"]["sequence"]  # mappings merge key by key
    assert child["evaluation"] == {**parent["evaluation"], "n": 10}
    assert "extends" not in child
    assert list(child) == list(parent)  # the parent's key order (domain order matters)


def test_lists_and_one_value_mappings_replace(tmp_path):
    config = embedded()
    merged = merge(config, {"run": {"methods": ["grpo"]}, "training": {"collapse": {
        "thresholds": {"top_ngram_share": 0.9}}}})  # fmt: skip
    assert merged["run"]["methods"] == ["grpo"]
    assert merged["training"]["collapse"]["thresholds"] == {"top_ngram_share": 0.9}
    assert merged["training"]["collapse"]["patience"] == config["training"]["collapse"]["patience"]


def test_extends_chains_loops_and_missing_files_are_named(tmp_path):
    write(tmp_path / "a.yaml", open("config/config.yaml").read())
    write(tmp_path / "b.yaml", "extends: a.yaml\nexperiment: b\n")
    write(tmp_path / "c.yaml", "extends: b.yaml\nrun: {seeds: [3]}\n")
    chained = load_config(tmp_path / "c.yaml")
    assert (chained["experiment"], chained["run"]["seeds"]) == ("b", [3])
    write(tmp_path / "x.yaml", "extends: y.yaml\n")
    write(tmp_path / "y.yaml", "extends: x.yaml\n")
    with pytest.raises(ConfigError, match="loops back"):
        load_config(tmp_path / "x.yaml")
    write(tmp_path / "lost.yaml", "extends: nowhere.yaml\n")
    with pytest.raises(ConfigError, match="nowhere.yaml: no such config file .extended by"):
        load_config(tmp_path / "lost.yaml")


def test_learning_yaml_is_an_overlay_of_the_default():
    learning, default = load_config("config/learning.yaml"), load_config("config/config.yaml")
    text = open("config/learning.yaml").read()
    assert "extends: config.yaml" in text and len(text.splitlines()) < 20
    assert learning["methods"] == default["methods"]
    assert learning["training"] == default["training"]
    assert learning["run"]["sequence"] == ["math"] and learning["base"]["path"]


def test_study_yaml_runs_every_findings_role_over_three_seeds():
    from cptlab.results.findings import ROLES

    study, default = load_config("config/study.yaml"), load_config("config/config.yaml")
    assert study["training"] == default["training"] and study["base"] == default["base"]
    assert study["run"]["seeds"] == [0, 1, 2]
    assert set(ROLES.values()) | {"sft_replay"} == set(study["run"]["methods"])
    assert study["methods"]["sft_replay"]["training"]["replay_share"] == 0.25


def test_the_matched_and_build_configs_change_only_what_they_name():
    """matched.yaml: the study's training with a KL budget and a step cap; build1/2.yaml: the
    study on another base seed. Neither changes anything else of the study's."""
    study = load_config("config/study.yaml")
    matched = load_config("config/matched.yaml")
    assert matched["training"] == {**study["training"], "steps": 100, "kl_budget": 0.2}
    assert matched["base"] == study["base"] and matched["methods"] == study["methods"]
    assert matched["run"] == {**study["run"], "methods": ["grpo", "sdpo_frozen"]}
    for seed in (1, 2):
        build = load_config(f"config/build{seed}.yaml")
        assert build["base"] == {**study["base"], "seed": seed}
        assert build["training"] == study["training"] and build["data"] == study["data"]
        assert build["run"] == {**study["run"], "methods": ["grpo", "sdpo_frozen", "sft"]}
        assert build["experiment"] == f"build{seed}"


def test_overrides_merge_last(tmp_path):
    config = load_config("config/config.yaml", {"evaluation": {"n": 7}})
    assert config["evaluation"]["n"] == 7 and config["evaluation"]["samples"] == 1


# --- one home per key: the settings dataclasses state their sections
# (tests/test_train_settings.py); the code reads the other sections' defaults from the schema ---


@pytest.mark.parametrize("section", ["base", "evaluation", "drift", "methods", "training"])
def test_a_section_a_dataclass_states_is_not_in_the_schema_file(section):
    from cptlab.config import schema_file

    assert schema_file()["properties"][section] == {}
    assert schema()["properties"][section]["type"] == "object"


def test_the_code_reads_its_defaults_from_the_schema():
    from cptlab.resources import RESOURCE_DEFAULTS, rule_resources
    from cptlab.results.findings import ROLES

    assert RESOURCE_DEFAULTS["build_base"]["threads"] == 2 and ROLES["sdpo_0"] == "sdpo_frozen"
    assert rule_resources({"resources": {"train": {"gpu": 8}}}, "train")["runtime"] == 60


def test_every_key_is_described():
    def walk(prefix, spec, found):
        for key, child in (spec.get("properties") or {}).items():
            if not str(child.get("description", "")).strip():
                found.append(f"{prefix}{key}")
            walk(f"{prefix}{key}.", child, found)
            extra = child.get("additionalProperties")
            if isinstance(extra, dict):
                walk(f"{prefix}{key}.<name>.", extra, found)
        return found

    full = schema()
    assert walk("", full, []) == []
    assert walk("<job_resources>.", full["$defs"]["job_resources"], []) == []


def test_config_readme_is_written_from_the_schema():
    from cptlab.config_reference import reference

    assert open("config/README.md").read() == reference(schema()), (
        "config/README.md is stale: run `cptlab config-reference --out config/README.md`"
    )


def test_missing_required_base_keys_are_named():
    from cptlab.base_model.settings import BaseSettings

    config = embedded()
    del config["base"]["model"]["num_heads"]
    with pytest.raises(ConfigError, match=r"base.model: missing required key\(s\) \['num_heads'\]"):
        BaseSettings.from_config(config)
