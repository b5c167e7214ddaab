"""Every forward of a training step within its memory: no forward of the student, the teacher or
the reference runs over more rows than the micro-batch (`per_device_train_batch_size`, the loss)
or the log-probability chunk (`log_prob_micro_batch_size_per_device`, the rollout batch's
no-grad log-probabilities: GRPO's old and reference ones, SDPO's rollout weights and old ones,
the KL probe). At the paper's sizes one row's logits are 2.5 GB, so a forward over a process's
32-row rollout batch would not fit a GPU.

The rollouts are vLLM's, as in config/paper.yaml, from TRL's own colocated generation around a
stand-in engine (tests/vllm_stand_in.py): the weight sync, the sampled tokens' log-probabilities
and the importance weights all run. Chunking changes no number beyond float rounding."""

from __future__ import annotations

import json
import os
from collections import defaultdict

import pytest
import torch
import vllm_stand_in
from tiny_world import one_step_world, tiny_rows

from cptlab.train.probe import _token_logps
from cptlab.train.spec import resolve_stage
from cptlab.train.stage import build_trainer

os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(1)

MICRO_BATCH = 4  # rows per forward of the loss
CHUNK = 2  # rows per no-grad log-probability forward
ROLLOUT_ROWS = 16  # 4 prompts x 4 rollouts, one process
PROBE_ROWS = 4

# The paper's rollout correction (token_truncate at 2.0); GRPO with a KL term has a reference.
CORRECTION = {
    "vllm_importance_sampling_mode": "token_truncate",
    "vllm_importance_sampling_clip_max": 2.0,
}
METHODS = {
    "grpo": {"trainer": "grpo", "beta": 0.04},
    "sdpo_frozen": {"trainer": "sdpo", "teacher_model_kind": "frozen"},
    "sdpo_ema": {"trainer": "sdpo", "teacher_model_kind": "ema"},
    "sdpo_student": {"trainer": "sdpo", "teacher_model_kind": "student"},
    "sdpo_trust_region": {
        "trainer": "sdpo",
        "teacher_model_kind": "trust_region",
        "teacher_trust_region_mix": 0.25,
    },
}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    world = one_step_world(tmp_path_factory.mktemp("forward_rows"))
    methods = {name: {**m, **CORRECTION} for name, m in METHODS.items()}
    for name in list(methods):  # two updates per rollout batch: the old log-probs run too
        methods[f"{name}_2"] = {**methods[name], "updates_per_generation": 2}
    world["config"]["methods"] = methods
    world["config"]["training"].update(
        steps=1,
        prompts_per_step=4,
        num_generations=4,
        per_device_train_batch_size=MICRO_BATCH,
        log_prob_micro_batch_size_per_device=CHUNK,
        use_vllm=True,
        vllm_mode="colocate",
        kl_probe={"prompts": PROBE_ROWS, "max_tokens": 8, "every": 1},
    )
    return world


@pytest.fixture
def stand_in_vllm(monkeypatch):
    environment = dict(os.environ)  # TRL's engine start writes RANK, MASTER_PORT, ...
    vllm_stand_in.install(monkeypatch)
    yield
    os.environ.clear()
    os.environ.update(environment)


def record_forwards(trainer) -> list[tuple[str, int, bool]]:
    """(model, rows, inside the loss) of every forward of the trainer's models from now on: a
    hook on each model's backbone, which every forward goes through (whole-row, shared-prompt
    or fused-head)."""
    calls: list[tuple[str, int, bool]] = []
    in_loss = [False]
    models = {"student": trainer.model}
    teacher = getattr(trainer, "teacher_model", None)
    if teacher is not None and teacher is not trainer.model:
        models["teacher"] = trainer.accelerator.unwrap_model(teacher)
    if getattr(trainer, "ref_model", None) is not None:
        models["reference"] = trainer.accelerator.unwrap_model(trainer.ref_model)
    for name, model in models.items():
        backbone = getattr(model, model.base_model_prefix)

        def hook(module, args, kwargs, name=name):
            ids = kwargs.get("input_ids", args[0] if args else None)
            calls.append((name, ids.size(0), in_loss[0]))

        backbone.register_forward_pre_hook(hook, with_kwargs=True)
    compute_loss = trainer.compute_loss

    def loss(*args, **kwargs):
        in_loss[0] = True
        try:
            return compute_loss(*args, **kwargs)
        finally:
            in_loss[0] = False

    trainer.compute_loss = loss
    return calls


# The paper's updates per rollout batch (GRPO 4, here 2; SDPO 1), and SDPO's old log-probs.
CASES = ["grpo_2", "sdpo_frozen", "sdpo_ema", "sdpo_student", "sdpo_trust_region", "sdpo_ema_2"]


@pytest.mark.parametrize("method", CASES)
def test_every_forward_of_a_step_runs_within_its_rows(world, stand_in_vllm, method):
    """With one update per rollout batch SDPO's rollout weights take their own no-grad forward;
    with two, TRL's old log-probabilities, which the weights reuse."""
    settings = resolve_stage(world["config"], method, "math")
    state = world["dir"] / method
    log = state / "train_log.jsonl"
    trainer = build_trainer(settings, tiny_rows(), world["base"], state, 0, log_path=log)
    calls = record_forwards(trainer)
    trainer.train()

    rows = defaultdict(list)
    for name, count, in_loss in calls:
        rows[(name, "loss" if in_loss else "no-grad log-probs")].append(count)
    summary = {f"{name} ({where})": counts for (name, where), counts in rows.items()}
    loss_rows = [count for name, count, in_loss in calls if in_loss]
    other_rows = [count for name, count, in_loss in calls if not in_loss]
    assert max(loss_rows) <= MICRO_BATCH and max(other_rows) <= CHUNK, summary
    # The rollout batch's log-probabilities were computed once, and the probe's at the log
    # line; GRPO's reference log-probabilities too.
    student = sum(rows[("student", "no-grad log-probs")])
    assert student == ROLLOUT_ROWS + PROBE_ROWS, summary
    if settings.trainer == "grpo":
        assert sum(rows[("reference", "no-grad log-probs")]) == ROLLOUT_ROWS, summary
    elif settings.params.teacher_model_kind != "student":
        assert rows[("teacher", "loss")], summary
    # vLLM's side ran: a weight sync before the rollouts, 16 requests, importance weights.
    engine = trainer.vllm_generation.llm
    assert engine.loaded and engine.prefix_cache_resets == 1 and engine.requests == ROLLOUT_ROWS
    line = json.loads(log.read_text().splitlines()[0])
    assert 0 < line["sampling/importance_sampling_ratio/mean"] <= 2.0, line


def batch(trainer, rows: int = 6, length: int = 7) -> dict:
    g = torch.Generator().manual_seed(0)
    vocab = trainer.model.config.vocab_size - 10
    prompt = torch.randint(5, vocab, (rows, 5), generator=g)
    prompt_mask = torch.ones_like(prompt)
    prompt_mask[1, :2] = 0  # left-padded prompts
    completion = torch.randint(5, vocab, (rows, length), generator=g)
    mask = torch.ones(rows, length, dtype=torch.long)
    for r in range(rows):  # ragged completions, right-padded
        mask[r, length - r :] = 0
    return {
        "prompt_ids": prompt,
        "prompt_mask": prompt_mask,
        "completion_ids": completion,
        "completion_mask": mask,
    }


def plain_trainer(world, method: str):
    """The method's trainer with HF rollouts (none sampled here), float32 as the embedded
    default."""
    config = json.loads(json.dumps(world["config"]))
    config["training"].update(use_vllm=False, kl_probe={"prompts": 0})
    settings = resolve_stage(config, method, "math")
    state = world["dir"] / f"plain-{method}"
    return build_trainer(settings, tiny_rows(), world["base"], state, 0)


def test_sdpos_chunked_log_probabilities_are_the_whole_batchs(world):
    """One row per forward through the fused head gives what TRL computes from the whole
    batch's logits, up to float rounding, at every completion token."""
    from trl.experimental.sdpo import SDPOTrainer
    from trl.trainer.utils import selective_log_softmax

    trainer = plain_trainer(world, "sdpo_frozen")
    trainer.log_prob_batch_size = 1
    b = batch(trainer)
    with torch.no_grad():
        logits = SDPOTrainer._forward_logits(
            trainer,
            trainer.model,
            torch.cat([b["prompt_ids"], b["completion_ids"]], dim=1),
            torch.cat([b["prompt_mask"], b["completion_mask"]], dim=1),
            b["completion_ids"].size(1),
        )
        whole = selective_log_softmax(logits, b["completion_ids"])
    chunked = trainer.completion_logps(**b)
    kept = b["completion_mask"].bool()
    torch.testing.assert_close(chunked[kept], whole[kept])
    assert (chunked[~kept] == 0).all()


def test_grpos_chunked_log_probabilities_are_trls(world):
    trainer = plain_trainer(world, "grpo_2")
    b = batch(trainer)
    args = (
        trainer.model,
        torch.cat([b["prompt_ids"], b["completion_ids"]], dim=1),
        torch.cat([b["prompt_mask"], b["completion_mask"]], dim=1),
        b["completion_ids"].size(1),
    )
    with torch.no_grad():
        trainer.log_prob_batch_size = None  # TRL's chunk, the whole batch here
        whole, _, _ = trainer._get_per_token_logps_and_entropies(*args, batch_size=6)
        trainer.log_prob_batch_size = 1
        chunked, _, _ = trainer._get_per_token_logps_and_entropies(*args, batch_size=6)
    torch.testing.assert_close(chunked, whole)


def test_the_probes_chunked_log_probabilities_are_the_whole_batchs(world):
    trainer = plain_trainer(world, "grpo_2")
    b = batch(trainer)
    ids = torch.cat([b["prompt_ids"], b["completion_ids"]], dim=1)
    mask = torch.cat([b["prompt_mask"], b["completion_mask"]], dim=1)
    with torch.no_grad():
        whole = _token_logps(trainer.model, ids, mask, 7)
        chunked = _token_logps(trainer.model, ids, mask, 7, rows=1)
    torch.testing.assert_close(chunked, whole)


def test_the_logged_entropy_in_chunks_is_the_whole_tensors():
    """SDPO's entropy metric, a few hundred positions of float32 logits at a time, equals the
    one computed over the whole tensor up to float rounding."""
    from cptlab.train.sdpo import ENTROPY_POSITIONS, mean_entropy

    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, ENTROPY_POSITIONS // 2 + 5, 50, generator=g).to(torch.bfloat16)
    mask = torch.ones(logits.shape[:2], dtype=torch.long)
    mask[1, 40:] = 0
    logp = torch.log_softmax(logits.float(), dim=-1)
    whole = (-(logp.exp() * logp).sum(-1) * mask).sum() / mask.sum()
    torch.testing.assert_close(mean_entropy(logits, mask), whole)
