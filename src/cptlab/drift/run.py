"""The drift analyses of a whole experiment, as the workflow runs them (issue #5): one process per
chain (method x seed), one for the distances between data sets, one for the figures.

drift_chain           every stage k of one chain (results/<exp>/runs/<method>/seed<s>/...):
                      parameter drift against the base model and against the previous stage (the
                      base for stage 1: computed once, reported under both references), response
                      drift against the base's evaluation responses, collapse forensics of every
                      checkpoint (the base as stage 0 included) and the most frequent artifact's
                      trend over training steps (train logs and checkpoint responses).
dataset_distance_all  MMD between the prompt sets of every data set of `data.domains`, a t-SNE
                      map, and gain / forgetting against MMD with fitted trends.
drift_figures         the figures (cptlab.drift.plots) from the two above.

Files of drift_chain (out_dir = results/<exp>/drift/<method>/seed<s>/; CSV unless noted):

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
Settings come from the config's optional `drift` section (DRIFT_DEFAULTS) and, for the n-gram
size and format tokens, its `training.collapse` section.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from cptlab.drift.defaults import DEFAULT_ALPHA, DEFAULT_K, DEFAULT_UPDATE_THRESHOLD
from cptlab.drift.io import read_json_lines, read_prompts, read_responses, write_json, write_table
from cptlab.io import write_manifest

log = logging.getLogger(__name__)

DRIFT_DEFAULTS = {
    "k": DEFAULT_K,
    "alpha": DEFAULT_ALPHA,
    "update_threshold": DEFAULT_UPDATE_THRESHOLD,
    "svd_method": "auto",
    "embedder": "minilm",
    "max_samples": 1000,
    "tsne_points": 300,
    "ngram": None,  # None: training.collapse.ngram, else 4
    "completions_per_item": 1,  # None: all
}
DEFAULT_FORMAT_TOKENS = {"boxed": "\\boxed"}
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
ALL = "all"

Embedder = Callable[[Sequence[str]], np.ndarray]


# ----- settings and paths -----------------------------------------------------------------------


def drift_settings(config: Mapping) -> dict:
    """The config's `drift` section over DRIFT_DEFAULTS, plus `format_tokens` from
    training.collapse (default {"boxed": "\\\\boxed"}); `ngram` falls back to
    training.collapse.ngram, then 4."""
    settings = {**DRIFT_DEFAULTS, **(config.get("drift") or {})}
    collapse = (config.get("training") or {}).get("collapse") or {}
    if settings["ngram"] is None:
        settings["ngram"] = int(collapse.get("ngram", 4))
    settings["format_tokens"] = dict(collapse.get("format_tokens") or DEFAULT_FORMAT_TOKENS)
    return settings


_EMBEDDERS: dict[tuple[str, str | None], Embedder] = {}


def get_embedder(name: str, device: str | None = "auto") -> Embedder | None:
    """The embedder called `name` ("minilm", "hashing"; "none" gives None), loaded once per
    process. device "auto": the GPU when there is one (sentence-transformers' choice)."""
    if name == "none":
        return None
    device = None if device == "auto" else device
    key = (name, device)
    if key not in _EMBEDDERS:
        from cptlab.drift.embedders import load_embedder

        _EMBEDDERS[key] = load_embedder(name, device=device)
    return _EMBEDDERS[key]


def _resolve_embedder(embedder, settings: dict, device: str) -> tuple[Embedder | None, str]:
    """(embedder object or None, its name) from a name, an object, or None (the config's)."""
    if embedder is None:
        embedder = settings["embedder"]
    if isinstance(embedder, str):
        return get_embedder(embedder, device), embedder
    return embedder, getattr(embedder, "name", type(embedder).__name__)


def base_checkpoint(config: Mapping, results_dir: str | Path) -> Path:
    """The base model's folder: results/<exp>/base, or `base.path` (a local folder, or a hub name
    resolved in the local HF cache, downloaded only when absent there)."""
    path = (config.get("base") or {}).get("path")
    if path is None:
        return Path(results_dir) / "base"
    if Path(path).exists():
        return Path(path)
    from huggingface_hub import snapshot_download

    patterns = ["*.safetensors", "*.safetensors.index.json", "config.json"]
    try:
        return Path(snapshot_download(path, allow_patterns=patterns, local_files_only=True))
    except Exception:  # not cached (huggingface_hub raises several error types)
        log.warning("base model %s is not in the local HF cache; downloading its weights", path)
        return Path(snapshot_download(path, allow_patterns=patterns))


@dataclass(frozen=True)
class Stage:
    k: int
    domain: str
    folder: Path  # the checkpoint
    eval_dir: Path  # its evaluation files

    @property
    def train_log(self) -> Path:
        return self.folder / "train_log.jsonl"


def chain_stages(config: Mapping, results_dir: str | Path, method: str, seed: int) -> list[Stage]:
    """The stages of one chain, in training order (paths as the workflow writes them)."""
    results_dir = Path(results_dir)
    return [
        Stage(
            k,
            domain,
            results_dir / "runs" / method / f"seed{seed}" / f"stage{k}_{domain}",
            results_dir / "eval" / method / f"seed{seed}" / f"stage{k}",
        )
        for k, domain in enumerate(config["run"]["sequence"], start=1)
    ]


def eval_benchmarks(config: Mapping) -> list[str]:
    """Every id and ood benchmark of data.domains, in config order, without repeats."""
    names: list[str] = []
    for spec in config["data"]["domains"].values():
        for name in spec.get("id", []) + spec.get("ood", []):
            if name not in names:
                names.append(name)
    return names


def domain_datasets(config: Mapping) -> list[tuple[str, str, str]]:
    """(data set, domain, split) for every train, id and ood data set of data.domains."""
    out: list[tuple[str, str, str]] = []
    seen: set[str] = set()
    for domain, spec in config["data"]["domains"].items():
        named = [(spec["train"], "train")] if "train" in spec else []
        named += [(n, "id") for n in spec.get("id", [])] + [(n, "ood") for n in spec.get("ood", [])]
        for name, split in named:
            if name not in seen:
                seen.add(name)
                out.append((name, domain, split))
    return out


def _set_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(max(1, int(threads)))


def _thread_limits(threads: int):
    """Caps the BLAS / OpenMP pools (numpy, scikit-learn) at `threads`."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=max(1, int(threads)))


# ----- parameter drift --------------------------------------------------------------------------


def parameter_tables(
    stages: Sequence[Stage],
    base: Path,
    settings: Mapping,
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
                    k=settings["k"],
                    alpha=settings["alpha"],
                    update_threshold=settings["update_threshold"],
                    device=device,
                    svd_method=settings["svd_method"],
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

    def add(self, texts: Sequence[str]) -> None:
        if self.embedder is None:
            return
        new = list(dict.fromkeys(t for t in texts if t not in self.vectors))
        if new:
            for text, vector in zip(new, np.asarray(self.embedder(new)), strict=True):
                self.vectors[text] = vector

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self.vectors[t] for t in texts]) if texts else np.zeros((0, 1))


def _first_completions(path: Path) -> dict[str, str]:
    return {rid: r["completions"][0] for rid, r in read_responses(path).items()}


def response_tables(
    stages: Sequence[Stage],
    base_eval_dir: Path,
    benchmarks: Sequence[str],
    embedder: Embedder | None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per item, summary): each stage's first completion per item against the base's, for every
    benchmark. cosine is NaN without an embedder."""
    from cptlab.drift.responses import (
        cosine_similarity,
        matched_ids,
        rouge_l,
        summarize_similarity,
    )
    from cptlab.drift.text import tokenize

    base = {b: _first_completions(base_eval_dir / f"{b}.responses.jsonl") for b in benchmarks}
    trained = {
        (s.k, b): _first_completions(s.eval_dir / f"{b}.responses.jsonl")
        for s in stages
        for b in benchmarks
    }
    cache = _EmbeddingCache(embedder)
    cache.add([t for texts in base.values() for t in texts.values()])
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
    settings: Mapping,
    out_dir: Path,
) -> tuple[pd.DataFrame, str | None, dict[int, list[str]]]:
    """Forensics of every checkpoint ((k, domain, eval dir); k = 0 is the base): writes
    collapse/stage<k>.json; returns (the table, the chain's most frequent artifact, the texts of
    each checkpoint)."""
    from cptlab.drift.collapse import completion_forensics, most_frequent_artifact

    ngram, tokens = settings["ngram"], settings["format_tokens"]
    per_item = settings["completions_per_item"]
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
    results_dir: str | Path,
    out_dir: str | Path,
    threads: int = 1,
    embedder: str | Embedder | None = None,
    device: str = "auto",
) -> dict:
    """Every drift analysis of one chain (module docstring) into `out_dir`; returns the manifest
    (written last).

    embedder: "minilm", "hashing", "none" (no cosine) or an embedder object; None takes the
    config's drift.embedder. device: for the SVDs and the embedder ("auto": GPU if available).
    """
    started = time.perf_counter()
    settings = drift_settings(config)
    results_dir, out_dir = Path(results_dir), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    _set_threads(threads)
    embed, embedder_name = _resolve_embedder(embedder, settings, device)
    stages = chain_stages(config, results_dir, method, int(seed))
    base = base_checkpoint(config, results_dir)
    benchmarks = eval_benchmarks(config)
    base_eval = results_dir / "eval" / "base"
    files: dict[str, str] = {}

    def put(name: str, df: pd.DataFrame) -> None:
        files[name] = write_table(df, out_dir / f"{name}.csv").name

    with _thread_limits(threads):
        # The cheap analyses first: a broken responses file fails the job before the SVDs.
        items, summary = response_tables(stages, base_eval, benchmarks, embed)
        put("responses", items)
        put("responses_summary", summary)
        checkpoints = [(0, "base", base_eval)] + [(s.k, s.domain, s.eval_dir) for s in stages]
        collapse, artifact, texts = collapse_tables(checkpoints, benchmarks, settings, out_dir)
        put("collapse", collapse)
        files["collapse_reports"] = [f"collapse/stage{k}.json" for k, _, _ in checkpoints]
        logs, ends, missing = log_trend(stages)
        put("artifact_trend_log", logs)
        put("artifact_trend_responses", response_trend(texts, ends, artifact, settings))
        params = parameter_tables(stages, base, settings, device)
        for name, df in params.items():
            put(f"params_{name}", df)
    manifest = {
        "method": method,
        "seed": int(seed),
        "stages": [{"stage": s.k, "domain": s.domain, "checkpoint": str(s.folder)} for s in stages],
        "base": str(base),
        "benchmarks": benchmarks,
        "embedder": embedder_name,
        "settings": {k: v for k, v in settings.items()},
        "artifact": artifact,
        "artifact_token": settings["format_tokens"].get(artifact) if artifact else None,
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
    settings: Mapping,
) -> pd.DataFrame:
    """The artifact's frequency in each checkpoint's evaluation responses (stage 0 = the base),
    with the global step at which the checkpoint was saved (NaN when a train log is missing)."""
    from cptlab.drift.collapse import artifact_trend_from_responses

    tokens = settings["format_tokens"]
    name = artifact or next(iter(tokens))
    df = artifact_trend_from_responses(texts, tokens[name], settings["ngram"])
    df = df.rename(columns={"step": "stage"})
    steps = [ends.get(int(k)) for k in df["stage"]]
    df.insert(1, "global_step", [math.nan if s is None else s for s in steps])
    df.insert(2, "artifact", name)
    return df


# ----- distances between data sets -------------------------------------------------------------


def relative_changes(config: Mapping, scores: pd.DataFrame) -> pd.DataFrame:
    """Stage-to-stage relative change of every benchmark, per method (mean over seeds).

    relative = 100 * (acc_k - acc_{k-1}) / acc_{k-1} for stage k = 1..K (stage 0: the base), per
    method and seed; NaN where acc_{k-1} is 0 or either accuracy is missing. Averaged over the
    seeds with a finite value (n_seeds). source: the train data set of stage k's domain.
    """
    needed = {"method", "seed", "stage", "benchmark", "accuracy"}
    missing = needed - set(scores.columns)
    if missing:
        raise ValueError(f"scores table lacks columns {sorted(missing)}")
    domains = config["data"]["domains"]
    sequence = config["run"]["sequence"]
    acc = scores[["method", "seed", "stage", "benchmark", "accuracy"]].copy()
    acc["stage"] = acc["stage"].astype(int)
    before = acc.rename(columns={"accuracy": "previous"}).assign(stage=lambda d: d["stage"] + 1)
    joined = acc[acc["stage"] >= 1].merge(
        before, on=["method", "seed", "stage", "benchmark"], how="left"
    )
    cur, prev = joined["accuracy"].to_numpy(float), joined["previous"].to_numpy(float)
    ok = np.isfinite(cur) & np.isfinite(prev) & (prev != 0)
    joined["relative"] = np.where(
        ok, 100.0 * (cur - prev) / np.where(ok, prev, 1.0), np.nan
    )  # fmt: skip
    grouped = joined.groupby(["method", "stage", "benchmark"], sort=False)["relative"]
    out = grouped.agg(relative="mean", n_seeds="count").reset_index()
    out = out[out["stage"] <= len(sequence)]
    out.insert(2, "stage_domain", [sequence[k - 1] for k in out["stage"]])
    out.insert(3, "source", [domains[sequence[k - 1]]["train"] for k in out["stage"]])
    out = out.rename(columns={"benchmark": "target"})
    info = {name: (domain, split) for name, domain, split in domain_datasets(config)}
    out["target_domain"] = [info.get(t, ("", ""))[0] for t in out["target"]]
    out["split"] = [info.get(t, ("", ""))[1] for t in out["target"]]
    return out.reset_index(drop=True)


def dataset_distance_all(
    config: Mapping,
    data_dir: str | Path,
    scores_csv: str | Path | None,
    out_dir: str | Path,
    embedder: str | Embedder | None = None,
    seed: int = 0,
    threads: int = 1,
    device: str = "auto",
) -> dict:
    """MMD and t-SNE map of the prompt sets of every data set of data.domains (train, id, ood;
    <data_dir>/<name>.jsonl), then gain and forgetting against MMD (when `scores_csv` is given).

    Writes mmd.csv (square, index `dataset`), tsne.csv, datasets.csv (name, domain, split,
    prompts), gain_forgetting.csv (per method, stage and benchmark: the relative change from
    stage k-1 to k, averaged over seeds — see relative_changes — with MMD(train set of stage k,
    benchmark), gain, forgetting), trend.json (fit_trend of gain and forgetting against MMD per
    method and over all methods' points), and manifest.json last. embedder "none" falls back to
    "hashing" (an MMD needs vectors).
    """
    from cptlab.drift.datasets import dataset_distances, fit_trend, gain_forgetting_vs_mmd

    started = time.perf_counter()
    settings = drift_settings(config)
    data_dir, out_dir = Path(data_dir), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    _set_threads(threads)
    if embedder is None:
        embedder = settings["embedder"]
    if embedder == "none":
        embedder = "hashing"
    embed, embedder_name = _resolve_embedder(embedder, settings, device)
    datasets = domain_datasets(config)
    prompts = {name: read_prompts(data_dir / f"{name}.jsonl") for name, _, _ in datasets}
    with _thread_limits(threads):
        mmd, tsne = dataset_distances(
            prompts,
            embed,
            seed=seed,
            max_samples=settings["max_samples"],
            tsne_points=settings["tsne_points"],
        )
    split = {name: (domain, s) for name, domain, s in datasets}
    tsne.insert(1, "domain", [split[n][0] for n in tsne["dataset"]])
    tsne.insert(2, "split", [split[n][1] for n in tsne["dataset"]])
    files = {
        "mmd": write_table(mmd, out_dir / "mmd.csv", index=True).name,
        "tsne": write_table(tsne, out_dir / "tsne.csv").name,
        "datasets": write_table(
            pd.DataFrame(
                [(n, d, s, len(prompts[n])) for n, d, s in datasets],
                columns=["dataset", "domain", "split", "prompts"],
            ),
            out_dir / "datasets.csv",
        ).name,
    }
    info: dict = {}
    if scores_csv is not None:
        relative = relative_changes(config, pd.read_csv(scores_csv))
        known = relative["target"].isin(mmd.index) & relative["source"].isin(mmd.index)
        finite = known & np.isfinite(relative["relative"].to_numpy(float))
        info = {
            "points": int(finite.sum()),
            "dropped_undefined": int((known & ~finite).sum()),
            "dropped_unknown_benchmark": sorted(set(relative.loc[~known, "target"])),
        }
        relative = relative[finite].reset_index(drop=True)
        tables, trends = [], {"per_method": {}}
        for method, rows in relative.groupby("method", sort=False):
            rows = rows.reset_index(drop=True)
            table, trend = gain_forgetting_vs_mmd(mmd, rows)
            keep = ["method", "stage", "stage_domain", "target_domain", "split", "n_seeds"]
            tables.append(pd.concat([rows[keep], table], axis=1))
            trends["per_method"][method] = trend
        columns = ["method", "stage", "stage_domain", "target_domain", "split", "n_seeds"]
        columns += ["source", "target", "mmd", "relative", "gain", "forgetting"]
        joined = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=columns)
        trends["all_methods"] = {
            m: fit_trend(joined["mmd"].astype(float), joined[m].astype(float))
            for m in ("gain", "forgetting")
        }
        trends["relative"] = (
            "100 * (acc_k - acc_{k-1}) / acc_{k-1} per benchmark, stage k = 1..K (stage 0 = "
            "base), mean over seeds per method; x = MMD(train set of stage k's domain, benchmark)"
        )
        trends.update(info)
        files["gain_forgetting"] = write_table(joined, out_dir / "gain_forgetting.csv").name
        files["trend"] = write_json(trends, out_dir / "trend.json").name
    manifest = {
        "datasets": [n for n, _, _ in datasets],
        "embedder": embedder_name,
        "seed": seed,
        "settings": {k: settings[k] for k in ("max_samples", "tsne_points")},
        "scores": None if scores_csv is None else str(scores_csv),
        "files": files,
        **({"gain_forgetting": info} if info else {}),
        "seconds": round(time.perf_counter() - started, 2),
    }
    write_manifest(out_dir, manifest)
    return manifest


# ----- figures ----------------------------------------------------------------------------------


def drift_figures(config: Mapping, drift_dir: str | Path, out_dir: str | Path) -> dict:
    """Every drift figure (cptlab.drift.plots; PNG + PDF) from the chains' folders
    <drift_dir>/<method>/seed<s>/ and <drift_dir>/datasets/ into `out_dir`; manifest.json last
    (lists the files and which inputs were missing)."""
    from cptlab.drift.plots import make_drift_figures

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest = make_drift_figures(config, Path(drift_dir), out_dir)
    write_manifest(out_dir, manifest)
    return manifest
