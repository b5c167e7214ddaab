# Helpers shared by the rules: config validation, paths, and content hashes of the code.
import hashlib
import json
from pathlib import Path

from snakemake.utils import validate

validate(config, "../schemas/config.schema.yaml")

EXPERIMENT = config["experiment"]
RESULTS = Path("results") / EXPERIMENT


def write_effective_config():
    """The merged config (config files + --config overrides) as the CLI's --config file.
    Rewritten only when it changes; rules track the sections they use through params."""
    path = RESULTS / "config.json"
    text = json.dumps(config, indent=2, sort_keys=True) + "\n"
    if not path.exists() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return str(path)


CONFIG_FILE = write_effective_config()


def benchmarks_of_config():
    """Every benchmark named in data.domains, plus the warm-up split of each domain."""
    names = []
    for domain, spec in config["data"]["domains"].items():
        names.append(f"{domain}_pretrain")
        names += ([spec["train"]] if "train" in spec else []) + spec.get("id", []) + spec.get("ood", [])
    return names


def data_file(name):
    return str(RESULTS / "data" / f"{name}.jsonl")


def base_manifest():
    return str(RESULTS / "base" / "manifest.json")


def code_hash(*modules):
    """sha256 of the named package sources: a param that reruns a rule when its code changes,
    compared by content (Snakemake's own code trigger uses mtimes, which a clone resets)."""
    digest = hashlib.sha256()
    root = Path(workflow.basedir) / "src" / "cptlab"
    for module in modules:
        path = root / module
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            digest.update(file.read_bytes())
    return digest.hexdigest()[:16]
