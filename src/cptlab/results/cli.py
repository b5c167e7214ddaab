"""The `aggregate` and `figures` subcommands: they read and write the results tree through
`cptlab.layout.Layout`."""

from __future__ import annotations

import argparse
import json

from cptlab.cli import CONFIG, RESULTS_DIR, arg, command


@command(
    "aggregate",
    "scores.csv, cl_metrics.csv, cl_summary.csv from the EVAL.json tree",
    CONFIG,
    RESULTS_DIR,
)
def aggregate(args: argparse.Namespace) -> None:
    from cptlab.config import load_config
    from cptlab.layout import Layout
    from cptlab.results.aggregate import aggregate

    paths = aggregate(load_config(args.config), Layout(args.results_dir))
    print(json.dumps({k: str(v) for k, v in paths.items()}))


@command(
    "figures",
    "continual-learning plots (PNG + PDF) and figures/manifest.json",
    CONFIG,
    RESULTS_DIR,
    arg(
        "--train-metrics",
        default=None,
        help="comma-separated train-log keys to plot (default: results.figures.TRAIN_METRICS)",
    ),
)
def figures(args: argparse.Namespace) -> None:
    from cptlab.config import load_config
    from cptlab.layout import Layout
    from cptlab.results.figures import make_figures

    metrics = [m for m in (args.train_metrics or "").split(",") if m] or None
    layout = Layout(args.results_dir)
    manifest = make_figures(load_config(args.config), layout, metrics)
    print(json.dumps({"files": len(manifest["files"]), "out_dir": str(layout.figures_dir)}))
