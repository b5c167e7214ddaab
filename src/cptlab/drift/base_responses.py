"""The workflow's `drift-base` job: the sentence embeddings of the base model's evaluation
responses, computed once and read by every chain's `drift-chain` job (each chain compares its
stages' responses with the base's, so without it each chain would embed the same texts again).

Files (the layout's drift/base_responses/ folder):
    texts.json        the distinct first completions of the base, in `base_texts` order
    embeddings.npy    one float32 row per text, as the embedder returned it for that list
    manifest.json     written last: embedder, benchmarks, number of texts

A chain uses them when the embedder and the texts are its own (`shared_embeddings`); it embeds
the same list in one call, so its vectors are these, bit for bit, at the same thread count.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from cptlab.artifacts import atomic_write_json, read_manifest, write_manifest
from cptlab.drift.embedders import Embedder, resolve_embedder
from cptlab.drift.settings import DriftSettings, thread_limits
from cptlab.drift.tables import read_responses
from cptlab.layout import Layout
from cptlab.plan import eval_benchmarks


def first_completions(path: Path) -> dict[str, str]:
    """Item id -> its first completion, from a responses file."""
    return {rid: r["completions"][0] for rid, r in read_responses(path).items()}


def base_texts(base_eval_dir: Path, benchmarks: Sequence[str]) -> list[str]:
    """The distinct first completions of the base over `benchmarks`, in benchmark and file
    order: the list a chain embeds first (cptlab.drift.chain.response_tables)."""
    texts = (
        t
        for b in benchmarks
        for t in first_completions(base_eval_dir / f"{b}.responses.jsonl").values()
    )
    return list(dict.fromkeys(texts))


def embed_base_responses(
    config: Mapping,
    layout: Layout,
    threads: int = 1,
    embedder: str | Embedder | None = None,
    device: str = "auto",
) -> dict:
    """Embed the base's responses into the layout's drift/base_responses/ folder; returns the
    manifest (written last). embedder None takes the config's drift.embedder; "none" writes no
    vectors."""
    started = time.perf_counter()
    embed, embedder_name = resolve_embedder(
        embedder or DriftSettings.from_config(config).embedder, device
    )
    benchmarks = [b.name for b in eval_benchmarks(config)]
    texts = base_texts(layout.eval_dir(), benchmarks)
    out_dir = layout.drift_base_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {"texts": "texts.json"}
    atomic_write_json(out_dir / "texts.json", texts)
    if embed is not None:
        with thread_limits(threads):
            vectors = np.asarray(embed(texts), dtype=np.float32)
        np.save(out_dir / "embeddings.npy", vectors)
        files["embeddings"] = "embeddings.npy"
    manifest = {
        "embedder": embedder_name,
        "benchmarks": benchmarks,
        "texts": len(texts),
        "files": files,
        "seconds": round(time.perf_counter() - started, 2),
    }
    write_manifest(out_dir, manifest)
    return manifest


def shared_embeddings(layout: Layout, embedder_name: str, texts: list[str]) -> np.ndarray | None:
    """The drift-base job's vectors of `texts`, or None where that job has not run, or ran with
    another embedder or on other texts (another benchmark list): the caller embeds them."""
    out_dir = layout.drift_base_dir
    try:
        manifest = read_manifest(out_dir)
    except FileNotFoundError:
        return None
    if manifest.get("embedder") != embedder_name or "embeddings" not in manifest["files"]:
        return None
    if json.loads((out_dir / "texts.json").read_text()) != texts:
        return None
    return np.load(out_dir / manifest["files"]["embeddings"])
