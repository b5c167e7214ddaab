"""The `train-stage` subcommand."""

from __future__ import annotations

import argparse
import json

from cptlab.cli import CONFIG, THREADS, arg, command


@command(
    "train-stage",
    "train one continual-learning stage (GRPO or SDPO) from a checkpoint",
    CONFIG,
    arg("--method", required=True, help="a key of `methods` in the config"),
    arg("--domain", required=True, help="the domain trained in this stage"),
    arg("--seed", type=int, required=True),
    # Not `--start`: torchrun's parser would read it as an abbreviation of its --start-method.
    arg("--start-from", dest="start", required=True, help="checkpoint the stage starts from"),
    arg("--out", required=True, help="output folder (manifest.json written last)"),
    arg("--state-dir", required=True, help="resumable trainer state, outside --out"),
    arg("--anchor", default=None, help="the original base model (teacher anchor `base`)"),
    arg("--data", required=True, help="the prepared rows of the domain's train benchmark"),
    arg(
        "--replay-data",
        nargs="*",
        default=[],
        help="the prepared train rows of the domains trained in earlier stages (replay_share)",
    ),
    arg(
        "--export-saves",
        action="store_true",
        help="export the weights at each trainer save into --out/step<N>/ "
        "(evaluation.within_stage)",
    ),
    arg("--tracking-dir", default=None, help="the stage's tracker run (training.report_to)"),
    THREADS,
)
def train_stage(args: argparse.Namespace) -> None:
    from cptlab.train.stage import train_stage
    from cptlab.validation import load_config

    manifest = train_stage(
        load_config(args.config),
        method=args.method,
        domain=args.domain,
        seed=args.seed,
        start=args.start,
        out=args.out,
        state_dir=args.state_dir,
        anchor=args.anchor,
        threads=args.threads,
        data=args.data,
        replay=args.replay_data,
        export_saves=args.export_saves,
        tracking_dir=args.tracking_dir,
    )
    if manifest:  # only the main process writes and reports
        keys = ("status", "steps_done", "weights_step", "train_seconds")
        print(json.dumps({k: manifest[k] for k in keys}))
