"""The paper config's DeepSpeed ZeRO-2 launch (its `resources.train.launcher`, with 2 processes
for 8), run on the CPU through the workflow's train rule: DeepSpeed's CPU accelerator talks over
gloo where oneCCL is absent, so the ZeRO-2 engine, its partitioned optimizer and its checkpoints
run here as on a GPU node. A supervised stage (its loss is never zero, unlike RL's on the smoke
base) must end where the same stage under plain data parallelism ends, and resume from a
ZeRO-2 checkpoint to the same weights. In bf16, as paper.yaml trains, the engine accumulates and
reduces gradients in float32 and an EMA teacher keeps its float32 weights alike on every process
(tests/zero2_engine.py reads both from the engine and the teacher)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from tiny_world import tiny_world

from cptlab.artifacts import MANIFEST
from cptlab.validation import load_config
from tests.workflow_helpers import (
    BIN,
    ROOT,
    TWO_PROCESSES,
    copy_workflow,
    edited_config,
    snakemake,
)

pytestmark = pytest.mark.integration

PAPER_LAUNCHER = load_config(ROOT / "config" / "paper.yaml")["resources"]["train"]["launcher"]
ZERO2 = PAPER_LAUNCHER.replace("--num_processes 8", "--num_processes 2")
STAGE = "runs/sft/seed0/stage1_math"
# float32 on both paths; ZeRO-2 reduces gradients in buckets, in another order than DDP's.
TOLERANCE = 1e-5


def sft_stage(experiment: str, launcher: str):
    def edit(config: dict) -> None:
        config["experiment"] = experiment
        config["run"].update(sequence=["math"], methods=["sft"], seeds=[0])
        config["resources"]["train"]["launcher"] = launcher
        config["methods"] = {"sft": {"trainer": "sft", "training": {"learning_rate": 1e-3}}}
        config["training"].update(prompts_per_step=4, steps=3, save_total_limit=2)

    return edit


def train(workdir: Path, experiment: str) -> dict:
    target = f"results/{experiment}/{STAGE}/{MANIFEST}"
    done = snakemake(
        workdir, target, "--cores", "2", "--configfile", f"config/{experiment}.yaml",
        env={"OMP_NUM_THREADS": "1", "DS_ACCELERATOR": "cpu"},
    )  # fmt: skip
    log = workdir / f"results/{experiment}/logs/train/sft/seed0/stage1_math.log"
    text = log.read_text() if log.exists() else ""
    assert done.returncode == 0, done.stderr[-3000:] + text[-3000:]
    return json.loads((workdir / target).read_text())


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    pytest.importorskip("deepspeed")  # make setup installs it; the vLLM environment does not
    workdir = copy_workflow(tmp_path_factory.mktemp("deepspeed"))
    for experiment, launcher in (("zero2", ZERO2), ("ddp", TWO_PROCESSES)):
        smoke = workdir / "config" / "smoke.yaml"
        edited_config(
            smoke, workdir / "config" / f"{experiment}.yaml", sft_stage(experiment, launcher)
        )
    return {"workdir": workdir, "zero2": train(workdir, "zero2"), "ddp": train(workdir, "ddp")}


def weights(workdir: Path, experiment: str) -> dict:
    return load_file(workdir / f"results/{experiment}/{STAGE}/model.safetensors")


def test_the_stage_ran_under_zero2_on_two_processes(runs: dict) -> None:
    assert "deepspeed_zero2.yaml" in ZERO2 and ZERO2 != PAPER_LAUNCHER
    manifest = runs["zero2"]
    assert manifest["status"] == "complete" and manifest["world_size"] == 2
    assert manifest["distributed"] == {"type": "DEEPSPEED", "zero_stage": 2}
    assert runs["ddp"]["distributed"] == {"type": "MULTI_CPU", "zero_stage": None}
    assert len(set(manifest["ranks"]["student_sha256"])) == 1
    assert manifest["final"]["loss"] > 0
    # DeepSpeed's CPU shared-memory all-reduce kernel is not built (cptlab.train.stage).
    log = runs["workdir"] / "results/zero2/logs/train/sft/seed0/stage1_math.log"
    assert "deepspeed_shm_comm" not in log.read_text()


def test_the_cpu_shm_allreduce_kernel_is_skipped(monkeypatch) -> None:
    """The hook replaces the builder that DeepSpeed's torch backend calls (not a same-named
    attribute elsewhere: `deepspeed.comm.torch` as an attribute is torch itself)."""
    pytest.importorskip("deepspeed")
    import importlib

    from cptlab.train.stage import skip_cpu_shm_allreduce

    backend = importlib.import_module("deepspeed.comm.torch")
    build = backend.build_shm_op
    monkeypatch.setattr(backend, "build_shm_op", build)  # restored afterwards
    skip_cpu_shm_allreduce()
    assert backend.build_shm_op is not build  # (calling DeepSpeed's own would compile it)
    assert backend.build_shm_op() is None


def test_zero2_ends_where_data_parallel_training_ends(runs: dict) -> None:
    workdir = runs["workdir"]
    zero2, ddp = weights(workdir, "zero2"), weights(workdir, "ddp")
    start = load_file(workdir / "results/zero2/base/model.safetensors")
    assert zero2.keys() == ddp.keys()
    moved = max((ddp[k] - start[k]).abs().max().item() for k in ddp)
    apart = max((zero2[k] - ddp[k]).abs().max().item() for k in ddp)
    assert moved > 100 * TOLERANCE and apart < TOLERANCE, (moved, apart)


def test_a_killed_zero2_stage_resumes_to_the_same_weights(runs: dict) -> None:
    """The state a kill during step 3 leaves (ZeRO-2 checkpoint 2, no output): the rerun resumes
    from it, the partitioned optimizer state included, and ends bit-identical."""
    workdir = Path(runs["workdir"])
    state = next(workdir.glob("results/zero2/**/checkpoint-3")).parent
    assert any((state / "checkpoint-2").glob("global_step*"))  # DeepSpeed's own checkpoint
    shutil.rmtree(state / "checkpoint-3")
    shutil.rmtree(workdir / "results/zero2" / STAGE)
    resumed = train(workdir, "zero2")
    assert resumed["resumed_from"] == "checkpoint-2"
    assert resumed["weights_sha256"] == runs["zero2"]["weights_sha256"]


def test_bf16_gradients_accumulate_in_float32_and_the_ema_teacher_keeps_float32(tmp_path):
    """paper.yaml's launcher and DeepSpeed config with 2 processes, bf16 weights and mixed
    precision, 4 micro-batches per update, an SDPO_5% teacher. The engine's own settings: bf16
    model, float32 gradient accumulation and reduction (`data_types.grad_accum_dtype`,
    `communication_data_type`), so ZeRO-2 sums each micro-batch's reduced gradient into a float32
    partition; Adam's master weights float32. The teacher runs in bf16 on float32 weights that
    both processes hold alike (`teacher_state_sha256`), and a checkpoint saves them."""
    pytest.importorskip("deepspeed")
    config, base, _ = tiny_world(tmp_path)
    config["methods"] = {
        "sdpo_ema": {"trainer": "sdpo", "teacher_model_kind": "ema", "teacher_update_rate": 0.05}
    }
    config["training"].update(
        steps=1, prompts_per_step=4, num_generations=2, per_device_train_batch_size=1,
        dtype="bfloat16", bf16=True, deepspeed="config/accelerate/deepspeed_zero2.json",
        # bf16 flash attention fails under the AVX2 kernel pin on CPUs with AMX (#49)
        attn_implementation="eager", save_steps=1, kl_probe={"prompts": 0},
    )  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(config))
    launcher = PAPER_LAUNCHER.replace("--num_processes 8", "--num_processes 2").split()
    done = subprocess.run(
        [str(BIN / launcher[0]), *launcher[1:], "tests/zero2_engine.py",
         str(tmp_path / "config.json"), str(base), str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1", "DS_ACCELERATOR": "cpu"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{i}.json").read_text()) for i in (0, 1)]
    for found in ranks:
        assert found["zero_optimizer"] == "DeepSpeedZeroOptimizer" and found["zero_stage"] == 2
        assert found["gradient_accumulation_steps"] == 4
        assert (found["model_dtype"], found["grad_accum_dtype"]) == ("bfloat16", "float32")
        assert found["communication_data_type"] == "float32"
        assert found["optimizer_grad_accum_dtype"] == "float32" and found["float32_grad_partition"]
        assert found["master_dtype"] == "float32"
        assert found["teacher_dtype"] == "bfloat16"
        assert found["teacher_state_dtypes"] == ["float32"]
    for key in ("teacher_state_sha256", "student_sha256"):
        assert ranks[0][key] == ranks[1][key], key
    assert ranks[0]["teacher_state_sha256"] != ranks[0]["teacher_start_sha256"]  # it moved
    saved = torch.load(tmp_path / "state" / "checkpoint-1" / "sdpo_teacher.pt", weights_only=True)
    assert {w.dtype for w in saved} == {torch.float32}
