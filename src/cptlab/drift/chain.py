"""Every drift analysis of one chain (method x seed), as the workflow's `drift-chain` job runs
it: one process per chain, so the embedder loads once and the base is read once.

Every stage k of the chain: parameter drift against the base model and against the previous
stage (the base for stage 1: computed once, reported under both references), response drift
against the base's evaluation responses, collapse forensics of every checkpoint (the base as
stage 0 included) and the most frequent artifact's trend over training steps (train logs and
checkpoint responses).

Files (in the chain's drift folder, cptlab.layout; CSV unless noted):
    params_matrices          per (stage, reference, matrix): cptlab.drift.parameters.COLUMNS
    params_by_type           means per (stage, reference, layer_type), with n_matrices
    params_by_layer          means per (stage, reference, layer) (embedding / lm_head left out)
    params_summary           one row per (stage, reference): means over all matrices
    responses                per (stage, benchmark, id): cosine, rouge_l, tokens, reference_tokens
    responses_summary        per (stage, benchmark | "all"): n and the median / mean / p10 / p90 of
                             cosine and rouge_l in %
    collapse                 per (stage 0..K, benchmark | "all"): the forensics' scalar measures
    collapse/stage<k>.json   the full forensics report of checkpoint k ("all" and per benchmark)
    artifact_trend_log       per (stage, training step): the train log's collapse/* metrics, with
                             global_step (steps counted across stages)
    artifact_trend_responses per checkpoint: the artifact's frequency in its evaluation responses,
                             at the global step where the checkpoint was saved
    manifest.json            written last

Stage k's reference "base" is the base model; "previous" is stage k-1 (the base for k = 1). The
responses of stage k are compared with the base's on the same items (first completion of each).
The collapse forensics read the first `completions_per_item` completions of each item (default 1:
with avg@16 evaluations of 8k-token answers, all of them would take hours of pure Python).
Settings come from the config's optional `drift` section (cptlab.drift.settings) and, for the
n-gram size and format tokens, its `training.collapse` section.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from cptlab.artifacts import read_json_lines, write_manifest
from cptlab.checkpoints import model_folder
from cptlab.drift.base_responses import base_texts, first_completions, shared_embeddings
from cptlab.drift.embedders import Embedder, resolve_embedder
from cptlab.drift.settings import ChainSettings, DriftSettings, thread_limits
from cptlab.drift.tables import ALL, read_responses, write_json, write_table
from cptlab.layout import Layout
from cptlab.plan import builds_base, eval_benchmarks

log = logging.getLogger(__name__)

SUMMARY_METRICS = (
    "nss",
    "max_pa_left",
    "max_pa_right",
    "pm_overlap",
    "pm_update_share",
    "rel_frobenius",
)
REFERENCES = ("base", "previous")
LOG_PREFIX = "collapse/"


@dataclass(frozen=True)
class Stage:
    k: int
    domain: str
    folder: Path  # the checkpoint
    eval_dir: Path  # its evaluation files
    train_log: Path


def chain_stages(config: Mapping, layout: Layout, method: str, seed: int) -> list[Stage]:
    """The stages of one chain, in training order."""
    return [
        Stage(
            k,
            domain,
            layout.stage_dir(method, seed, k, domain),
            layout.eval_dir(method, seed, k),
            layout.train_log(method, seed, k, domain),
        )
        for k, domain in enumerate(config["run"]["sequence"], start=1)
    ]


def base_folder(config: Mapping, layout: Layout) -> Path:
    """The base model's folder: the built one, or `base.path` (a local folder or a hub name in
    the local HF cache)."""
    return layout.base_dir if builds_base(config) else model_folder(config["base"]["path"])


# ----- parameter drift --------------------------------------------------------------------------


def parameter_tables(
    stages: Sequence[Stage],
    base: Path,
    settings: DriftSettings,
    device: str = "auto",
) -> dict[str, pd.DataFrame]:
    """Per-matrix drift of every stage against the base and the previous stage, and its means
    per layer type, per layer and overall ("matrices", "by_type", "by_layer", "summary")."""
    from cptlab.drift.parameters import METRICS, aggregate_drift, parameter_drift

    done: dict[tuple[str, str], pd.DataFrame] = {}
    matrices, by_type, by_layer, summary = [], [], [], []
    for i, stage in enumerate(stages):
        previous = base if i == 0 else stages[i - 1].folder
        for reference, ref_path in zip(REFERENCES, (base, previous), strict=True):
            key = (str(stage.folder), str(ref_path))
            if key not in done:
                started = time.perf_counter()
                done[key] = parameter_drift(
                    stage.folder,
                    ref_path,
                    k=settings.k,
                    alpha=settings.alpha,
                    update_threshold=settings.update_threshold,
                    device=device,
                    svd_method=settings.svd_method,
                )
                log.info(
                    "stage %d vs %s: %d matrices in %.1f s",
                    stage.k,
                    reference,
                    len(done[key]),
                    time.perf_counter() - started,
                )
            df = done[key]
            keys = {"stage": stage.k, "stage_domain": stage.domain, "reference": reference}
            matrices.append(_with_keys(df, keys))
            by_type.append(_with_keys(aggregate_drift(df, "layer_type"), keys))
            by_layer.append(_with_keys(aggregate_drift(df, "layer"), keys))
            overall = aggregate_drift(df, None).drop(columns="group")
            summary.append(_with_keys(overall, keys))
    tables = {
        "matrices": pd.concat(matrices, ignore_index=True),
        "by_type": pd.concat(by_type, ignore_index=True),
        "by_layer": pd.concat(by_layer, ignore_index=True),
        "summary": pd.concat(summary, ignore_index=True),
    }
    ordered = ["stage", "stage_domain", "reference", "n_matrices", *SUMMARY_METRICS]
    rest = [m for m in METRICS if m not in ordered]
    tables["summary"] = tables["summary"][ordered + rest]
    return tables


def _with_keys(df: pd.DataFrame, keys: Mapping) -> pd.DataFrame:
    out = df.copy()
    for i, (name, value) in enumerate(keys.items()):
        out.insert(i, name, value)
    return out


# ----- response drift ---------------------------------------------------------------------------


class _EmbeddingCache:
    """Embeds each distinct text once (collapsed models repeat themselves; the base's responses
    serve every stage)."""

    def __init__(self, embedder: Embedder | None) -> None:
        self.embedder = embedder
        self.vectors: dict[str, np.ndarray] = {}

    def add(self, texts: Sequence[str], vectors: np.ndarray | None = None) -> None:
        """Embed the texts not yet here; `vectors`: those of the distinct `texts`, embedded
        elsewhere (the drift-base job)."""
        if self.embedder is None:
            return
        new = list(dict.fromkeys(t for t in texts if t not in self.vectors))
        if new:
            embedded = np.asarray(self.embedder(new)) if vectors is None else vectors
            for text, vector in zip(new, embedded, strict=True):
                self.vectors[text] = vector

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self.vectors[t] for t in texts]) if texts else np.zeros((0, 1))


def response_tables(
    stages: Sequence[Stage],
    base_eval_dir: Path,
    benchmarks: Sequence[str],
    embedder: Embedder | None,
    base_vectors: np.ndarray | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per item, summary): each stage's first completion per item against the base's, for every
    benchmark. cosine is NaN without an embedder. base_vectors: the embeddings of
    `base_texts(base_eval_dir, benchmarks)` where the drift-base job made them."""
    from cptlab.drift.responses import (
        cosine_similarity,
        matched_ids,
        rouge_l,
        summarize_similarity,
    )
    from cptlab.drift.text import tokenize

    base = {b: first_completions(base_eval_dir / f"{b}.responses.jsonl") for b in benchmarks}
    trained = {
        (s.k, b): first_completions(s.eval_dir / f"{b}.responses.jsonl")
        for s in stages
        for b in benchmarks
    }
    cache = _EmbeddingCache(embedder)
    cache.add([t for texts in base.values() for t in texts.values()], base_vectors)
    cache.add([t for texts in trained.values() for t in texts.values()])
    frames = []
    for stage in stages:
        for b in benchmarks:
            ref, mine = base[b], trained[(stage.k, b)]
            ids = matched_ids(
                mine,
                ref,
                stage.eval_dir / f"{b}.responses.jsonl",
                base_eval_dir / f"{b}.responses.jsonl",
            )
            texts, ref_texts = [mine[i] for i in ids], [ref[i] for i in ids]
            if embedder is not None and ids:
                cosine = cosine_similarity(cache(texts), cache(ref_texts))
            else:
                cosine = np.full(len(ids), np.nan)
            tokens, ref_tokens = [tokenize(t) for t in texts], [tokenize(t) for t in ref_texts]
            frames.append(
                pd.DataFrame(
                    {
                        "stage": stage.k,
                        "stage_domain": stage.domain,
                        "benchmark": b,
                        "id": ids,
                        "cosine": cosine,
                        "rouge_l": [rouge_l(a, r) for a, r in zip(tokens, ref_tokens, strict=True)],
                        "tokens": [len(t) for t in tokens],
                        "reference_tokens": [len(t) for t in ref_tokens],
                    }
                )
            )
    columns = ["stage", "stage_domain", "benchmark", "id", "cosine", "rouge_l", "tokens"]
    items = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)
    rows = []
    for (k, domain), group in items.groupby(["stage", "stage_domain"], sort=True):
        parts = [(ALL, group)] + [(b, group[group["benchmark"] == b]) for b in benchmarks]
        for name, part in parts:
            summary = summarize_similarity(part)
            row = {"stage": k, "stage_domain": domain, "benchmark": name, "n": summary["n"]}
            for metric in ("cosine", "rouge_l"):
                for stat in ("median", "mean", "p10", "p90"):
                    row[f"{metric}_{stat}"] = summary.get(metric, {}).get(stat, math.nan)
            rows.append(row)
    return items, pd.DataFrame(rows)


# ----- collapse forensics -----------------------------------------------------------------------


def _checkpoint_completions(
    eval_dir: Path, benchmarks: Sequence[str], per_item: int | None = None
) -> dict[str, dict]:
    """{benchmark: {"texts", "reasons" (None when some item lacks them), "labels"}}: the first
    `per_item` completions of each item (None: all)."""
    out = {}
    for b in benchmarks:
        texts, reasons, labels, ok = [], [], [], True
        for rid, record in read_responses(eval_dir / f"{b}.responses.jsonl").items():
            completions = record["completions"][:per_item]
            item_reasons = record.get("reasons")
            if isinstance(item_reasons, list) and len(item_reasons) == len(record["completions"]):
                item_reasons = item_reasons[:per_item]
            if not isinstance(item_reasons, list) or len(item_reasons) != len(completions):
                ok, item_reasons = False, [None] * len(completions)
            for j, text in enumerate(completions):
                texts.append(text)
                reasons.append(item_reasons[j])
                labels.append(f"{b}/{rid}#{j}")
        out[b] = {"texts": texts, "reasons": reasons if ok else None, "labels": labels}
    return out


def _collapse_row(report: dict, stage: int, domain: str, benchmark: str, artifact: str | None):
    tokens = report["length"]["tokens"]
    top = report["top_ngrams"][0] if report["top_ngrams"] else {}
    fmt = report["format_tokens"].get(artifact or "", {})
    violation = report["format_violation_rate"]
    return {
        "stage": stage,
        "stage_domain": domain,
        "benchmark": benchmark,
        "n_completions": report["n_completions"],
        "repetition_rate": report["repetition_rate"],
        "top_ngram_share": report["top_ngram_share"],
        "duplicate_share": report["duplicate_share"],
        "format_violation_rate": math.nan if violation is None else violation,
        "degenerate_count": report["degenerate"]["count"],
        "degenerate_share": report["degenerate"]["share"],
        "tokens_mean": tokens.get("mean", math.nan),
        "tokens_median": tokens.get("median", math.nan),
        "tokens_p90": tokens.get("p90", math.nan),
        "tokens_max": tokens.get("max", math.nan),
        "top_ngram": top.get("ngram", ""),
        "top_ngram_count": top.get("count", 0),
        "top_ngram_corpus_share": top.get("share", math.nan),
        "most_frequent_artifact": report["most_frequent_artifact"] or "",
        "artifact": artifact or "",
        "artifact_per_completion": fmt.get("per_completion", math.nan),
        "artifact_repeated_share": fmt.get("repeated_share", math.nan),
    }


def collapse_tables(
    checkpoints: Sequence[tuple[int, str, Path]],
    benchmarks: Sequence[str],
    settings: ChainSettings,
    out_dir: Path,
) -> tuple[pd.DataFrame, str | None, dict[int, list[str]]]:
    """Forensics of every checkpoint ((k, domain, eval dir); k = 0 is the base): writes
    collapse/stage<k>.json; returns (the table, the chain's most frequent artifact, the texts of
    each checkpoint)."""
    from cptlab.drift.collapse import completion_forensics, most_frequent_artifact

    ngram, tokens = settings.ngram, settings.format_tokens
    per_item = settings.drift.completions_per_item
    completions = {k: _checkpoint_completions(d, benchmarks, per_item) for k, _, d in checkpoints}
    texts = {k: [t for b in benchmarks for t in c[b]["texts"]] for k, c in completions.items()}
    trained = [t for k, ts in texts.items() if k > 0 for t in ts]
    artifact = most_frequent_artifact(trained, tokens) or most_frequent_artifact(
        [t for ts in texts.values() for t in ts], tokens
    )
    rows = []
    for k, domain, eval_dir in checkpoints:
        parts = completions[k]
        reasons = [parts[b]["reasons"] for b in benchmarks]
        pooled = completion_forensics(
            texts[k],
            ngram,
            tokens,
            None if any(r is None for r in reasons) else [x for r in reasons for x in r],
            labels=[x for b in benchmarks for x in parts[b]["labels"]],
        )
        per_benchmark = {
            b: completion_forensics(
                parts[b]["texts"],
                ngram,
                tokens,
                parts[b]["reasons"],
                labels=parts[b]["labels"],
                top=10,
                max_listed=10,
            )
            for b in benchmarks
        }
        write_json(
            {
                "stage": k,
                "stage_domain": domain,
                "responses": str(eval_dir),
                ALL: pooled,
                "benchmarks": per_benchmark,
            },
            out_dir / "collapse" / f"stage{k}.json",
        )
        rows.append(_collapse_row(pooled, k, domain, ALL, artifact))
        rows += [_collapse_row(r, k, domain, b, artifact) for b, r in per_benchmark.items()]
    return pd.DataFrame(rows), artifact, texts


def log_trend(stages: Sequence[Stage]) -> tuple[pd.DataFrame, dict[int, int | None], list[str]]:
    """(the train logs' collapse/* metrics per step with stage and global_step, the global step
    at the end of each stage (None when its log is missing), missing logs)."""
    from cptlab.drift.collapse import artifact_trend_from_logs

    frames, ends, missing = [], {0: 0}, []
    offset: int | None = 0
    for stage in stages:
        if not stage.train_log.is_file():
            missing.append(str(stage.train_log))
            ends[stage.k] = offset = None
            continue
        records = read_json_lines(stage.train_log)
        steps = [r["step"] for r in records if isinstance(r.get("step"), int | float)]
        df = artifact_trend_from_logs(records, LOG_PREFIX)
        if offset is not None:
            df.insert(1, "global_step", df["step"] + offset)
            offset += int(max(steps, default=0))
        else:
            df.insert(1, "global_step", math.nan)
        df.insert(0, "stage_domain", stage.domain)
        df.insert(0, "stage", stage.k)
        frames.append(df)
        ends[stage.k] = offset
    if frames:
        table = pd.concat(frames, ignore_index=True)
    else:
        table = pd.DataFrame(columns=["stage", "stage_domain", "step", "global_step"])
    return table, ends, missing


# ----- one chain --------------------------------------------------------------------------------


def drift_chain(
    config: Mapping,
    method: str,
    seed: int,
    layout: Layout,
    threads: int = 1,
    embedder: str | Embedder | None = None,
    device: str = "auto",
) -> dict:
    """Every drift analysis of chain (method, seed) (module docstring) into its drift folder;
    returns the manifest (written last).

    embedder: "minilm", "hashing", "none" (no cosine) or an embedder object; None takes the
    config's drift.embedder. device: for the SVDs and the embedder ("auto": GPU if available).
    """
    started = time.perf_counter()
    settings = ChainSettings.from_config(config)
    out_dir = layout.drift_chain_dir(method, seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    embed, embedder_name = resolve_embedder(embedder or settings.drift.embedder, device)
    stages = chain_stages(config, layout, method, int(seed))
    base = base_folder(config, layout)
    benchmarks = [b.name for b in eval_benchmarks(config)]
    base_eval = layout.eval_dir()
    files: dict[str, str] = {}

    def put(name: str, df: pd.DataFrame) -> None:
        files[name] = write_table(df, out_dir / f"{name}.csv").name

    with thread_limits(threads):
        # The cheap analyses first: a broken responses file fails the job before the SVDs.
        texts = base_texts(base_eval, benchmarks)
        shared = None if embed is None else shared_embeddings(layout, embedder_name, texts)
        items, summary = response_tables(stages, base_eval, benchmarks, embed, shared)
        put("responses", items)
        put("responses_summary", summary)
        checkpoints = [(0, "base", base_eval)] + [(s.k, s.domain, s.eval_dir) for s in stages]
        collapse, artifact, texts = collapse_tables(checkpoints, benchmarks, settings, out_dir)
        put("collapse", collapse)
        files["collapse_reports"] = [f"collapse/stage{k}.json" for k, _, _ in checkpoints]
        logs, ends, missing = log_trend(stages)
        put("artifact_trend_log", logs)
        put("artifact_trend_responses", response_trend(texts, ends, artifact, settings))
        params = parameter_tables(stages, base, settings.drift, device)
        for name, df in params.items():
            put(f"params_{name}", df)
    manifest = {
        "method": method,
        "seed": int(seed),
        "stages": [{"stage": s.k, "domain": s.domain, "checkpoint": str(s.folder)} for s in stages],
        "base": str(base),
        "benchmarks": benchmarks,
        "embedder": embedder_name,
        # the base's response embeddings: the drift-base job's, or embedded here
        "base_embeddings": "drift-base" if shared is not None else "embedded",
        "settings": settings.as_dict(),
        "artifact": artifact,
        "artifact_token": settings.format_tokens.get(artifact) if artifact else None,
        "missing_train_logs": missing,
        "files": files,
        "seconds": round(time.perf_counter() - started, 2),
    }
    write_manifest(out_dir, manifest)
    return manifest


def response_trend(
    texts: Mapping[int, list[str]],
    ends: Mapping[int, int | None],
    artifact: str | None,
    settings: ChainSettings,
) -> pd.DataFrame:
    """The artifact's frequency in each checkpoint's evaluation responses (stage 0 = the base),
    with the global step at which the checkpoint was saved (NaN when a train log is missing)."""
    from cptlab.drift.collapse import artifact_trend_from_responses

    tokens = settings.format_tokens
    name = artifact or next(iter(tokens))
    df = artifact_trend_from_responses(texts, tokens[name], settings.ngram)
    df = df.rename(columns={"step": "stage"})
    steps = [ends.get(int(k)) for k in df["stage"]]
    df.insert(1, "global_step", [math.nan if s is None else s for s in steps])
    df.insert(2, "artifact", name)
    return df
