"""The drift figures (each as .png and .pdf) from the tables of cptlab.drift.chain and
cptlab.drift.dataset_distance, as the workflow's `drift-figures` job draws them.

    drift_params           parameter drift after each stage, one line per method (mean over seeds,
                           min-max band with several seeds): NSS, max principal angle (left and
                           right subspaces) and relative Frobenius change, mean over matrices;
                           top row against the base model, bottom row against the previous stage
    drift_params_by_type   NSS against the base per layer type and stage, one panel per method
    response_similarity    split violins of the per-item similarity (%) of each checkpoint's
                           responses to the base's (embedding cosine, ROUGE-L), per stage: the
                           reference method (grpo when run, else the first) on the left half,
                           each other method on the right half, one column per pair
    mmd_heatmap            MMD^2 between the prompt embeddings of every pair of data sets
    tsne_map               t-SNE map of the prompt embeddings, one colour per data set
    gain_forgetting_mmd    gain and forgetting (stage k-1 -> k, %) of every benchmark against
                           MMD(train set of stage k, benchmark), per method, with fitted lines;
                           their tables, gain_forgetting.csv and trend.json, are computed here
                           first (cptlab.drift.dataset_distance.gain_forgetting_trend)
    collapse_trend         the most frequent artifact's count per completion over training steps
                           (train logs, stages concatenated) and in each checkpoint's evaluation
                           responses (stage 0 = base)
    collapse_stages        repetition rate, degenerate share, format-violation rate and mean
                           length of each checkpoint's evaluation responses, per method

A figure whose inputs are missing is drawn with a note, so every declared output exists.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from cptlab.artifacts import MANIFEST, write_manifest
from cptlab.drift.dataset_distance import gain_forgetting_trend
from cptlab.drift.tables import ALL
from cptlab.layout import Layout
from cptlab.plotting import plt, save_figure

log = logging.getLogger(__name__)

FIGURES = (
    "drift_params",
    "drift_params_by_type",
    "response_similarity",
    "mmd_heatmap",
    "tsne_map",
    "gain_forgetting_mmd",
    "collapse_trend",
    "collapse_stages",
)
PARAM_PANELS = {
    "nss": "NSS",
    "max_pa_left": "max principal angle, left (deg)",
    "max_pa_right": "max principal angle, right (deg)",
    "rel_frobenius": "relative Frobenius change",
}
COLLAPSE_PANELS = {
    "repetition_rate": "repetition rate",
    "degenerate_share": "degenerate share",
    "format_violation_rate": "format-violation rate",
    "tokens_mean": "mean length (tokens)",
}
REFERENCE_METHOD = "grpo"


def _note(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=9, transform=ax.transAxes)
    ax.set_axis_off()


def _colors(methods: list[str]) -> dict[str, str]:
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    return {m: cycle[i % len(cycle)] for i, m in enumerate(methods)}


def _read(path: Path) -> pd.DataFrame | None:
    if not path.is_file():
        return None
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return None


class DriftTables:
    """The chains' tables, concatenated with method and seed columns (None when no chain has
    the table), and the data-set tables."""

    def __init__(self, config: Mapping, layout: Layout) -> None:
        run = config["run"]
        self.methods = list(run["methods"])
        self.seeds = [int(s) for s in run["seeds"]]
        self.sequence = list(run["sequence"])
        self.missing: list[str] = []
        self.artifacts: dict[tuple[str, int], str | None] = {}
        self.chains: list[tuple[str, int, Path]] = []
        for method in self.methods:
            for seed in self.seeds:
                folder = layout.drift_chain_dir(method, seed)
                manifest = layout.drift_chain_manifest(method, seed)
                if manifest.is_file():
                    self.chains.append((method, seed, folder))
                    self.artifacts[(method, seed)] = json.loads(manifest.read_text()).get(
                        "artifact"
                    )
                else:
                    self.missing.append(str(manifest))
        self.datasets = layout.dataset_distance_dir
        if not (self.datasets / MANIFEST).is_file():
            self.missing.append(str(self.datasets / MANIFEST))
        # gain and forgetting against MMD, once `drift_figures` has computed them
        self.trend: dict | None = None

    def chain_table(self, name: str) -> pd.DataFrame | None:
        frames = []
        for method, seed, folder in self.chains:
            df = _read(folder / f"{name}.csv")
            if df is not None and len(df):
                df.insert(0, "seed", seed)
                df.insert(0, "method", method)
                frames.append(df)
        return pd.concat(frames, ignore_index=True) if frames else None

    def dataset_table(self, name: str, **kwargs) -> pd.DataFrame | None:
        path = self.datasets / f"{name}.csv"
        if not path.is_file():
            return None
        return pd.read_csv(path, **kwargs)

    def stage_labels(self, with_base: bool = False) -> list[str]:
        labels = [f"{k}: {d}" for k, d in enumerate(self.sequence, start=1)]
        return (["base"] if with_base else []) + labels


def _mean_band(df: pd.DataFrame, x: str, y: str, index) -> tuple[np.ndarray, ...]:
    table = df.pivot_table(index=x, columns="seed", values=y, aggfunc="mean").reindex(index)
    return (
        table.mean(axis=1).to_numpy(float),
        table.min(axis=1).to_numpy(float),
        table.max(axis=1).to_numpy(float),
        table.shape[1],
    )


# ----- parameter drift --------------------------------------------------------------------------


def plot_params(t: DriftTables, out_dir: Path) -> list[str]:
    summary = t.chain_table("params_summary")
    stages = list(range(1, len(t.sequence) + 1))
    fig, axes = plt.subplots(
        2, len(PARAM_PANELS), figsize=(3.4 * len(PARAM_PANELS), 6.2), squeeze=False
    )
    if summary is None:
        for ax in axes.flat:
            _note(ax, "no parameter drift tables")
        return save_figure(fig, out_dir, "drift_params")
    colors = _colors(t.methods)
    for row, reference in enumerate(("base", "previous")):
        for col, (metric, label) in enumerate(PARAM_PANELS.items()):
            ax = axes[row, col]
            for method in t.methods:
                rows = summary[(summary["method"] == method) & (summary["reference"] == reference)]
                if rows.empty or metric not in rows:
                    continue
                mean, low, high, n = _mean_band(rows, "stage", metric, stages)
                ax.plot(stages, mean, marker="o", color=colors[method], label=method)
                if n > 1:
                    ax.fill_between(
                        stages, low, high, color=colors[method], alpha=0.15, linewidth=0
                    )
            ax.set_xticks(stages, t.stage_labels(), rotation=30, ha="right", fontsize=7)
            ax.set_title(f"{label}\nvs {reference}", fontsize=8)
            ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=7)
    fig.suptitle("parameter drift (mean over weight matrices)", y=1.01)
    fig.tight_layout()
    return save_figure(fig, out_dir, "drift_params")


def plot_params_by_type(t: DriftTables, out_dir: Path) -> list[str]:
    by_type = t.chain_table("params_by_type")
    n = max(1, len(t.methods))
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n, 3.8), squeeze=False, sharey=True)
    axes = axes[0]
    if by_type is None:
        for ax in axes:
            _note(ax, "no parameter drift tables")
        return save_figure(fig, out_dir, "drift_params_by_type")
    by_type = by_type[by_type["reference"] == "base"]
    types = list(dict.fromkeys(by_type["layer_type"]))
    stages = list(range(1, len(t.sequence) + 1))
    cmap = plt.get_cmap("viridis")
    width = 0.8 / max(1, len(stages))
    for ax, method in zip(axes, t.methods, strict=False):
        rows = by_type[by_type["method"] == method]
        if rows.empty:
            _note(ax, f"{method}: no data")
            continue
        table = rows.pivot_table(
            index="layer_type", columns="stage", values="nss", aggfunc="mean"
        ).reindex(index=types, columns=stages)
        x = np.arange(len(types))
        for i, k in enumerate(stages):
            ax.bar(
                x + (i - (len(stages) - 1) / 2) * width,
                table[k].to_numpy(float),
                width,
                color=cmap(i / max(1, len(stages) - 1)),
                label=t.stage_labels()[i],
            )
        ax.set_xticks(x, types, rotation=45, ha="right", fontsize=7)
        ax.set_title(method, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("NSS vs base (mean over matrices)")
    drawn = [ax for ax in axes if ax.get_legend_handles_labels()[0]]
    if drawn:
        drawn[0].legend(fontsize=7, title="after stage", title_fontsize=7)
    fig.tight_layout()
    return save_figure(fig, out_dir, "drift_params_by_type")


# ----- response drift ---------------------------------------------------------------------------


def _half_violin(ax, values: np.ndarray, pos: float, side: str, color: str, width=0.8) -> None:
    """One half (left or right of `pos`) of a violin; a flat line for constant values."""
    values = values[np.isfinite(values)]
    if values.size == 0:
        return
    half = width / 2
    lo, hi = (pos - half, pos) if side == "left" else (pos, pos + half)
    drawn = False
    if values.size > 1 and np.ptp(values) > 0:
        try:
            parts = ax.violinplot([values], positions=[pos], widths=width, showextrema=False)
            body = parts["bodies"][0]
            vertices = body.get_paths()[0].vertices
            clip = np.minimum if side == "left" else np.maximum
            vertices[:, 0] = clip(vertices[:, 0], pos)
            body.set_facecolor(color)
            body.set_edgecolor("black")
            body.set_linewidth(0.5)
            body.set_alpha(0.75)
            drawn = True
        except (np.linalg.LinAlgError, ValueError):  # a degenerate kernel density
            drawn = False
    if not drawn:
        ax.fill_between(
            [lo, hi],
            values.min(),
            values.max(),
            color=color,
            alpha=0.75,
            edgecolor="black",
            linewidth=0.5,
        )
    ax.hlines(np.median(values), lo, hi, color="black", linewidth=1.2)


def plot_response_similarity(t: DriftTables, out_dir: Path) -> list[str]:
    items = t.chain_table("responses")
    metrics = []
    if items is not None:
        metrics = [m for m in ("cosine", "rouge_l") if items[m].notna().any()]
    methods = [m for m in t.methods if items is not None and (items["method"] == m).any()]
    reference = REFERENCE_METHOD if REFERENCE_METHOD in methods else (methods or [None])[0]
    others = [m for m in methods if m != reference]
    pairs = [(reference, m) for m in others] or [(reference, None)]
    fig, axes = plt.subplots(
        max(1, len(metrics)),
        len(pairs),
        figsize=(1.6 + 1.3 * len(t.sequence) * len(pairs), 3.2 * max(1, len(metrics))),
        squeeze=False,
        sharey=True,
    )
    if not metrics or reference is None:
        for ax in axes.flat:
            _note(ax, "no response-drift tables")
        return save_figure(fig, out_dir, "response_similarity")
    colors = _colors(t.methods)
    stages = list(range(1, len(t.sequence) + 1))
    labels = {"cosine": "embedding cosine (%)", "rouge_l": "ROUGE-L F1 (%)"}
    for row, metric in enumerate(metrics):
        for col, (left, right) in enumerate(pairs):
            ax = axes[row, col]
            for pos, k in enumerate(stages):
                for method, side in ((left, "left"), (right, "right")):
                    if method is None:
                        continue
                    values = items.loc[(items["method"] == method) & (items["stage"] == k), metric]
                    _half_violin(ax, 100.0 * values.to_numpy(float), pos, side, colors[method])
            ax.set_xticks(range(len(stages)), t.stage_labels(), rotation=30, ha="right", fontsize=7)
            ax.set_ylim(-2, 102)
            ax.grid(axis="y", alpha=0.3)
            if col == 0:
                ax.set_ylabel(labels[metric])
            if row == 0:
                ax.set_title(f"{left} (left) vs {right} (right)" if right else left, fontsize=9)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors[m]) for m in methods]
    fig.suptitle("similarity of each checkpoint's responses to the base model's")
    fig.tight_layout()
    fig.legend(
        handles,
        methods,
        fontsize=7,
        loc="lower center",
        ncol=len(methods),
        bbox_to_anchor=(0.5, -0.04),
    )
    return save_figure(fig, out_dir, "response_similarity")


# ----- distances between data sets -------------------------------------------------------------


def plot_mmd(t: DriftTables, out_dir: Path) -> list[str]:
    mmd = t.dataset_table("mmd", index_col=0)
    n = 0 if mmd is None else len(mmd)
    fig, ax = plt.subplots(figsize=(2 + 0.55 * n, 1.5 + 0.5 * n) if n else (5, 4))
    if mmd is None:
        _note(ax, "no MMD table")
        return save_figure(fig, out_dir, "mmd_heatmap")
    values = mmd.to_numpy(float)
    image = ax.imshow(values, cmap="magma_r", aspect="auto")
    if n <= 24:
        top = np.nanmax(values) if np.isfinite(values).any() else 1.0
        for (i, j), v in np.ndenumerate(values):
            ax.text(
                j,
                i,
                f"{v:.2f}",
                ha="center",
                va="center",
                fontsize=6,
                color="white" if v > 0.4 * top else "black",
            )
    ax.set_xticks(range(n), mmd.columns, rotation=60, ha="right", fontsize=7)
    ax.set_yticks(range(n), mmd.index, fontsize=7)
    fig.colorbar(image, ax=ax, label="MMD$^2$ (RBF, unbiased)")
    ax.set_title("distance between data sets (prompt embeddings)")
    return save_figure(fig, out_dir, "mmd_heatmap")


def plot_tsne(t: DriftTables, out_dir: Path) -> list[str]:
    tsne = t.dataset_table("tsne")
    fig, ax = plt.subplots(figsize=(7.5, 6))
    if tsne is None:
        _note(ax, "no t-SNE table")
        return save_figure(fig, out_dir, "tsne_map")
    names = list(dict.fromkeys(tsne["dataset"]))
    cmap = plt.get_cmap("tab20" if len(names) > 10 else "tab10")
    markers = {"train": "o", "id": "s", "ood": "^"}
    for i, name in enumerate(names):
        rows = tsne[tsne["dataset"] == name]
        split = rows["split"].iloc[0] if "split" in rows else ""
        ax.scatter(
            rows["x"],
            rows["y"],
            s=6,
            alpha=0.6,
            color=cmap(i % cmap.N),
            marker=markers.get(split, "o"),
            label=name,
        )
    ax.set_xticks([])
    ax.set_yticks([])
    ax.legend(fontsize=6, markerscale=2, loc="center left", bbox_to_anchor=(1.0, 0.5))
    ax.set_title("t-SNE of prompt embeddings (o train, \u25a1 id, \u25b3 ood)")
    return save_figure(fig, out_dir, "tsne_map")


def plot_gain_forgetting(t: DriftTables, out_dir: Path) -> list[str]:
    """Gain and forgetting against MMD, from the tables `drift_figures` wrote into `out_dir`."""
    table = pd.read_csv(out_dir / "gain_forgetting.csv") if t.trend else None
    trend_path = out_dir / "trend.json"
    trends = json.loads(trend_path.read_text()) if trend_path.is_file() else {}
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), squeeze=False)
    axes = axes[0]
    if table is None or table.empty:
        for ax in axes:
            _note(ax, "no gain / forgetting table")
        return save_figure(fig, out_dir, "gain_forgetting_mmd")
    colors = _colors(t.methods)
    markers = {"id": "o", "ood": "^"}
    x_all = table["mmd"].to_numpy(float)
    span = np.linspace(np.nanmin(x_all), np.nanmax(x_all), 50) if len(x_all) else np.array([])
    for ax, measure in zip(axes, ("gain", "forgetting"), strict=True):
        for method in t.methods:
            rows = table[table["method"] == method]
            if rows.empty:
                continue
            for split, part in rows.groupby("split"):
                ax.scatter(
                    part["mmd"],
                    part[measure],
                    s=18,
                    alpha=0.7,
                    color=colors[method],
                    marker=markers.get(split, "o"),
                )
            fit = trends.get("per_method", {}).get(method, {}).get(measure, {})
            label = method
            if np.isfinite(fit.get("slope", np.nan)):
                ax.plot(span, fit["slope"] * span + fit["intercept"], color=colors[method])
                label = f"{method} (r = {fit.get('r', np.nan):.2f})"
            ax.plot([], [], color=colors[method], marker="o", label=label)
        fit = trends.get("all_methods", {}).get(measure, {})
        if np.isfinite(fit.get("slope", np.nan)):
            ax.plot(
                span,
                fit["slope"] * span + fit["intercept"],
                color="black",
                linestyle="--",
                label=f"all (r = {fit.get('r', np.nan):.2f})",
            )
        ax.set_xlabel("MMD$^2$(train set of stage k, benchmark)")
        ax.set_ylabel(f"{measure} from stage k-1 to k (%)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("gain and forgetting against data-set distance (o id, \u25b3 ood)", y=1.02)
    fig.tight_layout()
    return save_figure(fig, out_dir, "gain_forgetting_mmd")


# ----- collapse ---------------------------------------------------------------------------------


def _artifact(t: DriftTables) -> str | None:
    names = [a for a in t.artifacts.values() if a]
    return max(set(names), key=names.count) if names else None


def plot_collapse_trend(t: DriftTables, out_dir: Path) -> list[str]:
    logs = t.chain_table("artifact_trend_log")
    responses = t.chain_table("artifact_trend_responses")
    artifact = _artifact(t)
    fig, axes = plt.subplots(2, 1, figsize=(8.5, 6.2), squeeze=False)
    axes = axes[:, 0]
    colors = _colors(t.methods)
    styles = ("-", "--", ":", "-.")
    ax = axes[0]
    column = None
    if logs is not None:
        candidates = (
            ([f"collapse/format/{artifact}/per_completion"] if artifact else [])
            + [
                c
                for c in logs.columns
                if c.startswith("collapse/format/") and c.endswith("/per_completion")
            ]
            + ["collapse/top_ngram_share"]
        )
        column = next((c for c in candidates if c in logs and logs[c].notna().any()), None)
    if column is None:
        _note(ax, "no collapse metrics in the train logs")
    else:
        for method, seed, _ in t.chains:
            rows = logs[(logs["method"] == method) & (logs["seed"] == seed)].dropna(subset=[column])
            x = rows["global_step"] if rows["global_step"].notna().all() else rows["step"]
            ax.plot(
                x,
                rows[column],
                color=colors[method],
                linewidth=1,
                linestyle=styles[t.seeds.index(seed) % 4],
                label=method if seed == t.seeds[0] else None,
            )
            if seed == t.seeds[0] and method == t.chains[0][0]:
                for k, part in rows.groupby("stage"):
                    if part["global_step"].notna().all() and k > 1:
                        ax.axvline(
                            part["global_step"].min(), color="grey", linewidth=0.6, linestyle=":"
                        )
        ax.set_xlabel("training step (stages concatenated)")
        ax.set_ylabel(column.removeprefix("collapse/"), fontsize=8)
        ax.set_title("during training (train logs: the step's rollouts)", fontsize=9)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    ax = axes[1]
    if responses is None:
        _note(ax, "no checkpoint responses")
    else:
        for method, seed, _ in t.chains:
            rows = responses[(responses["method"] == method) & (responses["seed"] == seed)]
            use_steps = rows["global_step"].notna().all()
            x = rows["global_step"] if use_steps else rows["stage"]
            ax.plot(
                x,
                rows["per_completion"],
                marker="o",
                color=colors[method],
                linestyle=styles[t.seeds.index(seed) % 4],
                label=method if seed == t.seeds[0] else None,
            )
        x_label = "training step at the checkpoint (0 = base)"
        if not responses["global_step"].notna().all():
            x_label = "stage (0 = base)"
        ax.set_xlabel(x_label)
        name = artifact or (responses["artifact"].iloc[0] if len(responses) else "artifact")
        ax.set_ylabel(f"{name} per completion")
        ax.set_title("evaluation responses of each checkpoint", fontsize=9)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    fig.suptitle(f"most frequent artifact: {artifact or 'none found'}", y=1.01)
    fig.tight_layout()
    return save_figure(fig, out_dir, "collapse_trend")


def plot_collapse_stages(t: DriftTables, out_dir: Path) -> list[str]:
    table = t.chain_table("collapse")
    fig, axes = plt.subplots(2, 2, figsize=(9, 6), squeeze=False)
    if table is None:
        for ax in axes.flat:
            _note(ax, "no collapse tables")
        return save_figure(fig, out_dir, "collapse_stages")
    table = table[table["benchmark"] == ALL]
    stages = list(range(0, len(t.sequence) + 1))
    colors = _colors(t.methods)
    for ax, (metric, label) in zip(axes.flat, COLLAPSE_PANELS.items(), strict=True):
        for method in t.methods:
            rows = table[table["method"] == method]
            if rows.empty or not rows[metric].notna().any():
                continue
            mean, low, high, n = _mean_band(rows, "stage", metric, stages)
            ax.plot(stages, mean, marker="o", color=colors[method], label=method)
            if n > 1:
                ax.fill_between(stages, low, high, color=colors[method], alpha=0.15, linewidth=0)
        ax.set_xticks(stages, t.stage_labels(with_base=True), rotation=30, ha="right", fontsize=7)
        ax.set_title(label, fontsize=9)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=7)
    fig.suptitle("collapse forensics of each checkpoint's evaluation responses", y=1.01)
    fig.tight_layout()
    return save_figure(fig, out_dir, "collapse_stages")


def drift_figures(config: Mapping, layout: Layout) -> dict:
    """Draw every figure of FIGURES from the drift tables of `layout` into its drift figures
    folder, then write manifest.json (returned; it lists the files and the missing inputs)."""
    out_dir = layout.drift_figures_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    tables = DriftTables(config, layout)
    files: list[str] = []
    if (tables.datasets / MANIFEST).is_file() and layout.scores_csv.is_file():
        tables.trend = gain_forgetting_trend(config, layout, out_dir)
        files += list(tables.trend["files"].values())
    elif not layout.scores_csv.is_file():
        tables.missing.append(str(layout.scores_csv))
    for plot in (
        plot_params,
        plot_params_by_type,
        plot_response_similarity,
        plot_mmd,
        plot_tsne,
        plot_gain_forgetting,
        plot_collapse_trend,
        plot_collapse_stages,
    ):
        files += plot(tables, out_dir)
    manifest = {
        "files": files,
        "figures": list(FIGURES),
        "chains": [f"{m}/seed{s}" for m, s, _ in tables.chains],
        "missing_inputs": tables.missing,
        "artifact": _artifact(tables),
        "gain_forgetting": {k: v for k, v in (tables.trend or {}).items() if k != "files"},
    }
    write_manifest(out_dir, manifest)
    return manifest
