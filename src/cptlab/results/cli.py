"""The `aggregate`, `findings`, `figures` and `headline` subcommands: they read and write the
results tree through `cptlab.layout.Layout`."""

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
    from cptlab.layout import Layout
    from cptlab.results.aggregate import aggregate
    from cptlab.validation import load_config

    paths = aggregate(load_config(args.config), Layout(args.results_dir))
    print(json.dumps({k: str(v) for k, v in paths.items()}))


@command(
    "findings",
    "findings.csv and findings.html: the study's six findings scored on this run",
    CONFIG,
    RESULTS_DIR,
)
def findings(args: argparse.Namespace) -> None:
    from cptlab.layout import Layout
    from cptlab.results.findings import write_findings
    from cptlab.validation import load_config

    paths = write_findings(load_config(args.config), Layout(args.results_dir))
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
    from cptlab.layout import Layout
    from cptlab.results.figures import make_figures
    from cptlab.validation import load_config

    metrics = [m for m in (args.train_metrics or "").split(",") if m] or None
    layout = Layout(args.results_dir)
    manifest = make_figures(load_config(args.config), layout, metrics)
    print(json.dumps({"files": len(manifest["files"]), "out_dir": str(layout.figures_dir)}))


@command(
    "headline",
    "print a finished run's headline: gain and forgetting per method and stage, the findings' "
    "verdicts, the report's path",
    CONFIG,
    RESULTS_DIR,
)
def headline(args: argparse.Namespace) -> None:
    from cptlab.layout import Layout
    from cptlab.results.headline import headline
    from cptlab.validation import load_config

    print("\n".join(headline(load_config(args.config), Layout(args.results_dir))))


@command(
    "watch",
    "print what each running job of a workflow run is doing, every few seconds",
    RESULTS_DIR,
    arg("--every", type=float, default=30.0, help="seconds between two reports"),
    arg("--stall-after", type=float, default=300.0, help="seconds without news: stalled"),
)
def watch(args: argparse.Namespace) -> None:
    import sys
    import time
    from pathlib import Path

    from cptlab.layout import Layout
    from cptlab.progress import snapshot

    layout, last, last_time = Layout(args.results_dir), None, 0.0
    while True:
        now = time.time()
        lines = [p.line(now, args.stall_after) for p in snapshot(Path("."), layout, now)]
        # A report when something changed, and at least every 4 intervals (so stalls show).
        if lines and (lines != last or now - last_time >= 4 * args.every):
            stamp = time.strftime("%H:%M:%S")
            print("\n".join(f"progress {stamp}  {line}" for line in lines), file=sys.stderr)
            sys.stderr.flush()
            last, last_time = lines, now
        time.sleep(args.every)
