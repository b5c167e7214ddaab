"""Where every artifact of one experiment lives: results/<experiment>/ and nothing else.

The Snakefile and every package module take their paths from `Layout`, so the tree below is
written once. Methods accept wildcard placeholders as well as values
(`layout.stage_dir("{method}", "{seed}", "{stage}", "{domain}")` is a Snakemake pattern).

    config.json                                    the effective config the CLI reads (written by
                                                   a run that executes jobs, never a dry run)
    data/<benchmark>.jsonl                         canonical rows of every split
    base/                                          the built base model, manifest.json last
    runs/<method>/seed<s>/stage<k>_<domain>/       a stage's checkpoint, train_log.jsonl,
                                                   manifest.json last
    runs/.../stage<k>_<domain>/step<N>/            the checkpoint after N rollout batches
                                                   (evaluation.within_stage), manifest.json
                                                   last, written before the stage's manifest
    state/<method>/seed<s>/stage<k>_<domain>/      resumable trainer state (outside the
                                                   stage's output, which Snakemake clears)
    eval/base/<benchmark>.json                     the base's scores (+ .responses.jsonl)
    eval/<method>/seed<s>/stage<k>/<benchmark>.json   each stage's scores (+ .responses.jsonl)
    eval/<method>/seed<s>/stage<k>/step<N>/<benchmark>.json   a within-stage checkpoint's
    eval/.../shards/<benchmark>.<i>of<n>.json      shard i of a benchmark split in n jobs
                                                   (evaluation.shards), merged into the above
    scores.csv, cl_metrics.csv, cl_summary.csv     the results tables
    trajectory.csv                                 every evaluated checkpoint of each chain, in
                                                   training order (within-stage ones included)
    item_ledger.csv, transitions.csv               each item's success probability at each
                                                   checkpoint; right->wrong and wrong->right
                                                   counts per transition, chance-adjusted
    findings.csv, findings.html                    the study's findings scored on this run
    figures/                                       plots, manifest.json last
    drift/<method>/seed<s>/                        one chain's drift tables, manifest.json last
    drift/base_responses/                          the base's response embeddings, which every
                                                   chain reads
    drift/datasets/, drift/figures/                distances between data sets; drift plots
    report.html                                    Snakemake's report
    tracking/<method>/seed<s>/stage<k>_<domain>/   the tracker's run of a stage
                                                   (training.report_to)
    provenance/<job>.json                          what each job's outputs depend on (settings
                                                   and code hash), committed by the job when it
                                                   succeeded: reruns are decided from these
                                                   files, so they travel with results/
    logs/<job>.log, benchmarks/<job>.tsv           each job's log and Snakemake timing
    claims/<job>.json                              who is making each job now: run, user,
                                                   host, process, clone (cptlab.claims)

The results folder is `results/` of the working folder, or the folder CPTLAB_RESULTS names
(a relative path is taken from the working folder): how clones share one folder without a
symlink.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cptlab.artifacts import MANIFEST

RESULTS = Path("results")
RESULTS_ENV = "CPTLAB_RESULTS"  # another results folder, shared by several clones
TRAIN_LOG = "train_log.jsonl"
BASE = "base"  # the base model's name among checkpoints (stage 0)
BASE_JOB = "base"  # the job id of the base build


def step_name(step: int | str) -> str:
    """A within-stage checkpoint's folder: the one after `step` rollout batches."""
    return f"step{step}"


def shard_name(benchmark: str, index: int | str, count: int | str) -> str:
    """Shard `index` of `count` of a benchmark (evaluation.shards), in file names and job ids."""
    return f"{benchmark}.{index}of{count}"


@dataclass(frozen=True)
class Layout:
    """The folder tree of one experiment (module docstring), rooted at `root`."""

    root: Path

    @classmethod
    def of(cls, config: Mapping, results: str | Path | None = None) -> Layout:
        """The layout of `config`'s experiment under `results` (default: $CPTLAB_RESULTS, else
        ./results)."""
        if results is None:
            results = os.environ.get(RESULTS_ENV) or RESULTS
        return cls(Path(results) / config["experiment"])

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    def recorded(self, path: str | Path) -> str:
        """`path` as provenance records name it: a path inside this folder as it lies under
        ./results, wherever the folder is (CPTLAB_RESULTS), so that clones sharing the folder
        record the same settings; any other path (a hub model's name) as it is."""
        root = os.path.abspath(self.root)
        full = os.path.abspath(path)
        if os.path.commonpath([root, full]) != root:
            return str(path)
        return str(RESULTS / self.root.name / os.path.relpath(full, root)).removesuffix("/.")

    def root_in(self, path: str | Path) -> Path:
        """This layout's root as it appears in `path`, one of its artifacts: a job's files may
        carry a prefix (a storage folder, a working directory), so the root is found in the
        path rather than assumed."""
        path = Path(path)
        size = len(self.root.parts)
        for folder in path.parents:
            if folder.parts[-size:] == self.root.parts:
                return folder
        raise ValueError(f"{path} is not inside {self.root}")

    # --- inputs ------------------------------------------------------------------------------

    @property
    def config_file(self) -> Path:
        return self.root / "config.json"

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    def data_file(self, benchmark: str) -> Path:
        return self.data_dir / f"{benchmark}.jsonl"

    # --- checkpoints -------------------------------------------------------------------------

    @property
    def base_dir(self) -> Path:
        return self.root / "base"

    @property
    def base_manifest(self) -> Path:
        return self.base_dir / MANIFEST

    def stage_dir(self, method: str, seed: int | str, stage: int | str, domain: str) -> Path:
        return self.root / "runs" / method / f"seed{seed}" / f"stage{stage}_{domain}"

    def stage_manifest(self, method: str, seed: int | str, stage: int | str, domain: str) -> Path:
        return self.stage_dir(method, seed, stage, domain) / MANIFEST

    def step_dir(
        self, method: str, seed: int | str, stage: int | str, domain: str, step: int | str
    ) -> Path:
        """The checkpoint after `step` rollout batches of a stage (evaluation.within_stage)."""
        return self.stage_dir(method, seed, stage, domain) / step_name(step)

    def train_log(self, method: str, seed: int | str, stage: int | str, domain: str) -> Path:
        return self.stage_dir(method, seed, stage, domain) / TRAIN_LOG

    def state_dir(self, method: str, seed: int | str, stage: int | str, domain: str) -> Path:
        return self.root / "state" / method / f"seed{seed}" / f"stage{stage}_{domain}"

    # --- evaluations -------------------------------------------------------------------------

    def eval_dir(
        self,
        method: str | None = None,
        seed: int | str | None = None,
        stage: int | str = 0,
        step: int | str | None = None,
    ) -> Path:
        """The evaluation folder of a checkpoint: the base's (stage 0, shared by every method
        and seed), stage `stage` of chain (method, seed), or its checkpoint after `step` rollout
        batches."""
        if method is None or str(stage) == "0":
            return self.root / "eval" / BASE
        folder = self.root / "eval" / method / f"seed{seed}" / f"stage{stage}"
        return folder if step is None else folder / step_name(step)

    def eval_file(
        self,
        benchmark: str,
        method: str | None = None,
        seed: int | str | None = None,
        stage: int | str = 0,
        step: int | str | None = None,
    ) -> Path:
        """The EVAL.json summary of one (checkpoint, benchmark), written last."""
        return self.eval_dir(method, seed, stage, step) / f"{benchmark}.json"

    def responses_file(
        self,
        benchmark: str,
        method: str | None = None,
        seed: int | str | None = None,
        stage: int | str = 0,
        step: int | str | None = None,
    ) -> Path:
        """Every completion with its reward and reason, one line per item."""
        return self.eval_dir(method, seed, stage, step) / f"{benchmark}.responses.jsonl"

    def shard_files(
        self,
        benchmark: str,
        index: int | str,
        count: int | str,
        method: str | None = None,
        seed: int | str | None = None,
        stage: int | str = 0,
    ) -> tuple[Path, Path]:
        """(EVAL.json, responses) of shard `index` of `count` of a benchmark split by
        `evaluation.shards`; its merge writes the benchmark's own files."""
        stem = self.eval_dir(method, seed, stage) / "shards" / shard_name(benchmark, index, count)
        return stem.with_name(stem.name + ".json"), stem.with_name(stem.name + ".responses.jsonl")

    # --- tables, figures, drift --------------------------------------------------------------

    @property
    def scores_csv(self) -> Path:
        return self.root / "scores.csv"

    @property
    def trajectory_csv(self) -> Path:
        return self.root / "trajectory.csv"

    @property
    def item_ledger_csv(self) -> Path:
        return self.root / "item_ledger.csv"

    @property
    def transitions_csv(self) -> Path:
        return self.root / "transitions.csv"

    @property
    def cl_metrics_csv(self) -> Path:
        return self.root / "cl_metrics.csv"

    @property
    def cl_summary_csv(self) -> Path:
        return self.root / "cl_summary.csv"

    @property
    def findings_csv(self) -> Path:
        return self.root / "findings.csv"

    @property
    def findings_html(self) -> Path:
        return self.root / "findings.html"

    @property
    def figures_dir(self) -> Path:
        return self.root / "figures"

    @property
    def drift_dir(self) -> Path:
        return self.root / "drift"

    def drift_chain_dir(self, method: str, seed: int | str) -> Path:
        return self.drift_dir / method / f"seed{seed}"

    @property
    def drift_base_dir(self) -> Path:
        return self.drift_dir / "base_responses"

    @property
    def dataset_distance_dir(self) -> Path:
        return self.drift_dir / "datasets"

    @property
    def drift_figures_dir(self) -> Path:
        return self.drift_dir / "figures"

    def drift_chain_manifest(self, method: str, seed: int | str) -> Path:
        return self.drift_chain_dir(method, seed) / MANIFEST

    @property
    def report(self) -> Path:
        return self.root / "report.html"

    def tracking_dir(self, method: str, seed: int | str, stage: int | str, domain: str) -> Path:
        """The tracker's run of one stage (training.report_to); the chain's folder groups them."""
        return self.root / "tracking" / method / f"seed{seed}" / f"stage{stage}_{domain}"

    # --- workflow bookkeeping ----------------------------------------------------------------
    # A job's id names its provenance, log and benchmark files; the rules build the ids with
    # these functions (with wildcard placeholders), and `cptlab watch` reads them back.

    @staticmethod
    def data_job(benchmark: str) -> str:
        return f"data/{benchmark}"

    @staticmethod
    def train_job(method: str, seed: int | str, stage: int | str, domain: str) -> str:
        return f"train/{method}/seed{seed}/stage{stage}_{domain}"

    @staticmethod
    def evaluate_job(
        method: str | None = None,
        seed: int | str | None = None,
        stage: int | str = 0,
        step: int | str | None = None,
    ) -> str:
        if method is None or str(stage) == "0":
            return f"evaluate/{BASE}"
        job = f"evaluate/{method}/seed{seed}/stage{stage}"
        return job if step is None else f"{job}/{step_name(step)}"

    @staticmethod
    def evaluate_shard_job(
        benchmark: str,
        index: int | str,
        count: int | str,
        method: str | None = None,
        seed: int | str | None = None,
        stage: int | str = 0,
    ) -> str:
        return f"{Layout.evaluate_job(method, seed, stage)}/{shard_name(benchmark, index, count)}"

    @staticmethod
    def merge_shards_job(
        benchmark: str,
        method: str | None = None,
        seed: int | str | None = None,
        stage: int | str = 0,
    ) -> str:
        checkpoint = Layout.evaluate_job(method, seed, stage).removeprefix("evaluate/")
        return f"merge-shards/{checkpoint}/{benchmark}"

    @staticmethod
    def drift_chain_job(method: str, seed: int | str) -> str:
        return f"drift/{method}/seed{seed}"

    @property
    def claims_dir(self) -> Path:
        return self.root / "claims"

    def claim_file(self, job: str) -> Path:
        return self.claims_dir / f"{job}.json"

    def provenance_file(self, job: str) -> Path:
        return self.root / "provenance" / f"{job}.json"

    def log_file(self, job: str) -> Path:
        return self.root / "logs" / f"{job}.log"

    def benchmark_file(self, job: str) -> Path:
        return self.root / "benchmarks" / f"{job}.tsv"
