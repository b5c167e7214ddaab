"""train_stage end to end on the tiny world: outputs, resume after a kill, collapse and
non-finite stops."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import torch
from conftest import run_command
from safetensors.torch import load_file
from tiny_world import Kill, tiny_rows, tiny_world, write_rows
from transformers import TrainerCallback

import cptlab.train.stage as stage_module
from cptlab.artifacts import read_manifest
from cptlab.errors import ConfigError
from cptlab.train.grpo import CptGRPOTrainer
from cptlab.train.monitor import CollapseError, NonFiniteError
from cptlab.train.stage import threads_per_process, train_stage
from cptlab.train.teachers import TEACHER_KINDS
from cptlab.verifiers import VERIFIERS, Verdict, register

os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(1)

FLIP = "tiny_flip"
CALLS = {"n": 0, "after": 10**9}
if FLIP not in VERIFIERS:

    @register(FLIP)
    def _flip(completion: str, row: dict) -> Verdict:
        """Well-formed answers until CALLS['after'] completions were scored, then malformed."""
        CALLS["n"] += 1
        if CALLS["n"] > CALLS["after"]:
            return Verdict(0.0, "No final answer.", reason="no \\boxed{} answer")
        return Verdict(float(len(completion) % 2 == 0), "ok")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    folder = tmp_path_factory.mktemp("stage")
    config, base, data_dir = tiny_world(folder)
    write_rows(data_dir / "flip_train.jsonl", tiny_rows(verifier=FLIP))
    config["data"]["domains"]["flipdomain"] = {"train": "flip_train"}
    return {"config": config, "base": base, "data": data_dir, "dir": folder}


def run(world, name, method="grpo", config=None, domain="math", **kwargs):
    config = config or world["config"]
    train = config["data"]["domains"][domain]["train"]
    return train_stage(
        config,
        method,
        domain,
        seed=1,
        start=world["base"],
        out=world["dir"] / name / "out",
        state_dir=world["dir"] / name / "state",
        anchor=world["base"],
        threads=1,
        data=world["data"] / f"{train}.jsonl",
        **kwargs,
    )


def test_stage_writes_checkpoint_log_and_manifest_last(world):
    config = json.loads(json.dumps(world["config"]))
    config["training"]["measure_memory"] = True
    manifest = run(world, "plain", config=config)
    out = world["dir"] / "plain" / "out"
    assert manifest == read_manifest(out)
    assert manifest["status"] == "complete" and manifest["steps_done"] == 4
    for name in ("config.json", "model.safetensors", "tokenizer.json", "train_log.jsonl"):
        assert (out / name).stat().st_mtime <= (out / "manifest.json").stat().st_mtime, name
    lines = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines] == [1, 2, 3, 4]
    for key in (
        "loss",
        "reward",
        "reward_std",
        "entropy",
        "completions/mean_length",
        "step_seconds",
        "kl_to_start",
        "verifier/success_fraction",
        "collapse/format_violation_rate",
        "collapse/top_ngram_share",
        "reasons",
    ):
        assert key in lines[-1], key
    assert lines[0]["kl_to_start"] >= 0 and lines[-1]["kl_to_start"] > 0
    assert (world["dir"] / "plain" / "state" / "checkpoint-4").is_dir()  # state outside out
    # training.measure_memory: the process's measured memory (cptlab.train.peak_memory): the
    # model and the optimizer's state live after a step, more at the peak; the largest
    # forward with gradient
    (memory,) = manifest["memory"]
    assert memory["device"] == "cpu" and 0 < memory["state_bytes"] < memory["peak_bytes"]
    assert memory["forwards"]["grad"]["rows"] >= 1 and "eval" in memory["forwards"]  # KL probe


@pytest.mark.parametrize("method", ["grpo", "sdpo_ema", "sft"])
def test_resume_after_kill_ends_with_the_same_weights(world, method):
    config = json.loads(json.dumps(world["config"]))
    config["methods"]["sdpo_ema"]["distillation_token_mask_ratio"] = 0.2
    config["methods"]["sft"] = {"trainer": "sft"}
    config["training"].update(steps=5)
    whole = run(world, f"whole-{method}", method, config)
    with pytest.raises(KeyboardInterrupt):
        run(world, f"killed-{method}", method, config, callbacks=[Kill(at=3)])
    state = world["dir"] / f"killed-{method}" / "state"
    assert (state / "checkpoint-2").is_dir() and not (state / "checkpoint-4").exists()
    resumed = run(world, f"killed-{method}", method, config)
    assert resumed["resumed_from"] == "checkpoint-2"
    assert resumed["weights_sha256"] == whole["weights_sha256"]  # bit-identical on CPU
    a = load_file(world["dir"] / f"whole-{method}" / "out" / "model.safetensors")
    b = load_file(world["dir"] / f"killed-{method}" / "out" / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)
    logs = [
        [json.loads(line) for line in (world["dir"] / name / "out" / "train_log.jsonl").open()]
        for name in (f"whole-{method}", f"killed-{method}")
    ]
    assert [r["step"] for r in logs[1]] == [1, 2, 3, 4, 5]
    for x, y in zip(*logs, strict=True):
        assert x["loss"] == y["loss"]
        assert x.get("verifier/reward_mean") == y.get("verifier/reward_mean")


@pytest.mark.parametrize("kind", TEACHER_KINDS)
def test_every_teacher_kind_resumes_to_the_same_weights(world, kind):
    """Killed after checkpoint 2 and resumed, a stage of each SDPO teacher kind ends with the
    student and the teacher of an uninterrupted run: whatever a kind carries across steps is
    in the checkpoint (cptlab.train.teachers)."""
    config = json.loads(json.dumps(world["config"]))
    method = f"sdpo_teacher_{kind}"
    config["methods"][method] = {"trainer": "sdpo", "teacher_model_kind": kind}
    if kind == "ema":  # a teacher that moves far enough for a lost state to show
        config["methods"][method]["teacher_update_rate"] = 0.5
    config["training"].update(steps=3)
    whole = run(world, f"whole-{method}", method, config)
    with pytest.raises(KeyboardInterrupt):
        run(world, f"killed-{method}", method, config, callbacks=[Kill(at=2)])
    resumed = run(world, f"killed-{method}", method, config)
    assert resumed["resumed_from"] == "checkpoint-2"
    assert resumed["ranks"] == whole["ranks"]  # student and (separate) teacher digests
    assert resumed["weights_sha256"] == whole["weights_sha256"]


def test_several_updates_per_rollout_batch(world, monkeypatch):
    """updates_per_generation 2: each rollout batch is scored once and split into two optimizer
    updates; the second is off-policy (TRL computes rollout-time log-probs for the ratio);
    the log has one line per rollout batch; a kill inside a rollout batch resumes to the same
    weights as an uninterrupted run."""
    config = json.loads(json.dumps(world["config"]))
    config["methods"]["grpo"]["updates_per_generation"] = 2
    config["training"].update(steps=3, save_steps=1)
    per_batch = config["training"]["prompts_per_step"] * config["training"]["num_generations"]
    seen = []
    original = CptGRPOTrainer.compute_loss

    def recording(self, model, inputs, *args, **kwargs):
        seen.append(inputs.get("old_per_token_logps") is not None)
        return original(self, model, inputs, *args, **kwargs)

    monkeypatch.setattr(CptGRPOTrainer, "compute_loss", recording)
    CALLS.update(n=0, after=10**9)
    whole = run(world, "updates-whole", config=config, domain="flipdomain")
    assert CALLS["n"] == 3 * per_batch  # three rollout batches scored, not six
    assert whole["steps_done"] == 3 and whole["optimizer_steps_done"] == 6
    assert all(seen) and len(seen) == 6  # one micro-batch per update here
    lines = [
        json.loads(line)
        for line in (world["dir"] / "updates-whole" / "out" / "train_log.jsonl").open()
    ]
    assert [(r["step"], r["rollout_batch"]) for r in lines] == [(2, 1), (4, 2), (6, 3)]
    state = world["dir"] / "updates-whole" / "state"
    assert sorted(p.name for p in state.glob("checkpoint-*")) == [
        "checkpoint-2",
        "checkpoint-4",
        "checkpoint-6",
    ]
    with pytest.raises(KeyboardInterrupt):  # after update 3 of 6: inside rollout batch 2
        run(world, "updates-killed", config=config, domain="flipdomain", callbacks=[Kill(at=3)])
    resumed = run(world, "updates-killed", config=config, domain="flipdomain")
    assert resumed["resumed_from"] == "checkpoint-2"
    assert resumed["weights_sha256"] == whole["weights_sha256"]


def test_rerun_after_the_last_checkpoint_trains_no_further(world):
    whole = run(world, "after-last")  # 4 steps, checkpoints at 2 and 4
    shutil.rmtree(world["dir"] / "after-last" / "out")  # killed before the manifest was written
    again = run(world, "after-last")
    assert again["resumed_from"] == "checkpoint-4" and again["steps_done"] == 4
    assert again["weights_sha256"] == whole["weights_sha256"]
    assert not (world["dir"] / "after-last" / "state" / "checkpoint-5").exists()
    log = (world["dir"] / "after-last" / "out" / "train_log.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in log] == [1, 2, 3, 4]


def test_state_written_by_other_code_is_not_resumed(world, monkeypatch):
    run(world, "other-code")
    shutil.rmtree(world["dir"] / "other-code" / "out")
    monkeypatch.setattr(stage_module.SourceTree, "code_hash", lambda self, command: "other code")
    again = run(world, "other-code")
    assert again["resumed_from"] is None and again["steps_done"] == 4


def collapse_config(world) -> tuple[dict, int]:
    """5 steps, a checkpoint at each, a stop at the first step whose answers lack a box; and
    the completions per step."""
    config = json.loads(json.dumps(world["config"]))
    config["training"].update(steps=5, save_steps=1)
    config["training"]["collapse"] = {
        "thresholds": {"format_violation_rate": 0.5},
        "patience": 1,
        "action": "stop",
    }
    return config, config["training"]["prompts_per_step"] * config["training"]["num_generations"]


def test_collapse_stop_keeps_the_last_good_checkpoint(world):
    config, per_step = collapse_config(world)
    CALLS.update(n=0, after=2 * per_step)  # steps 1-2 well-formed, step 3 collapses
    manifest = run(world, "collapse", config=config, domain="flipdomain")
    state = world["dir"] / "collapse" / "state"
    assert manifest["status"] == "stopped" and manifest["steps_done"] == 3
    assert (
        manifest["weights_step"] == 2
        and "format_violation_rate=1 > 0.5" in manifest["stopped"]["message"]
    )
    assert not (state / "checkpoint-3").exists()  # the collapsed weights were never saved
    out = load_file(world["dir"] / "collapse" / "out" / "model.safetensors")
    good = load_file(state / "checkpoint-2" / "model.safetensors")
    assert all(torch.equal(out[k], good[k]) for k in good)
    log = (world["dir"] / "collapse" / "out" / "train_log.jsonl").read_text().splitlines()
    assert json.loads(log[-1])["reasons"] == {"no \\boxed{} answer": per_step}

    config["training"]["collapse"]["action"] = "error"
    CALLS.update(n=0)
    with pytest.raises(CollapseError, match="step 3"):
        run(world, "collapse-error", config=config, domain="flipdomain")


def test_collapse_stop_right_after_a_resume_keeps_the_resumed_checkpoint(world):
    """Killed after step 3's checkpoint, resumed, collapsed at step 4: the weights are
    checkpoint 3's, not the stage's start (the resumed run's first good step is 3)."""
    config, per_step = collapse_config(world)
    CALLS.update(n=0, after=3 * per_step)  # steps 1-3 well-formed, step 4 collapses
    with pytest.raises(KeyboardInterrupt):
        run(world, "collapse-resume", config=config, domain="flipdomain", callbacks=[Kill(at=3)])
    manifest = run(world, "collapse-resume", config=config, domain="flipdomain")
    assert manifest["resumed_from"] == "checkpoint-3"
    assert manifest["status"] == "stopped" and manifest["weights_step"] == 3
    state = world["dir"] / "collapse-resume" / "state"
    out = load_file(world["dir"] / "collapse-resume" / "out" / "model.safetensors")
    good = load_file(state / "checkpoint-3" / "model.safetensors")
    assert all(torch.equal(out[k], good[k]) for k in good)


class PoisonGradient(TrainerCallback):
    def __init__(self, at: int):
        self.at, self.model = at, None

    def on_step_begin(self, args, state, control, model=None, **kwargs):
        if state.global_step + 1 == self.at:
            next(model.parameters()).register_hook(lambda g: g * float("nan"))


def test_non_finite_gradient_stops_with_the_step(world):
    with pytest.raises(NonFiniteError, match="non-finite gradient norm .* at step 3"):
        run(world, "nan-grad", callbacks=[PoisonGradient(at=3)])
    assert not (world["dir"] / "nan-grad" / "out" / "manifest.json").exists()


def test_non_finite_loss_stops_with_the_step(world, monkeypatch):
    original = CptGRPOTrainer.compute_loss

    def poisoned(self, model, inputs, *args, **kwargs):
        loss = original(self, model, inputs, *args, **kwargs)
        return loss * float("nan") if self.state.global_step == 1 else loss

    monkeypatch.setattr(CptGRPOTrainer, "compute_loss", poisoned)
    with pytest.raises(NonFiniteError, match=r"non-finite loss \(nan\) at step 2"):
        run(world, "nan-loss")
    assert (world["dir"] / "nan-loss" / "state" / "checkpoint-2").exists() is False


def test_vllm_rollouts_are_wired_to_trl(world):
    """use_vllm reaches TRL's trainer construction (which needs vllm, absent on CPU CI)."""
    import importlib.util

    from cptlab.train.spec import resolve_stage
    from cptlab.train.stage import build_trainer

    config = json.loads(json.dumps(world["config"]))
    config["training"].update(use_vllm=True, vllm_mode="colocate", kl_probe={"prompts": 0})
    settings = resolve_stage(config, "sdpo_ema", "math")
    rows = tiny_rows()
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed: construction would start an engine")
    with pytest.raises(ImportError, match="(?i)vllm"):
        build_trainer(settings, rows, world["base"], world["dir"] / "vllm", 0)


def test_cli_trains_a_stage(world, capsys):
    import yaml

    config = json.loads(json.dumps(world["config"]))
    del config["data"]["domains"]["flipdomain"]  # flip_train is a file here, not a benchmark
    config["training"]["steps"] = 2
    path = world["dir"] / "cli.yaml"
    path.write_text(yaml.safe_dump(config))
    run_command(
        f"train-stage --config {path} --method sdpo_frozen --domain math --seed 0 "
        f"--start-from {world['base']} --out {world['dir'] / 'cli' / 'out'} "
        f"--state-dir {world['dir'] / 'cli' / 'state'} "
        f"--data {world['data'] / 'tiny_train.jsonl'}".split()
    )
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["status"] == "complete"
    # training.measure_memory is off by default: nothing measured
    assert read_manifest(world["dir"] / "cli" / "out")["memory"] is None


def test_sft_trains_on_the_reference_answers(world):
    """The off-policy baseline: prompts_per_step examples per step, each a training row's
    prompt with its reference answer; the loss falls on repeated answers; no rollouts, so no
    reward in the log. A row without a reference answer is an error naming it."""
    config = json.loads(json.dumps(world["config"]))
    config["methods"]["sft"] = {"trainer": "sft", "training": {"learning_rate": 3.0e-3}}
    config["training"].update(steps=8, save_steps=4)
    manifest = run(world, "sft", "sft", config)
    assert manifest["status"] == "complete" and manifest["steps_done"] == 8
    lines = [json.loads(line) for line in (world["dir"] / "sft" / "out" / "train_log.jsonl").open()]
    assert [r["step"] for r in lines] == list(range(1, 9))
    assert lines[-1]["loss"] < 0.9 * lines[0]["loss"]
    assert lines[-1]["kl_to_start"] > 0 and "verifier/reward_mean" not in lines[-1]

    rows = tiny_rows()
    del rows[3]["metadata"]["solution"]
    write_rows(world["data"] / "nosolution_train.jsonl", rows)
    config["data"]["domains"]["nosolution"] = {"train": "nosolution_train"}
    with pytest.raises(ConfigError, match="row 'tiny_train-0003' has no metadata.solution"):
        run(world, "sft-bad", "sft", config, domain="nosolution")


def test_kl_budget_ends_the_stage_at_the_first_step_that_reaches_it(world):
    """A matched movement: with `kl_budget` the stage ends at the first step whose probe KL to
    the stage start reaches the budget, with that step's weights (the same as the uncapped
    run's at that step); `steps` stays the cap. A budget without the probe is a config error."""
    config = json.loads(json.dumps(world["config"]))
    config["training"].update(save_steps=1, save_total_limit=4)  # every step's weights
    run(world, "uncapped", config=config)
    uncapped = world["dir"] / "uncapped"
    lines = (uncapped / "out" / "train_log.jsonl").read_text().splitlines()
    kls = [json.loads(line)["kl_to_start"] for line in lines]
    # The first step (after step 1) whose KL exceeds every earlier step's: the budget's stop.
    stop = next(s for s in range(2, len(kls)) if kls[s - 1] > max(kls[: s - 1]))
    config["training"]["kl_budget"] = kls[stop - 1]
    manifest = run(world, "budget", config=config)
    assert manifest["status"] == "complete" and manifest["steps_done"] == stop
    assert manifest["kl_budget"] == {
        "budget": kls[stop - 1],
        "reached": {"step": stop, "kl_to_start": kls[stop - 1]},
    }
    out = load_file(world["dir"] / "budget" / "out" / "model.safetensors")
    same = load_file(uncapped / "state" / f"checkpoint-{stop}" / "model.safetensors")
    assert all(torch.equal(out[k], same[k]) for k in same)

    config["training"]["kl_budget"] = 10 * max(kls)  # never reached: the cap ends the stage
    manifest = run(world, "budget-cap", config=config)
    assert manifest["steps_done"] == len(kls) and manifest["kl_budget"]["reached"] is None

    config["training"]["kl_probe"] = {"prompts": 0}
    with pytest.raises(ConfigError, match="kl_budget .* kl_probe.prompts"):
        run(world, "budget-noprobe", config=config)


@pytest.mark.parametrize(
    ("threads", "local_processes", "cpus", "expected"),
    [(2, None, 2, 2), (2, "2", 2, 1), (1, "2", 2, 1), (2, "2", 16, 2), (8, "8", 64, 8)],
)
def test_a_process_runs_its_jobs_threads_within_its_share_of_the_cpus(
    monkeypatch, threads, local_processes, cpus, expected
):
    """Two processes of a 2-thread job on 2 cores run one thread each, not two: the rehearsal's
    first GRPO stage on ZeRO-2 took 27.3 s with two threads a process, 21.4 s with one. The
    paper config's 8 processes on a node with 64 CPUs keep their 8 threads each."""
    if local_processes is None:
        monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    else:
        monkeypatch.setenv("LOCAL_WORLD_SIZE", local_processes)
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(cpus)))
    assert threads_per_process(threads) == expected
