"""`cptlab figures`: the study's plots from scores.csv, cl_metrics.csv and the training logs.

Files (each as .png and .pdf, in the figures folder; `manifest.json` is written last and lists
them):

    cl_trajectory_<method>   the CL curves at every evaluated checkpoint (within-stage ones
                             included, x: rollout batches from the base): top, accuracy of each
                             trained domain's id benchmark and the OOD mean; bottom, forgetting
                             per earlier domain (its id accuracy at the end of its own stage
                             minus now, points); mean over seeds, min-max band
    item_transitions         per stage (the end of the previous to the end of this one), the
                             chance-adjusted shares of items that go right -> wrong and
                             wrong -> right over every benchmark (transitions.csv), per method:
                             mean over seeds, bars the mean of the seeds' bootstrap intervals
    cl_curves_<method>       relative performance (%) vs the base after each stage: the id
                             benchmark(s) of every trained domain (solid from the stage that
                             trains it, dotted before) and the mean over the OOD benchmarks;
                             mean over seeds, min-max band when there are several seeds
    ood_final                final-stage relative performance per OOD benchmark and method;
                             error bars: the bootstrap interval of the accuracy (scores.csv)
                             mapped through the relative measure with the base fixed, averaged
                             over seeds; plus the OOD mean (no bar: see cl_summary.csv)
    accuracy_matrix_<method> accuracy heatmap, rows stages 0..K, columns benchmarks
    training_curves          per-step training signals (reward, distillation loss, KL, collapse
                             statistics: TRAIN_METRICS, those present), stages concatenated,
                             one line per method and seed

Training logs: each stage's train_log.jsonl (cptlab.layout); missing logs or
keys are skipped (and listed in the manifest).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pandas as pd

from cptlab.artifacts import write_manifest
from cptlab.layout import Layout
from cptlab.plan import Plan
from cptlab.plotting import plt, save_figure
from cptlab.results.aggregate import read_csv
from cptlab.results.cl_metrics import nan_mean, relative_performance

log = logging.getLogger(__name__)

# name plotted -> log keys tried in order (the first present in a line is used)
TRAIN_METRICS: dict[str, tuple[str, ...]] = {
    "reward": ("reward", "verifier/reward_mean"),
    "reward_std": ("reward_std", "verifier/reward_std"),
    "distillation_loss": (
        "distillation_loss",
        "self_distillation/distillation_loss",
        "sdpo/distillation_loss",
    ),
    "kl_to_start": ("kl_to_start",),
    "entropy": ("entropy",),
    "collapse/repeated_ngram_share": ("collapse/repeated_ngram_share",),
    "collapse/top_ngram_share": ("collapse/top_ngram_share",),
    "collapse/duplicate_completion_share": ("collapse/duplicate_completion_share",),
    "collapse/format_violation_rate": ("collapse/format_violation_rate",),
    "collapse/format/boxed/repeated_share": ("collapse/format/boxed/repeated_share",),
}


def _stage_labels(plan: Plan) -> list[str]:
    return ["base"] + [f"{k}: {d}" for k, d in enumerate(plan.sequence, start=1)]


def plot_cl_curves(metrics: pd.DataFrame, plan: Plan, method: str, out_dir: Path) -> list[str]:
    rel = metrics[(metrics["method"] == method) & (metrics["metric"] == "relative")]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    stages = plan.stages
    first = {}
    for k, d in enumerate(plan.sequence, start=1):
        first.setdefault(d, k)
    lines = [
        (b.name, first[b.domain])
        for d in first
        for b in plan.benchmarks
        if b.domain == d and b.split == "id"
    ] + [("ood_mean", 0)]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (name, start) in enumerate(lines):
        table = rel[rel["benchmark"] == name].pivot_table(
            index="stage", columns="seed", values="value", dropna=False
        )
        table = table.reindex(stages)
        mean = table.mean(axis=1).to_numpy()
        color = "black" if name == "ood_mean" else colors[i % len(colors)]
        label = "OOD mean" if name == "ood_mean" else name
        x = np.array(stages)
        if start > 0:
            ax.plot(x[: start + 1], mean[: start + 1], ":", color=color, alpha=0.6)
        style = "--" if name == "ood_mean" else "-"
        ax.plot(x[start:], mean[start:], style, marker="o", color=color, label=label)
        if table.shape[1] > 1:
            ax.fill_between(
                x, table.min(axis=1).to_numpy(), table.max(axis=1).to_numpy(), color=color,
                alpha=0.12, linewidth=0,
            )  # fmt: skip
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.set_xticks(stages, _stage_labels(plan))
    ax.set_xlabel("after stage")
    ax.set_ylabel("relative performance vs base (%)")
    ax.set_title(f"{method}: continual learning")
    ax.legend(fontsize=8)
    return save_figure(fig, out_dir, f"cl_curves_{method}")


def plot_cl_trajectory(trajectory: pd.DataFrame, plan: Plan, method: str, out_dir: Path):
    rows = trajectory[trajectory["method"] == method]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    first: dict[str, int] = {}
    for k, d in enumerate(plan.sequence, start=1):
        first.setdefault(d, k)
    ids = [b for d in first for b in plan.of_split("id") if b.domain == d]
    ood = [b.name for b in plan.of_split("ood")]

    def curve(values: pd.DataFrame) -> pd.DataFrame:
        """Mean, min and max over seeds per checkpoint, in chain order."""
        table = values.pivot_table(index="chain_step", columns="seed", values="value")
        kinds = values.groupby("chain_step")["checkpoint"].first()
        return pd.DataFrame(
            {"mean": table.mean(axis=1), "low": table.min(axis=1), "high": table.max(axis=1)}
        ).join(kinds)

    def draw(ax, values: pd.DataFrame, color, label, style="-") -> None:
        line = curve(values)
        x = line.index.to_numpy()
        ax.plot(x, line["mean"], style, color=color, label=label, linewidth=1.2)
        ends = line["checkpoint"] != "within"
        ax.plot(x[ends], line["mean"][ends], "o", color=color, markersize=4)
        ax.plot(x[~ends], line["mean"][~ends], "o", color=color, markersize=4, fillstyle="none")
        if rows["seed"].nunique() > 1:
            ax.fill_between(x, line["low"], line["high"], color=color, alpha=0.12, linewidth=0)

    for i, b in enumerate(ids):
        values = rows[rows["benchmark"] == b.name].assign(value=lambda t: 100 * t["accuracy"])
        draw(top, values, colors[i % len(colors)], b.name)
    if ood:
        mean = (
            rows[rows["benchmark"].isin(ood)]
            .groupby(["seed", "chain_step", "checkpoint"], as_index=False)["accuracy"]
            .mean()
            .assign(value=lambda t: 100 * t["accuracy"])
        )
        draw(top, mean, "black", "OOD mean", "--")
    for i, b in enumerate(ids):  # each earlier domain, from the end of its own stage on
        own = rows[(rows["benchmark"] == b.name) & (rows["stage"] >= first[b.domain])]
        at_end = own[(own["stage"] == first[b.domain]) & (own["checkpoint"] == "end")]
        later = own[own["stage"] > first[b.domain]]
        if later.empty:
            continue
        drop = pd.concat([at_end, later])
        then = drop["seed"].map(at_end.set_index("seed")["accuracy"])
        drop = drop.assign(value=100 * (then - drop["accuracy"]))
        draw(bottom, drop, colors[i % len(colors)], f"{b.domain} ({b.name})")
    for ax in (top, bottom):
        for k in range(1, len(plan.sequence)):
            end = rows[(rows["stage"] == k) & (rows["checkpoint"] == "end")]["chain_step"]
            if len(end):
                ax.axvline(end.iloc[0], color="grey", linewidth=0.6, linestyle=":")
    for k, d in enumerate(plan.sequence, start=1):
        end = rows[(rows["stage"] == k) & (rows["checkpoint"] == "end")]["chain_step"]
        if len(end):
            top.annotate(f"{k}: {d} ", (end.iloc[0], 0.98), xycoords=("data", "axes fraction"),
                         fontsize=7, ha="right", va="top", color="grey")  # fmt: skip
    top.set_ylabel("accuracy (%)")
    top.set_title(f"{method}: scores at every checkpoint (hollow: within-stage, on a sample)")
    top.legend(fontsize=7)
    bottom.axhline(0, color="grey", linewidth=0.8)
    bottom.set_ylabel("forgetting since own stage (points)")
    bottom.set_xlabel("rollout batches from the base")
    if bottom.get_legend_handles_labels()[0]:
        bottom.legend(fontsize=7, title="earlier domain", title_fontsize=7)
    return save_figure(fig, out_dir, f"cl_trajectory_{method}")


def plot_item_transitions(transitions: pd.DataFrame, plan: Plan, out_dir: Path) -> list[str]:
    rows = transitions[(transitions["kind"] == "stage") & (transitions["benchmark"] == "all")]
    stages = list(range(1, len(plan.sequence) + 1))
    fig, axes = plt.subplots(2, 1, figsize=(max(6, 1.6 * len(stages) * len(plan.methods) / 2), 6),
                             sharex=True)  # fmt: skip
    width = 0.8 / max(1, len(plan.methods))
    for ax, name, title in (
        (axes[0], "right_to_wrong", "right -> wrong (forgotten)"),
        (axes[1], "wrong_to_right", "wrong -> right (gained)"),
    ):
        for i, method in enumerate(plan.methods):
            table = rows[rows["method"] == method].groupby("to_stage")
            column = f"{name}_adjusted"
            value = 100 * table[column].mean().reindex(stages)
            low = 100 * table[f"{column}_ci_low"].mean().reindex(stages)
            high = 100 * table[f"{column}_ci_high"].mean().reindex(stages)
            err = np.nan_to_num(np.vstack([value - low, high - value]).clip(min=0))
            x = np.arange(len(stages)) + (i - (len(plan.methods) - 1) / 2) * width
            ax.bar(x, value, width, yerr=err, capsize=2, label=method)
        ax.set_ylabel(f"{title}\n% of items, chance-adjusted", fontsize=8)
    axes[1].set_xticks(range(len(stages)), [f"{k}: {d}" for k, d in enumerate(plan.sequence, 1)])
    axes[1].set_xlabel("stage (its start to its end, every benchmark's items)")
    axes[0].legend(fontsize=8)
    axes[0].set_title("items that flip in each stage")
    return save_figure(fig, out_dir, "item_transitions")


def plot_ood_final(
    scores: pd.DataFrame, metrics: pd.DataFrame, plan: Plan, out_dir: Path
) -> list[str]:
    final = len(plan.sequence)
    ood = [b.name for b in plan.of_split("ood")]
    base = scores[scores["stage"] == 0].groupby("benchmark")["accuracy"].first().reindex(ood)
    fig, ax = plt.subplots(
        figsize=(max(6, 1.3 * (len(ood) + 1) * max(1, len(plan.methods)) / 2), 4.5)
    )
    width = 0.8 / max(1, len(plan.methods))
    groups = np.arange(len(ood) + 1)
    for i, method in enumerate(plan.methods):
        rows = scores[(scores["method"] == method) & (scores["stage"] == final)]
        values, low, high = [], [], []
        for name in ood:
            r = rows[rows["benchmark"] == name]
            b = base[name]
            values.append(
                nan_mean(np.atleast_1d(relative_performance(r["accuracy"].to_numpy(), b)))
            )
            low.append(nan_mean(np.atleast_1d(relative_performance(r["ci_low"].to_numpy(), b))))
            high.append(nan_mean(np.atleast_1d(relative_performance(r["ci_high"].to_numpy(), b))))
        mean_rows = metrics[
            (metrics["method"] == method)
            & (metrics["stage"] == final)
            & (metrics["metric"] == "relative")
            & (metrics["benchmark"] == "ood_mean")
        ]
        values.append(mean_rows["value"].mean() if len(mean_rows) else np.nan)
        low.append(np.nan)
        high.append(np.nan)
        values, low, high = map(np.asarray, (values, low, high))
        err = np.vstack([np.clip(values - low, 0, None), np.clip(high - values, 0, None)])
        err = np.nan_to_num(err)
        ax.bar(groups + (i - (len(plan.methods) - 1) / 2) * width, values, width, yerr=err,
               capsize=2, label=method)  # fmt: skip
    for g, name in enumerate(ood):
        if not np.isfinite(relative_performance(base[name], base[name])):
            ax.text(g, 0, "undefined\n(base acc. 0)", ha="center", va="bottom", fontsize=7)
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.set_xticks(groups, ood + ["OOD mean"], rotation=30, ha="right")
    ax.set_ylabel(f"relative performance after stage {final} (%)")
    ax.set_title("out-of-distribution benchmarks after the last stage")
    ax.legend(fontsize=8)
    return save_figure(fig, out_dir, "ood_final")


def plot_accuracy_matrix(scores: pd.DataFrame, plan: Plan, method: str, out_dir: Path):
    names = [b.name for b in plan.benchmarks]
    rows = scores[scores["method"] == method]
    table = (
        rows.pivot_table(index="stage", columns="benchmark", values="accuracy", aggfunc="mean")
        .reindex(index=plan.stages, columns=names)
        .to_numpy()
    )
    fig, ax = plt.subplots(figsize=(1 + 0.9 * len(names), 1 + 0.5 * len(plan.stages)))
    image = ax.imshow(table, vmin=0, vmax=1, cmap="viridis", aspect="auto")
    for (i, j), value in np.ndenumerate(table):
        if np.isfinite(value):
            ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7,
                    color="white" if value < 0.6 else "black")  # fmt: skip
    ax.set_xticks(range(len(names)), names, rotation=45, ha="right")
    ax.set_yticks(range(len(plan.stages)), _stage_labels(plan))
    ax.set_title(f"{method}: accuracy after each stage")
    fig.colorbar(image, ax=ax, label="accuracy")
    return save_figure(fig, out_dir, f"accuracy_matrix_{method}")


def read_train_log(path: Path) -> list[dict]:
    """The JSON lines of a train log (unreadable lines skipped with a warning)."""
    records = []
    for i, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            log.warning("%s:%d: not JSON, skipped", path, i)
    return records


def _value(record: dict, keys: tuple[str, ...]) -> float | None:
    for key in keys:
        value = record.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value) if np.isfinite(value) else None
    return None


def training_series(
    layout: Layout, plan: Plan, metrics: dict[str, tuple[str, ...]]
) -> tuple[dict, list[str], list[tuple[int, str]]]:
    """({(method, seed): {metric: (x, y)}}, missing log paths, stage boundaries of the first
    run found). x is the step counted across stages (each stage offset by the previous
    stages' last step)."""
    series: dict = {}
    missing: list[str] = []
    boundaries: list[tuple[int, str]] = []
    for method in plan.methods:
        for seed in plan.seeds:
            offset = 0
            run: dict[str, tuple[list, list]] = {}
            run_bounds = []
            for k, domain in enumerate(plan.sequence, start=1):
                path = layout.train_log(method, seed, k, domain)
                run_bounds.append((offset, domain))
                if not path.exists():
                    missing.append(str(path))
                    continue
                records = read_train_log(path)
                last = 0
                for j, record in enumerate(records, start=1):
                    step = record.get("step", j)
                    step = int(step) if isinstance(step, int | float) else j
                    last = max(last, step)
                    for name, keys in metrics.items():
                        value = _value(record, keys)
                        if value is not None:
                            xs, ys = run.setdefault(name, ([], []))
                            xs.append(offset + step)
                            ys.append(value)
                offset += last
            if run:
                series[(method, seed)] = run
                if not boundaries:
                    boundaries = run_bounds
    return series, missing, boundaries


def plot_training_curves(
    layout: Layout, plan: Plan, out_dir: Path, metrics: dict[str, tuple[str, ...]]
) -> tuple[list[str], dict]:
    series, missing, boundaries = training_series(layout, plan, metrics)
    present = [m for m in metrics if any(m in run for run in series.values())]
    fig, axes = plt.subplots(
        max(1, len(present)), 1, figsize=(8, 2.2 * max(1, len(present))), sharex=True,
        squeeze=False,
    )  # fmt: skip
    axes = axes[:, 0]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    if not present:
        axes[0].text(0.5, 0.5, "no training logs found", ha="center", va="center")
        axes[0].set_axis_off()
    for ax, name in zip(axes, present, strict=False):
        for i, method in enumerate(plan.methods):
            for j, seed in enumerate(plan.seeds):
                xs, ys = series.get((method, seed), {}).get(name, ([], []))
                if xs:
                    ax.plot(xs, ys, color=colors[i % len(colors)], linewidth=1, alpha=0.9,
                            linestyle=("-", "--", ":", "-.")[j % 4],
                            label=method if j == 0 else None)  # fmt: skip
        for x, _domain in boundaries:
            ax.axvline(x, color="grey", linewidth=0.6, linestyle=":")
        ax.set_ylabel(name, fontsize=7)
    if present:
        top = axes[0]
        for x, domain in boundaries:
            top.annotate(domain, (x, 1.0), xycoords=("data", "axes fraction"), fontsize=7,
                         va="bottom")  # fmt: skip
        top.legend(fontsize=7, loc="best")
        axes[-1].set_xlabel("training step (stages concatenated)")
    fig.suptitle("training signals", y=1.02)
    info = {"plotted": present, "missing_logs": missing}
    return save_figure(fig, out_dir, "training_curves"), info


def make_figures(config: dict, layout: Layout, train_metrics: list[str] | None = None) -> dict:
    """Draw every figure from the tables and train logs of `layout` into its figures folder,
    then write `manifest.json` (returned)."""
    plan = Plan.from_config(config)
    out_dir = layout.figures_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    scores = read_csv(layout.scores_csv)
    metrics = read_csv(layout.cl_metrics_csv)
    trajectory = read_csv(layout.trajectory_csv)
    chosen = (
        {m: TRAIN_METRICS.get(m, (m,)) for m in train_metrics} if train_metrics else TRAIN_METRICS
    )
    files: list[str] = []
    for method in plan.methods:
        files += plot_cl_trajectory(trajectory, plan, method, out_dir)
    files += plot_item_transitions(read_csv(layout.transitions_csv), plan, out_dir)
    for method in plan.methods:
        files += plot_cl_curves(metrics, plan, method, out_dir)
    files += plot_ood_final(scores, metrics, plan, out_dir)
    for method in plan.methods:
        files += plot_accuracy_matrix(scores, plan, method, out_dir)
    names, training = plot_training_curves(layout, plan, out_dir, chosen)
    files += names
    manifest = {"files": files, "training_curves": training}
    write_manifest(out_dir, manifest)
    return manifest
