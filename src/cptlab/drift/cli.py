"""The drift subcommands.

The workflow's (one process per chain, so the embedder loads once):

drift-base          the base's response embeddings, read by every chain's drift-chain
drift-chain         parameter / response drift and collapse forensics of every stage of one chain
dataset-distance    MMD / t-SNE of every data set of data.domains (the data alone)
drift-figures       gain and forgetting vs MMD (from scores.csv), then the drift figures

The same analyses on files of your choice:

drift-params        per-matrix parameter drift of a checkpoint against a reference (CSV), and
                    optionally its means per layer type and per layer
drift-responses     per-item response similarity to the reference model's responses (CSV)
dataset-mmd         pairwise MMD between prompt sets (CSV), t-SNE map (CSV), optionally gain and
                    forgetting against MMD with the fitted trends
collapse-forensics  the forensics report of a responses file (JSON), optionally the artifact's
                    trend over steps from a train log and from per-step responses (CSV)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cptlab.cli import CONFIG, RESULTS_DIR, THREADS, arg, command
from cptlab.errors import InputError

# The settings' defaults are DriftSettings' (None below means "use it"): importing it here would
# make it code of every job (cptlab.cli.command).
EMBEDDER_HELP = "minilm (all-MiniLM-L6-v2, offline), hashing (lexical fallback) or none"
CONFIG_EMBEDDER = arg("--embedder", default=None, help=EMBEDDER_HELP + " (default: the config's)")


def _pairs(values: list[str] | None, what: str) -> dict[str, str]:
    """NAME=VALUE arguments as a dict (a bare PATH is named by its file stem)."""
    out: dict[str, str] = {}
    for value in values or []:
        name, sep, rest = value.partition("=")
        if not sep:
            name, rest = Path(value).stem, value
        if not name or not rest:
            raise InputError(f"{what}: expected NAME=VALUE, got {value!r}")
        if name in out:
            raise InputError(f"{what}: {name!r} given twice")
        out[name] = rest
    return out


def _set_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


def _embedder(name: str, device: str):
    from cptlab.drift.embedders import get_embedder

    return get_embedder(name, device)


def _settings(args: argparse.Namespace):
    """DriftSettings with the values given on the command line."""
    from dataclasses import fields

    from cptlab.drift.settings import DriftSettings

    given = {f.name: getattr(args, f.name, None) for f in fields(DriftSettings)}
    return DriftSettings(**{k: v for k, v in given.items() if v is not None})


# ----- the workflow's ---------------------------------------------------------------------------


@command(
    "drift-base",
    "the base's response embeddings, read by every chain's drift-chain",
    CONFIG,
    RESULTS_DIR,
    CONFIG_EMBEDDER,
    arg("--device", default="auto", help="embedder device"),
    THREADS,
)
def drift_base(args: argparse.Namespace) -> None:
    from cptlab.drift.base_responses import embed_base_responses
    from cptlab.layout import Layout
    from cptlab.validation import load_config

    manifest = embed_base_responses(
        load_config(args.config),
        Layout(args.results_dir),
        threads=args.threads,
        embedder=args.embedder,
        device=args.device,
    )
    print(json.dumps({k: manifest[k] for k in ("embedder", "texts", "seconds")}))


@command(
    "drift-chain",
    "parameter / response drift and collapse forensics of every stage of one chain",
    CONFIG,
    arg("--method", required=True, help="a key of run.methods"),
    arg("--seed", type=int, required=True, help="a training seed of run.seeds"),
    RESULTS_DIR,
    CONFIG_EMBEDDER,
    arg("--device", default="auto", help="SVDs and embedder: auto, cpu, cuda, ..."),
    THREADS,
)
def drift_chain(args: argparse.Namespace) -> None:
    from cptlab.drift.chain import drift_chain
    from cptlab.layout import Layout
    from cptlab.validation import load_config

    manifest = drift_chain(
        load_config(args.config),
        args.method,
        args.seed,
        Layout(args.results_dir),
        threads=args.threads,
        embedder=args.embedder,
        device=args.device,
    )
    print(json.dumps({k: manifest[k] for k in ("method", "seed", "embedder", "seconds")}))


@command(
    "dataset-distance",
    "MMD / t-SNE of every data set of data.domains",
    CONFIG,
    RESULTS_DIR,
    CONFIG_EMBEDDER,
    arg("--device", default="auto", help="embedder device"),
    THREADS,
)
def dataset_distance(args: argparse.Namespace) -> None:
    from cptlab.drift.dataset_distance import dataset_distance
    from cptlab.layout import Layout
    from cptlab.validation import load_config

    manifest = dataset_distance(
        load_config(args.config),
        Layout(args.results_dir),
        embedder=args.embedder,
        threads=args.threads,
        device=args.device,
    )
    print(json.dumps({k: manifest[k] for k in ("embedder", "seconds")}))


@command(
    "drift-figures",
    "gain and forgetting vs MMD, then the drift figures (PNG + PDF), manifest last",
    CONFIG,
    RESULTS_DIR,
)
def drift_figures(args: argparse.Namespace) -> None:
    from cptlab.drift.plots import drift_figures
    from cptlab.layout import Layout
    from cptlab.validation import load_config

    manifest = drift_figures(load_config(args.config), Layout(args.results_dir))
    print(json.dumps({"files": len(manifest["files"]), "missing": manifest["missing_inputs"]}))


# ----- on files of your choice ------------------------------------------------------------------


@command(
    "drift-params",
    "per-matrix parameter drift of a checkpoint against a reference",
    arg("--checkpoint", required=True, help="model folder (or .safetensors file)"),
    arg("--reference", required=True, help="the reference W0 (base or previous stage)"),
    arg("--out", required=True, help="per-matrix table (.csv)"),
    arg("--by-type-out", default=None, help="means per layer type (.csv)"),
    arg("--by-layer-out", default=None, help="means per layer (.csv)"),
    arg("--k", type=int, default=None, help="rank of the principal subspaces (default 64)"),
    arg("--alpha", type=float, default=None, help="principal-mask share (default 0.05)"),
    arg(
        "--update-threshold",
        type=float,
        default=None,
        help="relative change that counts as an update (default 1e-3)",
    ),
    arg("--svd-method", default=None, help="auto (default), full or randomized"),
    arg("--device", default="auto", help="auto (CUDA if available), cpu, cuda, ..."),
    arg("--seed", type=int, default=0, help="randomized-SVD test matrix seed"),
    THREADS,
)
def drift_params(args: argparse.Namespace) -> None:
    from cptlab.drift.parameters import aggregate_drift, parameter_drift
    from cptlab.drift.tables import write_table

    _set_threads(args.threads)
    settings = _settings(args)
    df = parameter_drift(
        Path(args.checkpoint),
        Path(args.reference),
        k=settings.k,
        alpha=settings.alpha,
        update_threshold=settings.update_threshold,
        device=args.device,
        svd_method=settings.svd_method,
        seed=args.seed,
        out=args.out,
    )
    if args.by_type_out:
        write_table(aggregate_drift(df, "layer_type"), args.by_type_out)
    if args.by_layer_out:
        write_table(aggregate_drift(df, "layer"), args.by_layer_out)
    overall = aggregate_drift(df, None).iloc[0]
    print(json.dumps({m: float(overall[m]) for m in ("nss", "max_pa_left", "rel_frobenius")}))


@command(
    "drift-responses",
    "per-item similarity of responses to the reference model's",
    arg("--responses", required=True, help="the checkpoint's responses (.jsonl)"),
    arg("--reference", required=True, help="the reference model's responses (.jsonl)"),
    arg("--out", required=True, help="per-item table (.csv)"),
    arg("--summary-out", default=None, help="median/mean/p10/p90 in %% (.json)"),
    arg("--embedder", default="minilm", help=EMBEDDER_HELP),
    arg("--device", default="cpu", help="embedder device"),
    THREADS,
)
def drift_responses(args: argparse.Namespace) -> None:
    from cptlab.drift.responses import response_drift, summarize_similarity
    from cptlab.drift.tables import write_json

    _set_threads(args.threads)
    df = response_drift(
        Path(args.responses),
        Path(args.reference),
        _embedder(args.embedder, args.device),
        out=args.out,
    )
    summary = summarize_similarity(df)
    if args.summary_out:
        write_json({"embedder": args.embedder, **summary}, args.summary_out)
    print(json.dumps(summary))


@command(
    "dataset-mmd",
    "pairwise MMD and t-SNE map of data sets' prompt embeddings",
    arg(
        "--data",
        nargs="+",
        required=True,
        help="NAME=PATH or PATH (named by its stem) of prepared .jsonl rows",
    ),
    arg("--mmd-out", required=True, help="square MMD^2 table (.csv)"),
    arg("--tsne-out", required=True, help="t-SNE coordinates (.csv)"),
    arg("--embedder", default="minilm", help="minilm or hashing"),
    arg("--device", default="cpu", help="embedder device"),
    arg("--seed", type=int, default=0),
    arg("--max-samples", type=int, default=None, help="prompts per set for the MMD (1000)"),
    arg("--tsne-points", type=int, default=None, help="prompts per set on the map (300)"),
    arg(
        "--relative",
        default=None,
        help="relative performance .csv with columns source, target, relative",
    ),
    arg("--trend-table-out", default=None, help="joined gain/forgetting/MMD (.csv)"),
    arg("--trend-out", default=None, help="fitted trends (.json)"),
    THREADS,
)
def dataset_mmd(args: argparse.Namespace) -> None:
    import pandas as pd

    from cptlab.drift.distances import dataset_distances, gain_forgetting_vs_mmd
    from cptlab.drift.tables import read_prompts, write_json, write_table

    _set_threads(args.threads)
    files = _pairs(args.data, "--data")
    if len(files) < 2:
        raise InputError("--data: need at least two data sets")
    prompts = {name: read_prompts(path) for name, path in files.items()}
    settings = _settings(args)
    mmd, tsne = dataset_distances(
        prompts,
        _embedder(args.embedder, args.device),
        seed=args.seed,
        max_samples=settings.max_samples,
        tsne_points=settings.tsne_points,
    )
    write_table(mmd, args.mmd_out, index=True)
    write_table(tsne, args.tsne_out)
    if args.relative:
        path = Path(args.relative)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such file")
        try:
            table, trends = gain_forgetting_vs_mmd(mmd, pd.read_csv(path))
        except ValueError as err:
            raise InputError(f"{path}: {err}") from None
        if args.trend_table_out:
            write_table(table, args.trend_table_out)
        if args.trend_out:
            write_json(trends, args.trend_out)


@command(
    "collapse-forensics",
    "repeated n-grams, format violations, degenerate outputs",
    arg("--responses", required=True, help="a checkpoint's responses (.jsonl)"),
    arg("--out", required=True, help="forensics report (.json)"),
    arg("--ngram", type=int, default=4),
    arg(
        "--format-token",
        action="append",
        default=None,
        help="NAME=TEXT counted per completion (repeatable; default boxed=\\boxed)",
    ),
    arg(
        "--format-regex",
        default=None,
        help="a completion follows the format when this regex matches (default: "
        "the verifier's reasons)",
    ),
    arg(
        "--max-format-repeats",
        type=int,
        default=3,
        help="more occurrences of one format token flag a degenerate output",
    ),
    arg("--log", default=None, help="train_log.jsonl of the stage"),
    arg("--log-prefix", default="collapse/", help="train-log keys to follow"),
    arg("--log-out", default=None, help="per-step train-log metrics (.csv)"),
    arg(
        "--step-responses",
        nargs="*",
        default=None,
        help="STEP=PATH responses saved at training steps",
    ),
    arg("--trend-out", default=None, help="artifact frequency per step (.csv)"),
)
def collapse_forensics(args: argparse.Namespace) -> None:
    import re

    from cptlab.artifacts import read_json_lines
    from cptlab.drift.collapse import (
        DegeneracyRule,
        artifact_trend_from_logs,
        artifact_trend_from_responses,
        collapse_forensics,
        most_frequent_artifact,
    )
    from cptlab.drift.tables import read_responses, write_table

    tokens = _pairs(args.format_token, "--format-token") or {"boxed": "\\boxed"}
    format_rule = None
    if args.format_regex:
        try:
            pattern = re.compile(args.format_regex, re.DOTALL)
        except re.error as err:
            raise InputError(f"--format-regex: {err}") from None

        def format_rule(text: str) -> bool:
            return pattern.search(text) is not None

    report = collapse_forensics(
        Path(args.responses),
        ngram=args.ngram,
        format_tokens=tokens,
        format_rule=format_rule,
        rule=DegeneracyRule(max_format_repeats=args.max_format_repeats),
        out=args.out,
    )
    if args.log and args.log_out:
        write_table(
            artifact_trend_from_logs(read_json_lines(args.log), args.log_prefix), args.log_out
        )
    steps = _pairs(args.step_responses, "--step-responses")
    if steps and args.trend_out:
        texts = [t for r in read_responses(args.responses).values() for t in r["completions"]]
        name = most_frequent_artifact(texts, tokens) or next(iter(tokens))
        try:
            by_step = {int(step): path for step, path in steps.items()}
        except ValueError:
            raise InputError(
                f"--step-responses: steps must be integers, got {list(steps)}"
            ) from None
        write_table(
            artifact_trend_from_responses(by_step, tokens[name], args.ngram), args.trend_out
        )
    print(
        json.dumps(
            {k: report[k] for k in ("n_completions", "repetition_rate", "format_violation_rate")}
            | {"degenerate_share": report["degenerate"]["share"]}
        )
    )
