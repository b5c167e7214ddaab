"""The study's optimisation settings (docs/study-training.md): the learning-rate schedule counted
per rollout batch, as verl steps it, with its resume; GRPO's dual clip (TRL's `delta`) against
verl's loss; weight decay on every parameter or, as transformers does, not on biases and norms."""

from __future__ import annotations

import copy
import json
import math
import os

import pytest
import torch
from safetensors.torch import load_file
from tiny_models import tiny_qwen3
from tiny_world import Kill, tiny_rows, tiny_world
from transformers import TrainerCallback, get_scheduler

from cptlab.errors import ConfigError
from cptlab.train.mixin import per_rollout_batch
from cptlab.train.spec import resolve_stage
from cptlab.train.stage import build_trainer, train_stage

os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(1)

LR = 1.0e-3  # tiny_world's


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    folder = tmp_path_factory.mktemp("optimization")
    config, base, data_dir = tiny_world(folder)
    config["methods"]["grpo_dual_clip"] = {"trainer": "grpo", "loss_type": "grpo", "delta": 3.0}
    config["methods"]["sft"] = {"trainer": "sft"}
    return {"config": config, "base": base, "data": data_dir, "dir": folder}


# ----- the learning-rate schedule ------------------------------------------------------------


class LearningRates(TrainerCallback):
    """The learning rate each optimizer update trains at, in update order."""

    def __init__(self):
        self.seen: list[float] = []

    def on_pre_optimizer_step(self, args, state, control, optimizer=None, **kwargs):
        rates = {group["lr"] for group in optimizer.param_groups}
        assert len(rates) == 1, rates
        self.seen.append(rates.pop())


def staged(world, name, method, config, callbacks=()):
    return train_stage(
        config,
        method,
        "math",
        seed=1,
        start=world["base"],
        out=world["dir"] / name / "out",
        state_dir=world["dir"] / name / "state",
        anchor=world["base"],
        data=world["data"] / "tiny_train.jsonl",
        callbacks=list(callbacks),
    )


def schedule_config(world, method: str, per: str) -> dict:
    """3 rollout batches of 4 updates each (one prompt per update), a warm-up of 2, a
    checkpoint after every rollout batch."""
    config = copy.deepcopy(world["config"])
    config["methods"][method]["updates_per_generation"] = 4
    config["training"].update(
        steps=3, warmup_steps=2, lr_schedule_per=per, save_steps=1, kl_probe={"prompts": 0}
    )
    return config


# The multiplier of each of the 12 updates: verl's staircase (one scheduler step per rollout
# batch: 0/2, 1/2, then 1), and TRL's ramp over updates (0/2, 1/2, then 1).
STAIRCASE = [0.0] * 4 + [0.5] * 4 + [1.0] * 4
PER_UPDATE = [0.0, 0.5] + [1.0] * 10


@pytest.mark.parametrize(
    ("method", "per", "expected"),
    [
        ("grpo", "rollout_batch", STAIRCASE),
        ("sdpo_ema", "rollout_batch", STAIRCASE),
        ("grpo", "optimizer_update", PER_UPDATE),
    ],
)
def test_every_update_trains_at_its_rollout_batchs_rate_and_resumes(world, method, per, expected):
    """lr_schedule_per rollout_batch: every update of rollout batch k trains at lr * schedule(k)
    (verl's fsdp_workers.py steps its scheduler once per update_actor). A kill inside rollout
    batch 2 resumes from the checkpoint after batch 1 with the schedule where it was, and ends
    with the uninterrupted run's weights. optimizer_update is TRL's count."""
    config = schedule_config(world, method, per)
    name = f"{method}-{per}"
    whole = LearningRates()
    done = staged(world, f"{name}-whole", method, config, [whole])
    assert done["optimizer_steps_done"] == 12
    assert whole.seen == pytest.approx([LR * m for m in expected], rel=1e-12, abs=0)
    if per == "optimizer_update":
        return
    with pytest.raises(KeyboardInterrupt):
        staged(world, f"{name}-killed", method, config, [Kill(at=6)])
    resumed_rates = LearningRates()
    resumed = staged(world, f"{name}-killed", method, config, [resumed_rates])
    assert resumed["resumed_from"] == "checkpoint-4"
    assert resumed_rates.seen == pytest.approx(whole.seen[4:], rel=1e-12, abs=0)
    assert resumed["weights_sha256"] == done["weights_sha256"]
    a = load_file(world["dir"] / f"{name}-whole" / "out" / "model.safetensors")
    b = load_file(world["dir"] / f"{name}-killed" / "out" / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)
    log = world["dir"] / f"{name}-killed" / "out" / "train_log.jsonl"
    logged = [json.loads(line)["learning_rate"] for line in log.read_text().splitlines()]
    # A log line's learning_rate is its rollout batch's last update's: here the batch's own rate,
    # as verl logs actor/lr.
    assert logged == pytest.approx([LR * m for m in (0.0, 0.5, 1.0)], rel=1e-12, abs=0)


def multipliers(per: str, batches: int, updates: int = 4, warmup: int = 10) -> list[float]:
    """The schedule's multiplier at each update of a stage, as the stage trainer builds it."""
    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    length = batches if per == "rollout_batch" else batches * updates
    scheduler = get_scheduler(
        "constant_with_warmup", optimizer, num_warmup_steps=warmup, num_training_steps=length
    )
    (schedule,) = scheduler.lr_lambdas
    if per == "rollout_batch":
        schedule = per_rollout_batch(schedule, updates)
    return [schedule(u) for u in range(batches * updates)]


def test_the_cumulative_learning_rate_of_the_papers_grpo_stages():
    """paper.yaml's GRPO (4 updates per rollout batch, a warm-up of 10): the sum of the
    learning-rate multipliers over a stage's updates, the numbers docs/study-training.md states.
    50 rollout batches: verl 4 * (0 + 0.1 + ... + 0.9 + 40) = 178, TRL's per-update count
    (0 + 0.1 + ... + 0.9) + 190 = 194.5, +9.3 %. The 20-batch code stage: 58 and 74.5, +28.4 %."""
    sums = {
        (per, batches): sum(multipliers(per, batches))
        for per in ("rollout_batch", "optimizer_update")
        for batches in (50, 20)
    }
    assert sums == pytest.approx(
        {
            ("rollout_batch", 50): 178.0,
            ("optimizer_update", 50): 194.5,
            ("rollout_batch", 20): 58.0,
            ("optimizer_update", 20): 74.5,
        }
    )
    assert round(100 * (sums["optimizer_update", 50] / sums["rollout_batch", 50] - 1), 1) == 9.3
    assert round(100 * (sums["optimizer_update", 20] / sums["rollout_batch", 20] - 1), 1) == 28.4
    # A warm-up of 10 x 4 = 40 updates under TRL's count comes close, not exact: a ramp, not
    # verl's staircase.
    assert sum(multipliers("optimizer_update", 50, warmup=40)) == pytest.approx(179.5)


def test_a_metric_driven_scheduler_is_refused_per_rollout_batch(world):
    config = copy.deepcopy(world["config"])
    config["methods"]["grpo"]["updates_per_generation"] = 2
    config["training"]["lr_scheduler_type"] = "reduce_lr_on_plateau"
    with pytest.raises(ConfigError, match="lr_schedule_per rollout_batch .* reduce_lr_on_plateau"):
        resolve_stage(config, "grpo", "math")
    config["training"]["lr_schedule_per"] = "optimizer_update"
    resolve_stage(config, "grpo", "math")


# ----- GRPO's dual clip ----------------------------------------------------------------------


def verl_dual_clip_loss(ratio, advantage, clip_low=0.2, clip_high=0.28, clip_ratio_c=3.0):
    """verl's per-token GRPO loss (`compute_policy_loss_vanilla`, verl/trainer/ppo/core_algos.py
    at Moenupa/SDPO-CL d277934, lines 1331-1350), written out here as the reference."""
    pg_losses1 = -advantage * ratio
    pg_losses2 = -advantage * torch.clamp(ratio, 1 - clip_low, 1 + clip_high)
    clip_pg_losses1 = torch.maximum(pg_losses1, pg_losses2)
    pg_losses3 = -advantage * clip_ratio_c
    clip_pg_losses2 = torch.min(pg_losses3, clip_pg_losses1)
    return torch.where(advantage < 0, clip_pg_losses2, clip_pg_losses1)


RATIOS = [0.01, 0.3, 0.79, 0.8, 0.81, 1.0, 1.2, 1.28, 1.29, 2.0, 2.99, 3.0, 3.01, 4.5, 10.0]
ADVANTAGES = [-2.0, -1.0, -0.5, -0.01, 0.0, 0.01, 0.5, 2.0]
KINKS = (0.8, 1.28, 3.0)  # 1 - epsilon, 1 + epsilon_high, delta


def trl_token_loss(trainer, ratio: float, advantage: float) -> tuple[float, float]:
    """TRL's GRPO loss of one completion token at this ratio and advantage (`_compute_loss`, the
    policy's log-probability stubbed), and its gradient in that log-probability."""
    logp = torch.tensor([[math.log(ratio)]], dtype=torch.float64, requires_grad=True)

    def stub(model, input_ids, attention_mask, logits_to_keep, **kwargs):
        return logp, torch.zeros_like(logp), None

    trainer._get_per_token_logps_and_entropies = stub
    one = torch.ones(1, 1, dtype=torch.long)
    loss = trainer._compute_loss(
        trainer.model,
        {
            "prompt_ids": one,
            "prompt_mask": one,
            "completion_ids": one,
            "completion_mask": one,
            "advantages": torch.tensor([advantage], dtype=torch.float64),
            "old_per_token_logps": torch.zeros(1, 1, dtype=torch.float64),
        },
    )
    (grad,) = torch.autograd.grad(loss, logp)
    return loss.item(), grad.item()


def test_grpo_delta_is_verls_dual_clip(world):
    """methods.<name>.delta 3.0 reaches TRL's GRPOConfig, and TRL's per-token loss then equals
    verl's dual-clip loss (clip_ratio_c 3.0) on a grid of ratios and advantages: the values, and
    the gradients off the clip points (zero in the same clipped regions). Without delta, a
    negative-advantage token's loss grows with its ratio past 3."""
    config = copy.deepcopy(world["config"])
    config["training"]["kl_probe"] = {"prompts": 0}
    settings = resolve_stage(config, "grpo_dual_clip", "math")
    trainer = build_trainer(settings, tiny_rows(), world["base"], world["dir"] / "dual-clip", 0)
    assert trainer.args.delta == 3.0 and trainer.args.epsilon_high == 0.28
    trainer.model.eval()  # the loss as it is, not divided over gradient accumulation
    for ratio in RATIOS:
        for advantage in ADVANTAGES:
            r = torch.tensor(ratio, dtype=torch.float64, requires_grad=True)
            expected = verl_dual_clip_loss(r, torch.tensor(advantage, dtype=torch.float64))
            (d_ratio,) = torch.autograd.grad(expected, r)
            loss, grad = trl_token_loss(trainer, ratio, advantage)
            where = f"ratio {ratio}, advantage {advantage}"
            assert loss == pytest.approx(expected.item(), rel=1e-12, abs=1e-15), where
            if ratio in KINKS:  # a subgradient there: each implementation picks its own
                continue
            # d loss / d log-prob = d loss / d ratio * ratio
            assert grad == pytest.approx(d_ratio.item() * ratio, rel=1e-9, abs=1e-15), where
    trainer.args.delta = None
    assert trl_token_loss(trainer, 10.0, -1.0)[0] == pytest.approx(10.0)
    assert verl_dual_clip_loss(torch.tensor(10.0), torch.tensor(-1.0)).item() == pytest.approx(3.0)


def test_delta_must_exceed_the_upper_clip(world):
    config = copy.deepcopy(world["config"])
    config["methods"]["grpo_dual_clip"]["delta"] = 1.25
    with pytest.raises(ConfigError, match=r"grpo_dual_clip: delta 1.25 must be above .* 1.28"):
        resolve_stage(config, "grpo_dual_clip", "math")
    config["methods"]["sdpo_frozen"]["delta"] = 3.0
    with pytest.raises(ConfigError, match="the sdpo trainer takes no key 'delta'"):
        resolve_stage(config, "grpo", "math")


# ----- weight decay --------------------------------------------------------------------------


def decay_groups(trainer, model) -> dict[float, set[str]]:
    """The optimizer's parameter names per weight decay, for `model`."""
    trainer.optimizer = None
    optimizer = trainer.create_optimizer(model)
    names = {id(p): n for n, p in model.named_parameters()}
    groups: dict[float, set[str]] = {}
    for group in optimizer.param_groups:
        found = groups.setdefault(group["weight_decay"], set())
        found.update(names[id(p)] for p in group["params"])
    return {decay: found for decay, found in groups.items() if found}


@pytest.mark.parametrize("method", ["grpo", "sdpo_frozen", "sft"])
def test_weight_decay_on_all_parameters_or_all_but_biases_and_norms(world, method):
    """weight_decay_on all: one decayed group of every parameter (verl's AdamW over
    `module.parameters()`). except_biases_and_norms: transformers' rule, which leaves the
    embedded (Qwen2) model's attention biases and RMSNorm weights, and Qwen3's q/k norms,
    undecayed."""
    for on in ("all", "except_biases_and_norms"):
        config = copy.deepcopy(world["config"])
        config["training"].update(weight_decay=0.01, weight_decay_on=on, kl_probe={"prompts": 0})
        settings = resolve_stage(config, method, "math")
        state = world["dir"] / f"decay-{method}-{on}"
        trainer = build_trainer(settings, tiny_rows(), world["base"], state, 0)
        for model in (trainer.model, tiny_qwen3(64)):
            names = {n for n, _ in model.named_parameters()}
            kept = {n for n in names if n.endswith(".bias") or n.endswith("norm.weight")}
            groups = decay_groups(trainer, model)
            if on == "all":
                assert groups == {0.01: names}
            else:
                assert groups == {0.01: names - kept, 0.0: kept}
        qwen3 = {n for n, _ in tiny_qwen3(64).named_parameters()}
        assert "model.layers.0.self_attn.q_norm.weight" in qwen3
        assert any(n.endswith("q_proj.bias") for n, _ in trainer.model.named_parameters())
