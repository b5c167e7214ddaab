"""`cptlab build-base`: the embedded base model, built offline in minutes, or copied from the
shipped build of the same recipe.

1. the weights (cptlab.base_model.weights): tokenizer, model, warm-up; copied instead from the
   shipped base when its recipe's weights part is this build's (cptlab.base_model.shipped);
2. the measurements of the saved weights and their bounds (cptlab.base_model.measure); copied
   too when the recipe's measurements part is this build's;
3. the manifest, written last, which says what was copied.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import torch

from cptlab.artifacts import write_manifest
from cptlab.base_model.measure import check_bounds, measure
from cptlab.base_model.settings import BaseSettings
from cptlab.base_model.shipped import file_digests, install, matching, recipe
from cptlab.base_model.weights import train_weights, weights_digest
from cptlab.checkpoints import load_tokenizer
from cptlab.domains.registry import get_benchmark
from cptlab.plan import base_measure_benchmarks
from cptlab.rows import read_jsonl

log = logging.getLogger(__name__)

# What a manifest says of the weights, and of their measurements: copied with each.
WEIGHT_KEYS = (
    "seed",
    "parameters",
    "vocab_size",
    "warmup_rows",
    "warmup_examples",
    "final_warmup_loss",
    "warmup_seconds",
    "threads",
    "weights_sha256",
)
MEASUREMENT_KEYS = ("measurements", "bounds", "bounds_ok", "measure_seconds")


def reasoning_patterns(config: dict) -> dict[str, str]:
    """The reasoning SDPO_0 deletes from each training domain's demonstrations
    (Benchmark.reasoning), for the domains whose answers reason."""
    return {
        d: pattern
        for d, spec in config["data"]["domains"].items()
        if spec.get("train") and (pattern := get_benchmark(spec["train"]).reasoning)
    }


def measure_base(
    config: dict, spec: BaseSettings, reasoning: dict[str, str], data_dir: Path, out_dir: Path
) -> dict:
    """The measurements of the base saved in `out_dir` (the reloaded copy: what later stages
    load is what we vouch for), with their bounds."""
    from transformers import Qwen2ForCausalLM

    model = Qwen2ForCausalLM.from_pretrained(out_dir, local_files_only=True)
    tokenizer = load_tokenizer(str(out_dir))
    rows = {
        name: read_jsonl(data_dir / f"{name}.jsonl")[: spec.measure.n]
        for name in base_measure_benchmarks(config)
    }
    started = time.perf_counter()
    results = measure(model, tokenizer, rows, spec.measure, spec.seed, reasoning)
    domains = config["data"]["domains"]
    train_domains = [d for d, s in domains.items() if s.get("train")]
    eval_only = [d for d, s in domains.items() if s.get("ood") and not s.get("train")]
    bounds = check_bounds(results, train_domains, eval_only, spec.measure.k)
    failed = [name for name, b in bounds.items() if not b["ok"]]
    if failed:
        log.warning("base model misses bound(s): %s", failed)
    return {
        "measurements": results,
        "bounds": bounds,
        "bounds_ok": not failed,
        "measure_seconds": round(time.perf_counter() - started, 1),
        "weights_sha256": weights_digest(model),
    }


def _shown(path: Path) -> str:
    """`path` relative to the working folder where it is under it (a manifest that is shipped
    names no machine's folders), else absolute."""
    path = path.resolve()
    return str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else str(path)


def build_base(
    config: dict,
    data_dir: str | Path,
    out_dir: str | Path,
    threads: int = 1,
    shipped: str | Path | None = None,
) -> dict:
    """Build (or copy from `shipped`, a shipped base of the same recipe), measure and save the
    embedded base model into `out_dir`; returns the manifest."""
    started = time.perf_counter()
    torch.set_num_threads(threads)
    data_dir, out_dir = Path(data_dir), Path(out_dir)
    spec, reasoning = BaseSettings.from_config(config), reasoning_patterns(config)
    domains = list(config["data"]["domains"])
    wanted = recipe(config, data_dir, reasoning)
    source = matching(shipped, wanted) if shipped else None
    if source is not None:
        install(shipped, out_dir, source)
        made = {key: source[key] for key in WEIGHT_KEYS}
    else:
        made = train_weights(spec, domains, reasoning, data_dir, out_dir)
    copies_measurements = source is not None and (
        source["recipe"]["measurements"] == wanted["measurements"]
    )
    if copies_measurements:
        made |= {key: source[key] for key in MEASUREMENT_KEYS}
    else:
        measured = measure_base(config, spec, reasoning, data_dir, out_dir)
        if measured.pop("weights_sha256") != made["weights_sha256"]:
            raise RuntimeError(f"{out_dir}: the reloaded weights are not the ones saved")
        made |= measured
    manifest = {
        "kind": "base_model",
        **made,
        "shipped": {
            "from": _shown(Path(shipped)),
            "weights": True,
            "measurements": copies_measurements,
        }
        if source is not None
        else None,
        "seconds": round(time.perf_counter() - started, 1),
        "recipe": wanted,
        # install() checked every copied file against the shipped digests
        "files": source["files"] if source is not None else file_digests(out_dir),
        "config": config["base"],
    }
    write_manifest(out_dir, manifest)
    return manifest
