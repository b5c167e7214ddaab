# Helpers shared by the rules: config validation, paths, and content hashes of the code.
import hashlib
import json
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from cptlab.config import base_measure_benchmarks, benchmarks_in
from cptlab.train.spec import resolve_stage

validate(config, "../schemas/config.schema.yaml")

EXPERIMENT = config["experiment"]
RESULTS = Path("results") / EXPERIMENT


def write_effective_config():
    """The merged config (config files + --config overrides) as the CLI's --config file.
    Rewritten only when it changes; rules track the sections they use through params."""
    path = RESULTS / "config.json"
    # Key order is kept: domain order decides the warm-up mixture's order (and the tokenizer's
    # merges), so a sorted copy would build another base than the YAML it came from.
    text = json.dumps(config, indent=2) + "\n"
    if not path.exists() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return str(path)


CONFIG_FILE = write_effective_config()


def data_file(name):
    return str(RESULTS / "data" / f"{name}.jsonl")


def base_manifest():
    return str(RESULTS / "base" / "manifest.json")


def code_hash(*modules):
    """sha256 of the named package sources: a param that reruns a rule when its code changes,
    compared by content (Snakemake's own code trigger uses mtimes, which a clone resets)."""
    digest = hashlib.sha256()
    root = Path(workflow.basedir) / "src" / "cptlab"
    for module in modules:
        path = root / module
        if not path.exists():
            raise WorkflowError(f"code_hash: {path} does not exist (a rule names a moved module)")
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


# --- the experiment's shape: chains of stages, checkpoints and their evaluations -------------

SEQUENCE = config["run"]["sequence"]
DOMAINS = config["data"]["domains"]


wildcard_constraints:
    benchmark=r"[A-Za-z0-9_.-]+",
    method=r"[A-Za-z0-9_.-]+",
    seed=r"\d+",
    stage=r"[1-9]\d*",
    domain=r"[A-Za-z0-9_-]+",


def eval_benchmarks():
    """Every id and ood benchmark of every domain: what each checkpoint is evaluated on."""
    return [name for spec in DOMAINS.values() for name in spec.get("id", []) + spec.get("ood", [])]


def builds_base():
    return "path" not in config["base"]


def base_model():
    """The base checkpoint: built into results/, or a local folder / hub name from the config."""
    return str(RESULTS / "base") if builds_base() else config["base"]["path"]


def base_inputs():
    return [base_manifest()] if builds_base() else []


def stage_dir(method, seed, stage):
    stage = int(stage)
    return str(RESULTS / "runs" / method / f"seed{seed}" / f"stage{stage}_{SEQUENCE[stage - 1]}")


def stage_manifest(method, seed, stage):
    return f"{stage_dir(method, seed, stage)}/manifest.json"


def previous_checkpoint(wc):
    """The checkpoint stage `wc.stage` starts from: the base model, or the previous stage."""
    stage = int(wc.stage)
    return base_model() if stage == 1 else stage_dir(wc.method, wc.seed, stage - 1)


def previous_inputs(wc):
    stage = int(wc.stage)
    return base_inputs() if stage == 1 else [stage_manifest(wc.method, wc.seed, stage - 1)]


def stage_settings(method, domain):
    """What one stage's training depends on: its method and training keys resolved for this
    domain (another domain's step count is not among them, so changing it reruns only that
    domain's stages)."""
    settings = resolve_stage(config, method, domain).as_dict()
    settings["training"] = {k: v for k, v in settings["training"].items() if k != "domain_steps"}
    return json.loads(json.dumps(settings, sort_keys=True, default=str))


def resource(rule_kind, key, default=None):
    return config.get("resources", {}).get(rule_kind, {}).get(key, default)


def job_resources(rule_kind, runtime=60, mem_mb=4000):
    """Snakemake resources of a rule kind from config.resources; retries extend the runtime.
    CPU-only jobs (gpu 0) get no GPU keys, so the SLURM executor asks for none."""
    res = {
        "runtime": lambda wc, attempt: resource(rule_kind, "runtime", runtime) * attempt,
        "mem_mb": resource(rule_kind, "mem_mb", mem_mb),
    }
    gpus = resource(rule_kind, "gpu", 0)
    if gpus:
        res["gpu"] = gpus
        for key in ("gpu_model", "cpus_per_gpu"):
            if resource(rule_kind, key) is not None:
                res[key] = resource(rule_kind, key)
    for key in ("slurm_partition", "slurm_account"):
        if resource(rule_kind, key) is not None:
            res[key] = resource(rule_kind, key)
    return res


def launcher(rule_kind):
    """Command prefix of a job, e.g. `accelerate launch ...` for multi-GPU training."""
    return resource(rule_kind, "launcher", "")


def all_stage_manifests():
    return [
        stage_manifest(m, s, k)
        for m in config["run"]["methods"]
        for s in config["run"]["seeds"]
        for k in range(1, len(SEQUENCE) + 1)
    ]


def checkpoint_evals():
    """Every evaluation file: the base's (shared by all methods) and each stage's."""
    runs = ["base"] + [
        f"{m}/seed{s}/stage{k}"
        for m in config["run"]["methods"]
        for s in config["run"]["seeds"]
        for k in range(1, len(SEQUENCE) + 1)
    ]
    return [str(RESULTS / "eval" / run / f"{b}.json") for run in runs for b in eval_benchmarks()]
