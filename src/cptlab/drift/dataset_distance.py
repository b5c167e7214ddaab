"""Distances between the experiment's data sets, as the workflow's `dataset-distance` job runs
it: MMD between the prompt sets of every data set of `data.domains` and a t-SNE map, from the
data alone (so the job runs beside training, not after the last evaluation); and gain /
forgetting against MMD with fitted trends, from the scores, which the `drift-figures` job
computes before it draws them (`gain_forgetting_trend`)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from cptlab.artifacts import write_manifest
from cptlab.drift.embedders import Embedder, resolve_embedder
from cptlab.drift.settings import DriftSettings, thread_limits
from cptlab.drift.tables import read_prompts, write_json, write_table
from cptlab.layout import Layout
from cptlab.plan import datasets as config_datasets


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
    info = {d.name: (d.domain, d.split) for d in config_datasets(config)}
    out["target_domain"] = [info.get(t, ("", ""))[0] for t in out["target"]]
    out["split"] = [info.get(t, ("", ""))[1] for t in out["target"]]
    return out.reset_index(drop=True)


def dataset_distance(
    config: Mapping,
    layout: Layout,
    embedder: str | Embedder | None = None,
    threads: int = 1,
    device: str = "auto",
) -> dict:
    """MMD and t-SNE map of the prompt sets of every data set of data.domains (train, id, ood),
    into the layout's data-set distance folder.

    Writes mmd.csv (square, index `dataset`), tsne.csv, datasets.csv (name, domain, split,
    prompts) and manifest.json last. Subsampling and t-SNE use data.seed. embedder None takes
    the config's drift.embedder; "none" falls back to "hashing" (an MMD needs vectors).
    """
    from cptlab.drift.distances import dataset_distances

    started = time.perf_counter()
    settings = DriftSettings.from_config(config)
    seed = config["data"]["seed"]
    out_dir = layout.dataset_distance_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    embedder = embedder or settings.embedder
    embed, embedder_name = resolve_embedder("hashing" if embedder == "none" else embedder, device)
    datasets = [(d.name, d.domain, d.split) for d in config_datasets(config)]
    prompts = {name: read_prompts(layout.data_file(name)) for name, _, _ in datasets}
    with thread_limits(threads):
        mmd, tsne = dataset_distances(
            prompts,
            embed,
            seed=seed,
            max_samples=settings.max_samples,
            tsne_points=settings.tsne_points,
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
    manifest = {
        "datasets": [n for n, _, _ in datasets],
        "embedder": embedder_name,
        "seed": seed,
        "settings": {"max_samples": settings.max_samples, "tsne_points": settings.tsne_points},
        "files": files,
        "seconds": round(time.perf_counter() - started, 2),
    }
    write_manifest(out_dir, manifest)
    return manifest


def gain_forgetting_trend(config: Mapping, layout: Layout, out_dir: Path) -> dict:
    """Gain and forgetting against MMD: per method, stage and benchmark the relative change from
    stage k-1 to k, averaged over seeds (relative_changes, from scores.csv), with MMD(train set of
    stage k, benchmark) from the data-set distance folder's mmd.csv. Writes
    gain_forgetting.csv and trend.json (fit_trend of gain and forgetting against MMD per method
    and over all methods' points) into `out_dir`; returns {"files": ..., "points": ...,
    "dropped_undefined": ..., "dropped_unknown_benchmark": ...}."""
    from cptlab.drift.distances import fit_trend, gain_forgetting_vs_mmd

    mmd = pd.read_csv(layout.dataset_distance_dir / "mmd.csv", index_col=0)
    relative = relative_changes(config, pd.read_csv(layout.scores_csv))
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
    files = {
        "gain_forgetting": write_table(joined, out_dir / "gain_forgetting.csv").name,
        "trend": write_json(trends, out_dir / "trend.json").name,
    }
    return {"files": files, **info}
