"""Config validation: errors name the bad key."""

import pytest
import yaml

from cptlab.config import ConfigError, load_config, validate_config


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
    with pytest.raises(ConfigError, match="data.domains.math names unknown benchmark 'math_oood'"):
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
