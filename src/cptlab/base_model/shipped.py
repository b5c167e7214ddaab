"""The shipped base: a build of the default recipe kept in the repository (models/embedded-base),
with the recipe it was built from, so that a run of the same recipe copies it rather than
building it (four minutes of serial work on two cores), and every machine starts from the same
weights.

A recipe has two parts, compared one after the other:

- the weights: the code that makes them (the import closure of cptlab.base_model.weights, which
  reads no config: the settings are values here), the `base` settings but `measure`, the domains
  in their mixture order, the reasoning SDPO_0 strips from each training domain's
  demonstrations, and the sha256 of each pretraining file;
- the measurements: the code of the whole `build-base` command, `base.measure` and the sha256 of
  each benchmark file measured.

Where the weights part matches, the weights are copied, and checked against the shipped
digests; where the measurements part matches too, the measurements are copied as well, else
they are made again on the copied weights. Anything else builds from scratch. The code parts
hash normalized code (cptlab.provenance), so a docstring or a comment keeps a shipped base
current; Python's syntax trees differ between its minor versions, so another Python builds.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import asdict
from pathlib import Path

from cptlab.artifacts import MANIFEST, read_manifest
from cptlab.base_model.settings import BaseSettings
from cptlab.errors import InputError
from cptlab.plan import base_measure_benchmarks
from cptlab.provenance import SourceTree, sha256_file

log = logging.getLogger(__name__)

WEIGHTS_MODULE = "cptlab.base_model.weights"


def file_digests(folder: str | Path) -> dict[str, str]:
    """sha256 of every file of a base folder but its manifest, by name."""
    return {
        path.name: sha256_file(path)
        for path in sorted(Path(folder).iterdir())
        if path.is_file() and path.name != MANIFEST
    }


def recipe(
    config: dict,
    data_dir: str | Path,
    reasoning: dict[str, str],
    sources: SourceTree | None = None,
) -> dict:
    """The recipe of `config`'s base from the prepared data in `data_dir` (`reasoning`: what
    SDPO_0 strips from each training domain's demonstrations, which the teacher-form warm-up
    rows strip too): {"weights": ..., "measurements": ...} as the module docstring lists them."""
    sources = sources or SourceTree()
    data_dir = Path(data_dir)
    settings = asdict(BaseSettings.from_config(config))
    measure = settings.pop("measure")
    settings.pop("path")
    domains = config["data"]["domains"]
    return {
        "weights": {
            "code": sources.module_hash(WEIGHTS_MODULE),
            "settings": settings,
            "domains": list(domains),
            "reasoning": reasoning,
            "data": {
                f"{d}_pretrain": sha256_file(data_dir / f"{d}_pretrain.jsonl") for d in domains
            },
        },
        "measurements": {
            "code": sources.code_hash("build-base"),
            "settings": measure,
            "data": {
                name: sha256_file(data_dir / f"{name}.jsonl")
                for name in base_measure_benchmarks(config)
            },
        },
    }


def matching(shipped: str | Path, wanted: dict) -> dict | None:
    """The manifest of the shipped base in `shipped` if its weights were made by `wanted`'s
    recipe, else None (logged with the parts that differ)."""
    if not (Path(shipped) / MANIFEST).is_file():
        log.info("no shipped base in %s: building", shipped)
        return None
    manifest = read_manifest(shipped)
    theirs = manifest.get("recipe", {}).get("weights", {})
    differ = sorted(k for k in wanted["weights"] if theirs.get(k) != wanted["weights"][k])
    if differ:
        log.info("the shipped base in %s has other weights (%s): building", shipped, differ)
        return None
    return manifest


def install(shipped: str | Path, out_dir: str | Path, manifest: dict) -> None:
    """Copy the files of the shipped base (`manifest`: its manifest) into `out_dir`, each checked
    against its recorded sha256 (a corrupt or hand-edited copy is an error, not a base)."""
    shipped, out_dir = Path(shipped), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, digest in manifest["files"].items():
        source = shipped / name
        if not source.is_file() or sha256_file(source) != digest:
            raise InputError(
                f"{source}: missing or not the file the shipped base's manifest records "
                f"(sha256 {digest[:12]}...); restore it with git, or remove the folder to build"
            )
        shutil.copyfile(source, out_dir / name)
