"""The SDPO EMA teacher in float32 whatever the student's dtype (cptlab.train.ema_teacher): a
bf16 stage's teacher follows the float32 EMA of its student's trajectory, rounded once; the
anchor mix at the start is rounded once; a resumed stage continues the float32 weights."""

from __future__ import annotations

import json
import os

import pytest
import torch
from tiny_world import one_step_world, tiny_rows
from transformers import AutoModelForCausalLM, TrainerCallback

from cptlab.train.spec import resolve_stage
from cptlab.train.stage import build_trainer, resolve_anchor, train_stage

os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(1)

RATE = 0.05  # the paper's SDPO_5%
STEPS = 30
BF16_UNIT = 2.0**-8  # bf16's unit roundoff: |round(x) - x| <= 2^-8 |x|


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    world = one_step_world(tmp_path_factory.mktemp("ema_teacher"))
    world["config"]["methods"] = {
        "sdpo_ema": {"trainer": "sdpo", "teacher_model_kind": "ema", "teacher_update_rate": RATE},
        "sdpo_mixed": {
            "trainer": "sdpo",
            "teacher_model_kind": "ema",
            "teacher_anchor": "base",
            "teacher_anchor_mix": 0.3,
        },
        "sdpo_frozen_mixed": {
            "trainer": "sdpo",
            "teacher_model_kind": "frozen",
            "teacher_anchor": "base",
            "teacher_anchor_mix": 0.3,
        },
    }
    # bf16 weights, as paper.yaml's; Adam on them directly (no DeepSpeed master copy here), at a
    # rate that moves the student's weights of scale 0.02 by about one bf16 step per update (the
    # paper's 1e-5 moves its float32 master copy by less). Eager attention: torch 2.13's bf16
    # CPU flash attention fails under cptlab's AVX2 kernel pin on CPUs with AMX (#49).
    world["config"]["training"].update(
        dtype="bfloat16",
        attn_implementation="eager",
        learning_rate=1e-4,
        prompts_per_step=2,
        num_generations=4,
        max_completion_length=8,
        save_steps=1000,
        kl_probe={"prompts": 0},
    )
    return world


class StudentTrajectory(TrainerCallback):
    """The student's weights after each update, before the teacher's update (this callback
    runs before the EMA's, which the trainer adds last)."""

    def __init__(self):
        self.weights: list[list[torch.Tensor]] = []

    def on_step_end(self, args, state, control, model=None, **kwargs):
        self.weights.append([p.detach().float().clone() for p in model.parameters()])


def trainer_for(world, method, callbacks=(), start=None, anchor=None, **training):
    config = json.loads(json.dumps(world["config"]))
    config["training"].update(training)
    settings = resolve_stage(config, method, "math")
    start = str(start or world["base"])
    state = world["dir"] / f"{method}-{len(list(world['dir'].iterdir()))}"
    anchor_path = resolve_anchor(settings, start, anchor)
    return build_trainer(settings, tiny_rows(), start, state, 0, anchor_path, list(callbacks))


def float32_weights(path) -> list[torch.Tensor]:
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    return [p.detach().clone() for p in model.parameters()]


def distances(teacher, reference, start) -> dict[str, float]:
    """How far the teacher is from the reference EMA, against how far the reference moved."""
    flat = [torch.cat([t.float().flatten() for t in ts]) for ts in (teacher, reference, start)]
    t, ref, t0 = flat
    t0_bf16 = t0.to(torch.bfloat16).float()  # where a bf16 teacher starts
    moved = ref - t0
    return {
        "max_relative_error": float(((t - ref).abs() / ref.abs().clamp(min=1e-30)).max()),
        "error_over_movement": float((t - ref).norm() / moved.norm()),
        "movement_ratio": float((t - t0_bf16).norm() / moved.norm()),
        "unchanged_fraction": float((t == t0_bf16).float().mean()),
        "reference_rounded_unchanged_fraction": float(
            (ref.to(torch.bfloat16).float() == t0_bf16).float().mean()
        ),
    }


def test_a_bf16_teacher_follows_the_float32_ema_of_its_student(world):
    """30 bf16 updates at rate 0.05: the teacher is the float32 EMA of the student's weights,
    from the anchor's float32 weights, rounded once to bf16. TRL's update in bf16 loses most
    increments: the teacher moves a fraction of the way and most weights never change."""
    trajectory = StudentTrajectory()
    trainer = trainer_for(world, "sdpo_ema", [trajectory], steps=STEPS)
    assert next(trainer.model.parameters()).dtype == torch.bfloat16
    trainer.train()
    assert len(trajectory.weights) == STEPS
    start = float32_weights(world["base"])  # the anchor (the stage start), saved in float32
    reference = [w.clone() for w in start]
    for student in trajectory.weights:
        for ref, s in zip(reference, student, strict=True):
            ref.mul_(1 - RATE).add_(s, alpha=RATE)
    teacher = [p.detach().float() for p in trainer.teacher_parameters()]
    found = distances(teacher, reference, start)
    assert found["reference_rounded_unchanged_fraction"] < 0.5, found  # the reference moved
    # The float32 weights are the reference (its arithmetic); the teacher their bf16 rounding.
    for weight, ref in zip(trainer.ema_teacher.state(), reference, strict=True):
        assert weight.dtype == torch.float32
        torch.testing.assert_close(weight, ref, rtol=1e-6, atol=1e-9)
    assert found["max_relative_error"] <= BF16_UNIT, found
    assert found["movement_ratio"] == pytest.approx(1.0, abs=0.02), found


def test_at_the_papers_step_sizes_the_teacher_still_moves(world):
    """The paper's regime, which the tiny trainer cannot reach without a float32 master copy:
    a student whose float32 weights (ZeRO-2's master copy) move by 1e-5 per update on weights
    of scale 0.02, the bf16 student their rounding. After 50 updates at rate 0.05 the teacher
    is the float32 EMA rounded once; TRL's update in bf16, on the same trajectory, has left
    most weights where they started (the control)."""
    from types import SimpleNamespace

    from trl.trainer.callbacks import SyncRefModelCallback

    from cptlab.train.ema_teacher import EMATeacher

    g = torch.Generator().manual_seed(0)
    master = torch.randn(256, 256, generator=g) * 0.02
    student, ours, trls = (torch.nn.Linear(256, 256, bias=False) for _ in range(3))
    for model in (student, ours, trls):
        model.to(torch.bfloat16).weight.data.copy_(master)
    ema = EMATeacher(ours, SimpleNamespace(unwrap_model=lambda m: m), [master.clone()])
    reference, start = master.clone(), master.clone()
    with torch.no_grad():
        for _ in range(50):
            master -= 1e-5 * torch.sign(torch.randn(master.shape, generator=g) + 0.3)  # Adam-like
            student.weight.copy_(master)
            ema.update(student, RATE)
            SyncRefModelCallback._sync_target_model(student, trls, RATE)
            reference.mul_(1 - RATE).add_(student.weight.float(), alpha=RATE)
    ours_found = distances([ours.weight.detach()], [reference], [start])
    trls_found = distances([trls.weight.detach()], [reference], [start])
    assert torch.equal(ours.weight, reference.to(torch.bfloat16)), ours_found
    assert ours_found["max_relative_error"] <= BF16_UNIT, ours_found
    assert trls_found["max_relative_error"] > 10 * BF16_UNIT, trls_found
    assert trls_found["unchanged_fraction"] > 2 * trls_found["reference_rounded_unchanged_fraction"]


def test_the_anchor_mix_is_rounded_once(world):
    """teacher = 0.7 * stage start + 0.3 * base, computed in float32 from both checkpoints'
    float32 weights: the EMA teacher keeps it, a frozen one holds its bf16 rounding."""
    stage1 = world["dir"] / "stage1"
    if not stage1.exists():
        model = AutoModelForCausalLM.from_pretrained(world["base"])
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p) * 0.01)
        model.save_pretrained(stage1)
        trainer_for(world, "sdpo_ema").processing_class.save_pretrained(stage1)
    student, base = float32_weights(stage1), float32_weights(world["base"])
    # The student is stage 1 rounded to bf16: the mix's student share is what it holds.
    mixed = [
        b.clone().mul_(0.3).add_(s.to(torch.bfloat16).float(), alpha=0.7)
        for b, s in zip(base, student, strict=True)
    ]
    for method in ("sdpo_mixed", "sdpo_frozen_mixed"):
        trainer = trainer_for(world, method, start=stage1, anchor=str(world["base"]))
        teacher = trainer.teacher_parameters()
        for param, value in zip(teacher, mixed, strict=True):
            assert param.dtype == torch.bfloat16
            assert torch.equal(param, value.to(torch.bfloat16)), method
        if method == "sdpo_mixed":
            for weight, value in zip(trainer.ema_teacher.state(), mixed, strict=True):
                torch.testing.assert_close(weight, value, rtol=1e-6, atol=1e-9)


def test_a_resumed_bf16_stage_continues_the_float32_teacher(world):
    """Killed after checkpoint 2 and resumed, a bf16 EMA stage ends with the teacher of an
    uninterrupted run: the checkpoint holds the float32 weights, not their rounding."""

    class Kill(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            if state.global_step == 3:
                raise KeyboardInterrupt("killed before step 4")

    def run(name, callbacks=None):
        config = json.loads(json.dumps(world["config"]))
        config["training"].update(steps=4, save_steps=2, learning_rate=1e-2)
        return train_stage(
            config, "sdpo_ema", "math", seed=0, start=world["base"],
            out=world["dir"] / name / "out", state_dir=world["dir"] / name / "state",
            data=world["data"] / "tiny_train.jsonl", callbacks=callbacks,
        )  # fmt: skip

    whole = run("whole")
    with pytest.raises(KeyboardInterrupt):
        run("killed", callbacks=[Kill()])
    state = world["dir"] / "killed" / "state" / "checkpoint-2" / "sdpo_teacher.pt"
    saved = torch.load(state, weights_only=True)
    assert {t.dtype for t in saved} == {torch.float32}
    resumed = run("killed")
    assert resumed["resumed_from"] == "checkpoint-2"
    assert resumed["ranks"] == whole["ranks"]  # student and teacher digests
