"""The SDPO subclass: teacher kinds and anchors, masking, teacher prompts, the cheaper loss."""

from __future__ import annotations

import math
import os
from dataclasses import replace

import pytest
import torch
from tiny_world import BENCHMARK, tiny_rows, tiny_world
from transformers import AutoModelForCausalLM, TrainerCallback

from cptlab.checkpoints import load_tokenizer
from cptlab.domains import BENCHMARKS
from cptlab.teacher_prompt import teacher_messages
from cptlab.train.spec import resolve_stage
from cptlab.train.stage import build_trainer
from cptlab.verifiers import Verdict

os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(1)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sdpo")
    config, base, data_dir = tiny_world(folder)
    # A "stage 1" checkpoint: the base with every weight moved.
    stage1 = folder / "stage1"
    model = AutoModelForCausalLM.from_pretrained(base)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.01)
    model.save_pretrained(stage1)
    load_tokenizer(str(base)).save_pretrained(stage1)
    config["methods"].update(
        sdpo_base_anchor={
            "trainer": "sdpo",
            "teacher_model_kind": "frozen",
            "teacher_anchor": "base",
        },
        sdpo_mix={
            "trainer": "sdpo",
            "teacher_model_kind": "frozen",
            "teacher_anchor": "base",
            "teacher_anchor_mix": 0.5,
        },
        sdpo_mask={
            "trainer": "sdpo",
            "teacher_model_kind": "frozen",
            "distillation_token_mask_ratio": 0.3,
        },
        sdpo_feedback={
            "trainer": "sdpo",
            "teacher_model_kind": "frozen",
            "include_environment_feedback": True,
        },
        sdpo_feedback_on_success={
            "trainer": "sdpo",
            "teacher_model_kind": "frozen",
            "include_environment_feedback": True,
            "environment_feedback_on_success": True,
        },
        sdpo_study={
            "trainer": "sdpo",
            "teacher_model_kind": "frozen",
            "teacher_templates": "study",
            "include_environment_feedback": True,
        },  # fmt: skip
    )
    return {"config": config, "base": base, "stage1": stage1, "rows": tiny_rows(), "dir": folder}


def make(world, method, start=None, anchor=None, callbacks=None, **training):
    config = dict(world["config"])
    config["training"] = {**config["training"], **training}
    settings = resolve_stage(config, method, "math")
    from cptlab.train.stage import resolve_anchor

    start = str(start or world["base"])
    anchor_path = resolve_anchor(settings, start, anchor)
    state = world["dir"] / f"state-{method}-{len(os.listdir(world['dir']))}"
    return build_trainer(settings, world["rows"], start, state, 0, anchor_path, callbacks)


def weights(model) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


def same(a, b) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def test_anchor_is_the_original_base_in_stage_2(world):
    base = weights(AutoModelForCausalLM.from_pretrained(world["base"]))
    stage1 = weights(AutoModelForCausalLM.from_pretrained(world["stage1"]))
    anchored = make(world, "sdpo_base_anchor", start=world["stage1"], anchor=str(world["base"]))
    assert same(weights(anchored.teacher_model), base)
    assert same(weights(anchored.model), stage1)
    default = make(world, "sdpo_frozen", start=world["stage1"], anchor=str(world["base"]))
    assert same(weights(default.teacher_model), stage1)  # anchor stage_start
    mixed = make(world, "sdpo_mix", start=world["stage1"], anchor=str(world["base"]))
    for t, b, s in zip(weights(mixed.teacher_model), base, stage1, strict=True):
        torch.testing.assert_close(t, 0.5 * b + 0.5 * s)
    live = make(world, "sdpo_live")
    assert live.teacher_model is live.model


class Snapshots(TrainerCallback):
    """Teacher weights at each step's start and student weights at each step's end (before
    the EMA sync, which is registered after this callback)."""

    def __init__(self):
        self.teacher = None
        self.teacher_begin, self.student_end = [], []

    def on_step_begin(self, args, state, control, **kwargs):
        self.teacher_begin.append(weights(self.teacher))

    def on_step_end(self, args, state, control, model=None, **kwargs):
        self.student_end.append(weights(model))


def test_frozen_teacher_never_changes(world):
    snaps = Snapshots()
    trainer = make(world, "sdpo_frozen", callbacks=[snaps], steps=3, save_steps=100)
    snaps.teacher = trainer.teacher_model
    start = weights(trainer.teacher_model)
    trainer.train()
    assert same(weights(trainer.teacher_model), start)
    assert not same(weights(trainer.model), start)
    assert all(same(t, start) for t in snaps.teacher_begin)
    fractions = [
        r["self_distillation/reprompt_sample_fraction"] for r in trainer.state.log_history[:-1]
    ]
    assert max(fractions) > 0  # the distillation loss was active


def test_ema_teacher_moves_at_its_rate(world):
    snaps = Snapshots()
    trainer = make(world, "sdpo_ema", callbacks=[snaps], steps=3, save_steps=100)
    snaps.teacher = trainer.teacher_model
    trainer.train()
    rate = trainer.args.teacher_update_rate
    assert rate == 0.25
    final = weights(trainer.teacher_model)
    begins = [*snaps.teacher_begin[1:], final]
    for k, after in enumerate(begins):
        for t_after, t_before, s in zip(
            after, snaps.teacher_begin[k], snaps.student_end[k], strict=True
        ):
            torch.testing.assert_close(t_after, (1 - rate) * t_before + rate * s)
    assert not same(final, snaps.teacher_begin[0])


def _group(tokenizer, texts: list[str]) -> dict:
    ids = [
        tokenizer(t, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        for t in texts
    ]
    width = max(map(len, ids))
    pad = tokenizer.pad_token_id
    return {
        "completion_ids": torch.tensor([i + [pad] * (width - len(i)) for i in ids]),
        "completion_mask": torch.tensor([[1] * len(i) + [0] * (width - len(i)) for i in ids]),
    }


def _teacher_prompt(trainer, context, row: int) -> str:
    width = context["teacher_input_ids"].size(1) - trainer._last_completion_width
    ids = context["teacher_input_ids"][row, :width]
    mask = context["teacher_attention_mask"][row, :width].bool()
    return trainer.processing_class.decode(ids[mask])


def _build(trainer, texts, rewards):
    tokenizer = trainer.processing_class
    output = _group(tokenizer, texts)
    trainer._last_completion_width = output["completion_ids"].size(1)
    prompt = trainer.train_dataset[0]["prompt"]
    trainer.model.train()
    return prompt, trainer.teacher_context_builder.build(
        output, [prompt] * len(texts), torch.tensor(rewards), feedbacks=None
    )


@pytest.mark.parametrize("method, keep", [("sdpo_frozen", False), ("sdpo_frozen_cot", True)])
def test_teacher_prompt_keeps_or_strips_the_chain_of_thought(world, method, keep):
    trainer = make(world, method)
    demo = "<think>add the tens</think> \\boxed{5}"
    prompt, context = _build(trainer, [demo, "x", "y", "z"], [1.0, 0.0, 0.0, 0.0])
    tokenizer = trainer.processing_class
    expected = tokenizer.apply_chat_template(
        teacher_messages(prompt, demo, keep_thinking=keep),
        tokenize=False,
        add_generation_prompt=True,
    )
    assert _teacher_prompt(trainer, context, 1) == expected
    assert ("<think>add the tens</think>" in expected) == keep
    assert _teacher_prompt(trainer, context, 0) == tokenizer.apply_chat_template(
        prompt, tokenize=False, add_generation_prompt=True
    )  # the only success has no other demonstration: not reprompted
    assert context["self_distillation_mask"].tolist() == [0.0, 1.0, 1.0, 1.0]


@pytest.mark.parametrize("method, keep", [("sdpo_frozen", False), ("sdpo_frozen_cot", True)])
def test_sdpo_0_also_strips_the_benchmarks_own_reasoning(world, method, keep, monkeypatch):
    """Where the training benchmark's format reasons outside `<think>` (`Benchmark.reasoning`,
    the embedded domains), SDPO_0's demonstrations lose that reasoning too; SDPO_0^CoT's keep
    it."""
    reasoned = replace(BENCHMARKS[BENCHMARK], reasoning=r"^.*?(?=\\boxed\{)")
    monkeypatch.setitem(BENCHMARKS, BENCHMARK, reasoned)
    trainer = make(world, method)
    demo = "<think>add</think> the tens give 5, so \\boxed{5}"
    prompt, context = _build(trainer, [demo, "x", "y", "z"], [1.0, 0.0, 0.0, 0.0])
    shown = demo if keep else "\\boxed{5}"
    assert _teacher_prompt(trainer, context, 1) == trainer.processing_class.apply_chat_template(
        teacher_messages(prompt, shown, keep_thinking=True),
        tokenize=False,
        add_generation_prompt=True,
    )


def test_verifier_feedback_reaches_the_teacher_prompt(world):
    trainer = make(world, "sdpo_feedback")
    reward = trainer.reward_funcs[0]
    reward.last_verdicts = [
        Verdict(0.0, "The answer 7 is incorrect."),
        Verdict(1.0, "Correct."),
        Verdict(0.0, "No final answer."),
        Verdict(0.0, "Too long."),
    ]
    prompt, context = _build(trainer, ["a", "\\boxed{5}", "c", "d"], [0.0, 1.0, 0.0, 0.0])
    expected = trainer.processing_class.apply_chat_template(
        teacher_messages(prompt, "\\boxed{5}", feedback="The answer 7 is incorrect."),
        tokenize=False,
        add_generation_prompt=True,
    )
    assert _teacher_prompt(trainer, context, 0) == expected
    assert "Correct." not in _teacher_prompt(trainer, context, 1)  # successes get no feedback


def test_feedback_on_a_successful_rollout_is_an_option(world):
    """The study keeps every rollout's feedback (ray_trainer.py `_collect_feedback`): a correct
    but truncated math answer with no successful sibling is reprompted with the truncation
    text. `environment_feedback_on_success` does so; by default a success gets none."""
    truncated = "Your response was truncated because it exceeded the maximum length."
    for method, shown in (("sdpo_feedback", False), ("sdpo_feedback_on_success", True)):
        trainer = make(world, method)
        reward = trainer.reward_funcs[0]
        reward.last_verdicts = [Verdict(1.0, truncated)] + [Verdict(0.0, "")] * 3
        prompt, context = _build(trainer, ["\\boxed{5}", "b", "c", "d"], [1.0, 0.0, 0.0, 0.0])
        with_feedback = trainer.processing_class.apply_chat_template(
            teacher_messages(prompt, None, feedback=truncated),
            tokenize=False,
            add_generation_prompt=True,
        )
        assert (_teacher_prompt(trainer, context, 0) == with_feedback) == shown, method
        assert truncated not in _teacher_prompt(trainer, context, 1)
    # the reward tells truncation by the checkpoint tokenizer's end token (rewards.py)
    assert reward.eos_token_id == trainer.processing_class.eos_token_id is not None


def test_the_study_teacher_templates_reach_the_teacher_prompt(world):
    """The study's templates (its actor.yaml block scalars): one blank line between the
    demonstration and the instruction, none after it; TRL's defaults have two and one."""
    trainer = make(world, "sdpo_study")
    trainer.reward_funcs[0].last_verdicts = [Verdict(0.0, "Wrong."), Verdict(1.0, "")] * 2
    prompt, context = _build(trainer, ["a", "\\boxed{5}", "c", "d"], [0.0, 1.0, 0.0, 0.0])
    messages = teacher_messages(prompt, "\\boxed{5}", feedback="Wrong.", templates="study")
    assert messages[-1]["content"].endswith(
        "\nCorrect solution:\n\n\\boxed{5}\n"
        "The following is feedback from your unsuccessful earlier attempt:\n\nWrong.\n\n"
        "Correctly solve the original question."
    )
    expected = trainer.processing_class.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True
    )
    assert _teacher_prompt(trainer, context, 0) == expected
    trl = teacher_messages(prompt, "\\boxed{5}")[-1]["content"]
    assert trl.endswith("\\boxed{5}\n\n\n\nCorrectly solve the original question.\n")


def stage1_sdpo_trainer(world, name: str, **keys):
    """The trainer of a new SDPO method `name` (its entry: `keys`) from stage 1, anchored at
    the base."""
    world["config"]["methods"][name] = {"trainer": "sdpo", **keys}
    return make(world, name, start=world["stage1"], anchor=str(world["base"]))


def _batch(trainer, rows: int, length: int, active: list[int]) -> dict:
    g = torch.Generator().manual_seed(0)
    vocab = trainer.model.config.vocab_size - 10
    prompt = torch.randint(5, vocab, (rows, 6), generator=g)
    completion = torch.randint(5, vocab, (rows, length), generator=g)
    mask = torch.ones(rows, length, dtype=torch.long)
    for r in range(rows):  # ragged completions, right-padded
        mask[r, length - r :] = 0
    teacher_prompt = torch.randint(5, vocab, (rows, 10), generator=g)
    return {
        "prompt_ids": prompt,
        "prompt_mask": torch.ones_like(prompt),
        "completion_ids": completion,
        "completion_mask": mask,
        "teacher_input_ids": torch.cat([teacher_prompt, completion], dim=1),
        "teacher_attention_mask": torch.cat([torch.ones_like(teacher_prompt), mask], dim=1),
        "self_distillation_mask": torch.tensor(active, dtype=torch.float),
        "advantages": torch.zeros(rows),
    }


def test_token_mask_drops_the_configured_share(world):
    trainer = make(world, "sdpo_mask")
    trainer.model.train()
    inputs = _batch(trainer, rows=8, length=80, active=[1] * 8)
    eligible = inputs["completion_mask"].sum().item()
    masks = []
    for step in (0, 0, 1):
        trainer.state.global_step = step
        with torch.no_grad():
            out = trainer._compute_teacher_student_logits(
                trainer.model, trainer.teacher_model, inputs
            )
        masks.append(out.loss_mask)
        assert out.loss_mask.sum().item() < eligible
        assert ((out.loss_mask > 0) <= (inputs["completion_mask"] > 0)).all()
        dropped = 1 - out.loss_mask.sum().item() / eligible
        assert dropped == pytest.approx(0.3, abs=0.07)
    assert torch.equal(masks[0], masks[1]) and not torch.equal(masks[0], masks[2])
    assert trainer._metrics["train"]["self_distillation/token_mask_kept_fraction"]


def test_skipping_inactive_rows_keeps_loss_and_gradients(world):
    trainer = make(world, "sdpo_frozen")
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    inputs = _batch(trainer, rows=6, length=12, active=[0, 1, 0, 1, 1, 0])
    results = []
    for skip in (False, True):
        trainer.args.skip_inactive_rows = skip
        trainer.model.zero_grad()
        loss = trainer.compute_loss(trainer.model, inputs)
        loss.backward()
        results.append((loss.detach(), [p.grad.clone() for p in trainer.model.parameters()]))
    (loss_all, grads_all), (loss_skip, grads_skip) = results
    assert loss_all.item() != 0
    torch.testing.assert_close(loss_skip, loss_all, rtol=1e-5, atol=1e-7)
    for a, b in zip(grads_skip, grads_all, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-7)
    # No active row: a zero loss with zero (not missing) gradients, as TRL's full forward gives.
    trainer.model.zero_grad()
    idle = _batch(trainer, rows=6, length=12, active=[0] * 6)
    loss = trainer.compute_loss(trainer.model, idle)
    loss.backward()
    assert loss.item() == 0
    assert all(p.grad is not None and not p.grad.any() for p in trainer.model.parameters())


@pytest.mark.parametrize(
    "mode",
    [
        {"distillation_mode": "full_logits", "distillation_alpha": 0.5},
        {"distillation_mode": "topk_logits", "distillation_topk": 8, "distillation_add_tail": True},
        {
            "distillation_weight": 0.5,
            "include_environment_feedback": True,
            "distillation_token_mask_ratio": 0.5,
        },
    ],
)
def test_other_distillation_objectives_train(world, mode):
    world["config"]["methods"]["sdpo_mode"] = {
        "trainer": "sdpo",
        "teacher_model_kind": "ema",
        **mode,
    }
    trainer = make(world, "sdpo_mode", steps=2, save_steps=100)
    trainer.train()
    last = [r for r in trainer.state.log_history if "loss" in r][-1]
    assert last["self_distillation/reprompt_sample_fraction"] > 0
    assert torch.isfinite(torch.tensor(last["loss"])) and last["grad_norm"] > 0


@pytest.mark.parametrize("side", ["left", "right", "error"])
def test_long_teacher_prompts_are_cut_on_the_configured_side(world, side):
    world["config"]["methods"]["sdpo_cut"] = {
        "trainer": "sdpo",
        "teacher_model_kind": "frozen",
        "reprompt_truncation": side,
    }
    trainer = make(world, "sdpo_cut")
    full = _teacher_prompt(trainer, _build(trainer, ["a", "\\boxed{5}"] * 2, [0, 1, 0, 0])[1], 0)
    tokenizer = trainer.processing_class
    ids = tokenizer(full, add_special_tokens=False)["input_ids"]
    trainer.args.max_reprompt_len = len(ids) - 5
    if side == "error":
        with pytest.raises(ValueError, match=f"has {len(ids)} tokens, over max_reprompt_len"):
            _build(trainer, ["a", "\\boxed{5}"] * 2, [0, 1, 0, 0])
        return
    cut = _teacher_prompt(trainer, _build(trainer, ["a", "\\boxed{5}"] * 2, [0, 1, 0, 0])[1], 0)
    kept = ids[5:] if side == "left" else ids[:-5]  # left: TRL's (the end); right: the study's
    assert tokenizer(cut, add_special_tokens=False)["input_ids"] == kept


def test_trust_region_teacher_interpolates_reference_and_student_logits(world):
    """The SDPO reference's trust-region teacher: lerp(reference, student, mix) of the logits,
    both models on the teacher's input; mix 0 is the frozen reference."""
    trainer = stage1_sdpo_trainer(
        world, "sdpo_trust", teacher_model_kind="trust_region", teacher_anchor="base",
        teacher_trust_region_mix=0.25,
    )  # fmt: skip
    assert (
        trainer.args.teacher_model_kind == "base" and trainer.args.teacher_trust_region_mix == 0.25
    )
    inputs = _batch(trainer, rows=3, length=7, active=[1, 1, 1])
    with torch.no_grad():
        out = trainer._compute_teacher_student_logits(trainer.model, trainer.teacher_model, inputs)
        width = inputs["completion_ids"].size(1)
        reference = trainer._forward_logits(
            trainer.teacher_model,
            inputs["teacher_input_ids"],
            inputs["teacher_attention_mask"],
            width,
        )
        student = trainer._forward_logits(
            trainer.model, inputs["teacher_input_ids"], inputs["teacher_attention_mask"], width
        )
    assert not torch.allclose(reference, student)  # the stage-1 student differs from the base
    torch.testing.assert_close(out.teacher_logits, 0.75 * reference + 0.25 * student)


def test_rollout_weights_multiply_the_distillation_loss(world):
    """verl's SDPO loss with `rollout_is`: each token's loss times its rollout weight, then the
    per-sequence token mean; weights of 1 give TRL's loss."""
    world["config"]["methods"]["sdpo_topk"] = {
        "trainer": "sdpo",
        "teacher_model_kind": "frozen",
        "distillation_mode": "topk_logits",
        "distillation_topk": 8,
        "distillation_add_tail": True,
        "distillation_alpha": 0.5,
    }
    trainer = make(world, "sdpo_topk", start=world["stage1"], anchor=str(world["base"]))
    trainer.model.train()
    inputs = _batch(trainer, rows=4, length=9, active=[1, 1, 1, 1])
    with torch.no_grad():
        logits = trainer._compute_teacher_student_logits(
            trainer.model, trainer.teacher_model, inputs
        )
    trl = trainer._compute_self_distillation_loss(trainer.model, inputs, logits)
    ones = {**inputs, "rollout_is_weights": torch.ones(4, 9)}
    torch.testing.assert_close(
        trainer._compute_self_distillation_loss(trainer.model, ones, logits), trl
    )
    weights = torch.rand(4, 9, generator=torch.Generator().manual_seed(1)) * 2
    per_token = trainer._compute_self_distillation_loss
    weighted = per_token(trainer.model, {**inputs, "rollout_is_weights": weights}, logits)
    # the same loss computed by hand from TRL's per-token top-k loss
    from trl.experimental.sdpo.loss_utils import compute_topk_self_distillation_loss

    tokens = compute_topk_self_distillation_loss(
        logits.student_logits,
        logits.teacher_logits,
        distillation_topk=8,
        distillation_alpha=0.5,
        distillation_add_tail=True,
    )
    mask = logits.loss_mask
    expected = ((tokens * weights * mask).sum(-1) / mask.sum(-1)).mean()
    torch.testing.assert_close(weighted, expected)
    assert not torch.allclose(weighted, trl)


def test_rollout_weights_come_from_the_training_model_before_the_update(world):
    """With vLLM rollouts (not runnable on CPU CI), sample_rollouts stores these weights: the
    training model's log-probs (a no-grad forward when updates are on-policy) against the
    sampler's, per token, clamped at 2.0 as the study does."""
    world["config"]["methods"]["sdpo_is"] = {
        "trainer": "sdpo",
        "teacher_model_kind": "frozen",
        "vllm_importance_sampling_mode": "token_truncate",
        "vllm_importance_sampling_clip_max": 2.0,
    }
    trainer = make(world, "sdpo_is")
    batch = _batch(trainer, rows=3, length=5, active=[1, 1, 1])
    from trl.trainer.utils import selective_log_softmax

    with torch.no_grad():
        logits = trainer._forward_logits(
            trainer.model,
            torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1),
            torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1),
            5,
        )
        own = selective_log_softmax(logits, batch["completion_ids"])
    lengths = batch["completion_mask"].sum(1).tolist()
    same_sampler = [own[i, :n].tolist() for i, n in enumerate(lengths)]
    weights = trainer._rollout_weights(batch, same_sampler)
    torch.testing.assert_close(weights, torch.ones(3, 5))
    unlikely = [[x - math.log(3) for x in row] for row in same_sampler]  # ratio 3 -> clamped
    weights = trainer._rollout_weights(batch, unlikely)
    assert weights[batch["completion_mask"].bool()].tolist() == [2.0] * sum(lengths)


@pytest.mark.parametrize("method, kept", [("sdpo_study", False), ("sdpo_frozen", True)])
def test_the_study_also_strips_reasoning_without_its_opening_tag(world, method, kept):
    """The study's second rule (ray_trainer.py): text up to a `</think>` with no opening tag is
    reasoning; TRL's templates keep TRL's single rule."""
    trainer = make(world, method)
    trainer.reward_funcs[0].last_verdicts = [Verdict(0.0, "Wrong."), Verdict(1.0, "")] * 2
    demo = "add the tens</think> \\boxed{5}"
    prompt, context = _build(trainer, ["a", demo, "c", "d"], [0.0, 1.0, 0.0, 0.0])
    text = _teacher_prompt(trainer, context, 0)
    assert ("add the tens</think>" in text) == kept and "\\boxed{5}" in text
    templates = "study" if method == "sdpo_study" else "trl"
    feedback = "Wrong." if method == "sdpo_study" else None
    expected = teacher_messages(prompt, demo, feedback=feedback, templates=templates)
    assert text == trainer.processing_class.apply_chat_template(
        expected, tokenize=False, add_generation_prompt=True
    )


def test_the_full_logit_loss_at_the_kept_positions_is_trls(world):
    """The full-logit divergence computed only where the loss keeps a token (not at padded
    positions or inactive rows): TRL's loss and gradient, up to float rounding."""
    from trl.experimental.sdpo import SDPOTrainer

    trainer = stage1_sdpo_trainer(
        world, "sdpo_jsd", teacher_model_kind="frozen", distillation_mode="full_logits",
        distillation_alpha=0.5,
    )  # fmt: skip
    trainer.model.train()
    inputs = _batch(trainer, rows=4, length=9, active=[1, 0, 1, 1])
    logits = trainer._compute_teacher_student_logits(trainer.model, trainer.teacher_model, inputs)
    assert trainer.args.distillation_mode == "full_logits"
    assert (logits.loss_mask == 0).any()  # padding and an inactive row to skip
    student = logits.student_logits.detach().requires_grad_()
    losses, grads = [], []
    trls = SDPOTrainer._compute_self_distillation_loss.__get__(trainer)
    for method in (trainer._compute_self_distillation_loss, trls):
        student.grad = None
        logits.student_logits = student
        loss = method(trainer.model, inputs, logits)
        loss.backward()
        losses.append(loss.detach())
        grads.append(student.grad.clone())
    torch.testing.assert_close(losses[0], losses[1])
    torch.testing.assert_close(grads[0], grads[1])
    assert grads[0].abs().sum() > 0
