"""Why forgetting happens: drift of parameters and responses, distances between data sets, and
forensics of collapsed outputs (paper.md, "Metrics"; issue #5).

checkpoint.py  streaming safetensors reader (single file or sharded with an index)
parameters.py  per-matrix NSS, principal angles, principal-mask overlap/update share, relative
               Frobenius change; `parameter_drift` over two checkpoints; `aggregate_drift`
responses.py   per-prompt embedding cosine and ROUGE-L F1 between trained and base responses
embedders.py   the offline all-MiniLM-L6-v2 embedder and a hashing fallback
datasets.py    unbiased RBF MMD between prompt sets, t-SNE map, gain/forgetting vs MMD trend
collapse.py    repeated n-grams, repetition, format violations, lengths, degenerate outputs,
               artifact frequency over training steps
defaults.py    k, alpha, update threshold and randomized-SVD settings (no heavy imports)
text.py        the tokenizer and n-gram helpers all lexical measures share
io.py          input readers and atomic table writers
cli.py         the `drift-params`, `drift-responses`, `dataset-distance` and
               `collapse-forensics` subcommands (add_drift_parsers)
"""

from __future__ import annotations

import importlib

# Lazy: `cptlab.drift.cli` is imported by every `cptlab` command and must stay light.
_EXPORTS = {
    "SafetensorsCheckpoint": "cptlab.drift.checkpoint",
    "aggregate_drift": "cptlab.drift.parameters",
    "matrix_drift": "cptlab.drift.parameters",
    "normalized_spectral_shift": "cptlab.drift.parameters",
    "parameter_drift": "cptlab.drift.parameters",
    "principal_angles": "cptlab.drift.parameters",
    "principal_mask": "cptlab.drift.parameters",
    "randomized_svd": "cptlab.drift.parameters",
    "singular_values": "cptlab.drift.parameters",
    "update_mask": "cptlab.drift.parameters",
    "relative_frobenius": "cptlab.drift.parameters",
    "rouge_l": "cptlab.drift.responses",
    "lcs_length": "cptlab.drift.responses",
    "response_drift": "cptlab.drift.responses",
    "summarize_similarity": "cptlab.drift.responses",
    "HashingEmbedder": "cptlab.drift.embedders",
    "MiniLMEmbedder": "cptlab.drift.embedders",
    "load_embedder": "cptlab.drift.embedders",
    "mmd_rbf": "cptlab.drift.datasets",
    "median_heuristic_bandwidth": "cptlab.drift.datasets",
    "pairwise_mmd": "cptlab.drift.datasets",
    "tsne_map": "cptlab.drift.datasets",
    "dataset_distances": "cptlab.drift.datasets",
    "fit_trend": "cptlab.drift.datasets",
    "gain_forgetting_vs_mmd": "cptlab.drift.datasets",
    "DegeneracyRule": "cptlab.drift.collapse",
    "collapse_forensics": "cptlab.drift.collapse",
    "completion_forensics": "cptlab.drift.collapse",
    "artifact_trend_from_logs": "cptlab.drift.collapse",
    "artifact_trend_from_responses": "cptlab.drift.collapse",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
