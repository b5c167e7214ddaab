"""The drift subcommands. Hook them into cptlab/cli.py's parser():

from cptlab.drift.cli import add_drift_parsers
add_drift_parsers(sub)

drift-params        per-matrix parameter drift of a checkpoint against a reference (CSV), and
                    optionally its means per layer type and per layer
drift-responses     per-item response similarity to the reference model's responses (CSV)
dataset-distance    pairwise MMD between prompt sets (CSV), t-SNE map (CSV), optionally gain and
                    forgetting against MMD with the fitted trends
collapse-forensics  the forensics report of a responses file (JSON), optionally the artifact's
                    trend over steps from a train log and from per-step responses (CSV)

The workflow's (cptlab.drift.run; one process per chain, so the embedder loads once):

drift-chain           every analysis above for every stage of one chain (method x seed)
dataset-distance-all  MMD / t-SNE of every data set of data.domains, gain and forgetting vs MMD
drift-figures         the drift figures from the tables of the two above

Bad input raises FileNotFoundError or ValueError with a message naming the file.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def _pairs(values: list[str] | None, what: str) -> dict[str, str]:
    """NAME=VALUE arguments as a dict (a bare PATH is named by its file stem)."""
    out: dict[str, str] = {}
    for value in values or []:
        name, sep, rest = value.partition("=")
        if not sep:
            name, rest = Path(value).stem, value
        if not name or not rest:
            raise ValueError(f"{what}: expected NAME=VALUE, got {value!r}")
        if name in out:
            raise ValueError(f"{what}: {name!r} given twice")
        out[name] = rest
    return out


def _set_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


def _drift_params(args: argparse.Namespace) -> None:
    from cptlab.drift.io import write_table
    from cptlab.drift.parameters import aggregate_drift, parameter_drift

    _set_threads(args.threads)
    df = parameter_drift(
        Path(args.checkpoint),
        Path(args.reference),
        k=args.k,
        alpha=args.alpha,
        update_threshold=args.update_threshold,
        device=args.device,
        svd_method=args.svd_method,
        seed=args.seed,
        out=args.out,
    )
    if args.by_type_out:
        write_table(aggregate_drift(df, "layer_type"), args.by_type_out)
    if args.by_layer_out:
        write_table(aggregate_drift(df, "layer"), args.by_layer_out)
    overall = aggregate_drift(df, None).iloc[0]
    print(json.dumps({m: float(overall[m]) for m in ("nss", "max_pa_left", "rel_frobenius")}))


def _embedder(name: str, device: str):
    from cptlab.drift.embedders import load_embedder

    return None if name == "none" else load_embedder(name, device=device)


def _drift_responses(args: argparse.Namespace) -> None:
    from cptlab.drift.io import write_json
    from cptlab.drift.responses import response_drift, summarize_similarity

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


def _dataset_distance(args: argparse.Namespace) -> None:
    import pandas as pd

    from cptlab.drift.datasets import dataset_distances, gain_forgetting_vs_mmd
    from cptlab.drift.io import read_prompts, write_json, write_table

    _set_threads(args.threads)
    files = _pairs(args.data, "--data")
    if len(files) < 2:
        raise ValueError("--data: need at least two data sets")
    prompts = {name: read_prompts(path) for name, path in files.items()}
    mmd, tsne = dataset_distances(
        prompts,
        _embedder(args.embedder, args.device),
        seed=args.seed,
        max_samples=args.max_samples,
        tsne_points=args.tsne_points,
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
            raise ValueError(f"{path}: {err}") from None
        if args.trend_table_out:
            write_table(table, args.trend_table_out)
        if args.trend_out:
            write_json(trends, args.trend_out)


def _collapse_forensics(args: argparse.Namespace) -> None:
    import re

    from cptlab.drift.collapse import (
        DegeneracyRule,
        artifact_trend_from_logs,
        artifact_trend_from_responses,
        collapse_forensics,
        most_frequent_artifact,
    )
    from cptlab.drift.io import read_json_lines, read_responses, write_table

    tokens = _pairs(args.format_token, "--format-token") or {"boxed": "\\boxed"}
    format_rule = None
    if args.format_regex:
        try:
            pattern = re.compile(args.format_regex, re.DOTALL)
        except re.error as err:
            raise ValueError(f"--format-regex: {err}") from None

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
            raise ValueError(
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


def _load_config(path: str) -> dict:
    from cptlab.config import load_config

    return load_config(path)


def _drift_chain(args: argparse.Namespace) -> None:
    from cptlab.drift.run import drift_chain

    manifest = drift_chain(
        _load_config(args.config),
        args.method,
        args.seed,
        args.results_dir,
        args.out_dir,
        threads=args.threads,
        embedder=args.embedder,
        device=args.device,
    )
    print(json.dumps({k: manifest[k] for k in ("method", "seed", "embedder", "seconds")}))


def _dataset_distance_all(args: argparse.Namespace) -> None:
    from cptlab.drift.run import dataset_distance_all

    manifest = dataset_distance_all(
        _load_config(args.config),
        args.data_dir,
        args.scores,
        args.out_dir,
        embedder=args.embedder,
        seed=args.seed,
        threads=args.threads,
        device=args.device,
    )
    print(json.dumps({k: manifest[k] for k in ("embedder", "seconds")}))


def _drift_figures(args: argparse.Namespace) -> None:
    from cptlab.drift.run import drift_figures

    manifest = drift_figures(_load_config(args.config), args.drift_dir, args.out_dir)
    print(json.dumps({"files": len(manifest["files"]), "missing": manifest["missing_inputs"]}))


def add_drift_parsers(subparsers: argparse._SubParsersAction) -> list[argparse.ArgumentParser]:
    """Add the drift subcommands to `subparsers` (the parser's `add_subparsers()`)."""
    from cptlab.drift.defaults import (
        DEFAULT_ALPHA,
        DEFAULT_K,
        DEFAULT_UPDATE_THRESHOLD,
        SVD_METHODS,
    )

    parsers = []
    p = subparsers.add_parser(
        "drift-params", help="per-matrix parameter drift of a checkpoint against a reference"
    )
    p.add_argument("--checkpoint", required=True, help="model folder (or .safetensors file)")
    p.add_argument("--reference", required=True, help="the reference W0 (base or previous stage)")
    p.add_argument("--out", required=True, help="per-matrix table (.csv)")
    p.add_argument("--by-type-out", default=None, help="means per layer type (.csv)")
    p.add_argument("--by-layer-out", default=None, help="means per layer (.csv)")
    p.add_argument("--k", type=int, default=DEFAULT_K, help="rank of the principal subspaces")
    p.add_argument("--alpha", type=float, default=DEFAULT_ALPHA, help="principal-mask share")
    p.add_argument(
        "--update-threshold",
        type=float,
        default=DEFAULT_UPDATE_THRESHOLD,
        help="relative change that counts as an update",
    )
    p.add_argument("--svd-method", choices=SVD_METHODS, default="auto")
    p.add_argument("--device", default="auto", help="auto (CUDA if available), cpu, cuda, ...")
    p.add_argument("--seed", type=int, default=0, help="randomized-SVD test matrix seed")
    p.add_argument("--threads", type=int, default=1, help="torch threads (Snakemake threads)")
    p.set_defaults(run=_drift_params)
    parsers.append(p)

    embedder_help = "minilm (all-MiniLM-L6-v2, offline), hashing (lexical fallback), none"
    p = subparsers.add_parser(
        "drift-responses", help="per-item similarity of responses to the reference model's"
    )
    p.add_argument("--responses", required=True, help="the checkpoint's responses (.jsonl)")
    p.add_argument("--reference", required=True, help="the reference model's responses (.jsonl)")
    p.add_argument("--out", required=True, help="per-item table (.csv)")
    p.add_argument("--summary-out", default=None, help="median/mean/p10/p90 in %% (.json)")
    p.add_argument(
        "--embedder", choices=("minilm", "hashing", "none"), default="minilm", help=embedder_help
    )
    p.add_argument("--device", default="cpu", help="embedder device")
    p.add_argument("--threads", type=int, default=1, help="torch threads (Snakemake threads)")
    p.set_defaults(run=_drift_responses)
    parsers.append(p)

    p = subparsers.add_parser(
        "dataset-distance", help="pairwise MMD and t-SNE map of data sets' prompt embeddings"
    )
    p.add_argument(
        "--data",
        nargs="+",
        required=True,
        help="NAME=PATH or PATH (named by its stem) of prepared .jsonl rows",
    )
    p.add_argument("--mmd-out", required=True, help="square MMD^2 table (.csv)")
    p.add_argument("--tsne-out", required=True, help="t-SNE coordinates (.csv)")
    p.add_argument(
        "--embedder", choices=("minilm", "hashing"), default="minilm", help=embedder_help
    )
    p.add_argument("--device", default="cpu", help="embedder device")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-samples", type=int, default=1000, help="prompts per set for the MMD")
    p.add_argument("--tsne-points", type=int, default=300, help="prompts per set on the map")
    p.add_argument(
        "--relative",
        default=None,
        help="relative performance .csv with columns source, target, relative",
    )
    p.add_argument("--trend-table-out", default=None, help="joined gain/forgetting/MMD (.csv)")
    p.add_argument("--trend-out", default=None, help="fitted trends (.json)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (Snakemake threads)")
    p.set_defaults(run=_dataset_distance)
    parsers.append(p)

    p = subparsers.add_parser(
        "collapse-forensics", help="repeated n-grams, format violations, degenerate outputs"
    )
    p.add_argument("--responses", required=True, help="a checkpoint's responses (.jsonl)")
    p.add_argument("--out", required=True, help="forensics report (.json)")
    p.add_argument("--ngram", type=int, default=4)
    p.add_argument(
        "--format-token",
        action="append",
        default=None,
        help="NAME=TEXT counted per completion (repeatable; default boxed=\\boxed)",
    )
    p.add_argument(
        "--format-regex",
        default=None,
        help="a completion follows the format when this regex matches (default: "
        "the verifier's reasons)",
    )
    p.add_argument(
        "--max-format-repeats",
        type=int,
        default=3,
        help="more occurrences of one format token flag a degenerate output",
    )
    p.add_argument("--log", default=None, help="train_log.jsonl of the stage")
    p.add_argument("--log-prefix", default="collapse/", help="train-log keys to follow")
    p.add_argument("--log-out", default=None, help="per-step train-log metrics (.csv)")
    p.add_argument(
        "--step-responses",
        nargs="*",
        default=None,
        help="STEP=PATH responses saved at training steps",
    )
    p.add_argument("--trend-out", default=None, help="artifact frequency per step (.csv)")
    p.set_defaults(run=_collapse_forensics)
    parsers.append(p)

    config_embedder = "embedder (default: the config's drift.embedder, else minilm)"
    p = subparsers.add_parser(
        "drift-chain",
        help="parameter / response drift and collapse forensics of every stage of one chain",
    )
    p.add_argument("--config", required=True)
    p.add_argument("--method", required=True, help="a key of run.methods")
    p.add_argument("--seed", type=int, required=True, help="a training seed of run.seeds")
    p.add_argument("--results-dir", required=True, help="results/<experiment>")
    p.add_argument("--out-dir", required=True, help="results/<exp>/drift/<method>/seed<seed>")
    p.add_argument(
        "--embedder", choices=("minilm", "hashing", "none"), default=None, help=config_embedder
    )
    p.add_argument("--device", default="auto", help="SVDs and embedder: auto, cpu, cuda, ...")
    p.add_argument("--threads", type=int, default=1, help="torch threads (Snakemake threads)")
    p.set_defaults(run=_drift_chain)
    parsers.append(p)

    p = subparsers.add_parser(
        "dataset-distance-all",
        help="MMD / t-SNE of every data set of data.domains; gain and forgetting vs MMD",
    )
    p.add_argument("--config", required=True)
    p.add_argument("--data-dir", required=True, help="folder of prepared <data set>.jsonl")
    p.add_argument("--scores", default=None, help="scores.csv (gain / forgetting vs MMD)")
    p.add_argument("--out-dir", required=True, help="results/<exp>/drift/datasets")
    p.add_argument(
        "--embedder",
        choices=("minilm", "hashing", "none"),
        default=None,
        help=config_embedder + "; none falls back to hashing",
    )
    p.add_argument("--device", default="auto", help="embedder device")
    p.add_argument("--seed", type=int, default=0, help="subsampling and t-SNE seed")
    p.add_argument("--threads", type=int, default=1, help="torch threads (Snakemake threads)")
    p.set_defaults(run=_dataset_distance_all)
    parsers.append(p)

    p = subparsers.add_parser("drift-figures", help="drift figures (PNG + PDF), manifest last")
    p.add_argument("--config", required=True)
    p.add_argument("--drift-dir", required=True, help="results/<exp>/drift")
    p.add_argument("--out-dir", required=True, help="results/<exp>/drift/figures")
    p.set_defaults(run=_drift_figures)
    parsers.append(p)
    return parsers
