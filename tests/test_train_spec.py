"""Stage settings, the reward wrapper, the collapse monitor and the CLI parser (no training)."""

from __future__ import annotations

import pytest
import tiny_world
import yaml
from tiny_world import tiny_config, tiny_rows

from cptlab.cli import main, parser
from cptlab.errors import ConfigError
from cptlab.train.monitor import CollapseMonitor, completion_stats
from cptlab.train.rewards import VerifierReward, merge_step_stats
from cptlab.train.spec import resolve_stage
from cptlab.train.stage import trl_args
from cptlab.validation import load_config, schema, validate_config
from cptlab.verifiers import VERIFIERS, Verdict, register

BROKEN = "tiny_broken"
if BROKEN not in VERIFIERS:

    @register(BROKEN)
    def _broken(completion: str, row: dict) -> Verdict:
        if "boom" in completion:
            raise RuntimeError("verifier bug")
        return Verdict(0.0, "No final answer.", reason="no \\boxed{} answer")


def test_defaults_follow_the_study():
    grpo = resolve_stage(tiny_config(), "grpo", "math")
    assert grpo.params.as_dict() == {
        "epsilon": 0.2,
        "epsilon_high": 0.28,
        "scale_rewards": "none",
        "loss_type": "dapo",
        "importance_sampling_level": "token",
        "updates_per_generation": 1,
        "vllm_importance_sampling_correction": True,  # TRL's GRPOConfig defaults
        "vllm_importance_sampling_mode": "sequence_mask",
        "vllm_importance_sampling_clip_max": 3.0,
        "vllm_importance_sampling_clip_min": None,
        "beta": 0.0,
        "delta": None,  # no dual clip
    }
    sdpo = resolve_stage(tiny_config(), "sdpo_ema", "math")
    assert sdpo.params.teacher_model_kind == "ema" and sdpo.params.teacher_update_rate == 0.25
    assert sdpo.params.distillation_is_clip == 2.0 and sdpo.params.teacher_anchor == "stage_start"
    assert sdpo.train_benchmark == "tiny_train" and sdpo.steps == 4


def test_method_training_overrides_and_domain_steps():
    config = tiny_config(domain_steps={"math": 7})
    config["methods"]["grpo_fast"] = {"trainer": "grpo", "training": {"learning_rate": 0.5}}
    settings = resolve_stage(config, "grpo_fast", "math")
    assert settings.training.learning_rate == 0.5 and settings.steps == 7
    assert settings.training.kl_probe.prompts == 2  # nested defaults merge


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda c: c["methods"].update(x={"trainer": "ppo"}), "methods.x.trainer"),
        (lambda c: c["methods"]["grpo"].update(teacher_model_kind="ema"), "methods.grpo"),
        (lambda c: c["methods"]["sdpo_ema"].update(ema_rte=0.1), "ema_rte"),
        (lambda c: c["training"].update(steps=0), "training.steps"),
        (lambda c: c["methods"]["sdpo_ema"].update(distillation_alpha=0.5), "reverse KL"),
        (lambda c: c["methods"]["sdpo_live"].update(teacher_anchor="base"), "student teacher"),
        (lambda c: c["training"]["collapse"].update(action="panic"), "collapse.action"),
        (lambda c: c["training"].update(lr_schedule_per="step"), "training.lr_schedule_per"),
        (lambda c: c["training"].update(weight_decay_on="none"), "training.weight_decay_on"),
        (lambda c: c["methods"]["grpo"].update(delta=1.1), "methods.grpo: delta 1.1 must be"),
    ],
)
def test_bad_settings_name_the_key(change, message):
    config = tiny_config()
    change(config)
    method = "sdpo_live" if "student teacher" in message else "sdpo_ema"
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        resolve_stage(config, method, "math")


def test_unknown_method_and_domain():
    with pytest.raises(ConfigError, match="unknown method 'nope'"):
        resolve_stage(tiny_config(), "nope", "math")
    with pytest.raises(ConfigError, match="domain 'logic' has no `train`"):
        resolve_stage(tiny_config(), "grpo", "logic")


def test_embedded_config_methods_build_every_trainer(tmp_path):
    embedded = load_config("config/config.yaml")
    config = {**tiny_config(), "methods": embedded["methods"], "training": embedded["training"]}
    for method in embedded["methods"]:
        settings = resolve_stage(config, method, "math")
        args = trl_args(settings, seed=0, output_dir=tmp_path, anchor_path=None)
        assert not args.bf16 and args.gradient_accumulation_steps >= 1
        if settings.trainer == "sft":  # one reference answer per prompt, its own rate
            assert args.per_device_train_batch_size == 32 and args.learning_rate == 1.0e-3
        else:
            assert args.num_generations == 8 and args.temperature == 1.0
    cot = trl_args(resolve_stage(config, "sdpo_frozen_cot", "math"), 0, tmp_path, None)
    assert cot.teacher_model_kind == "base" and not cot.remove_thinking_from_demonstration


def test_vllm_and_batch_settings_reach_trl(tmp_path):
    config = tiny_config(
        use_vllm=True,
        vllm_mode="server",
        vllm={"server_base_url": "http://127.0.0.1:8000", "gpu_memory_utilization": 0.5},
        per_device_train_batch_size=4,
    )
    for method in ("grpo", "sdpo_ema"):
        args = trl_args(resolve_stage(config, method, "math"), 3, tmp_path, None)
        assert args.use_vllm and args.vllm_mode == "server"
        assert args.vllm_server_base_url == "http://127.0.0.1:8000"
        assert args.per_device_train_batch_size == 4 and args.gradient_accumulation_steps == 4
        assert args.steps_per_generation == 4 and args.seed == 3
    bad = tiny_config(per_device_train_batch_size=3)
    with pytest.raises(ConfigError, match="per_device_train_batch_size 3"):
        trl_args(resolve_stage(bad, "grpo", "math"), 0, tmp_path, None)


def test_reward_never_raises_and_counts_reasons():
    rows = tiny_rows(3, verifier=BROKEN)
    reward = VerifierReward(rows)
    completions = [[{"role": "assistant", "content": text}] for text in ("a", "boom", "c")]
    assert reward(prompts=[None] * 3, completions=completions, row_index=[0, 1, 2]) == [0.0] * 3
    metrics, reasons = merge_step_stats([reward.take_step_stats()])
    assert metrics["verifier/reason_fraction"] == 1.0
    assert reasons == {"no \\boxed{} answer": 2, "verifier tiny_broken raised RuntimeError": 1}
    assert reward.take_step_stats()["n"] == 0  # reset after each step


def test_reward_scores_each_distinct_completion_once(monkeypatch):
    import cptlab.train.rewards as rewards_module

    calls = []

    def counting_score(verifier, text, row, truncated=False):
        calls.append((text, row["id"]))
        return rewards_module.Verdict(float(text == row["answer"]), None, None)

    monkeypatch.setattr(rewards_module, "score", counting_score)
    rows = tiny_rows(2)
    texts = [rows[0]["answer"], "x", rows[0]["answer"], rows[1]["answer"], "x"]
    row_index = [0, 0, 0, 1, 1]
    reward = VerifierReward(rows)
    completions = [[{"role": "assistant", "content": t}] for t in texts]
    got = reward(prompts=[None] * 5, completions=completions, row_index=row_index)
    want = [float(t == rows[i]["answer"]) for t, i in zip(texts, row_index, strict=True)]
    assert got == want and len(reward.last_verdicts) == 5
    # (answer, row 0) and ("x", row 0) repeat; "x" on row 1 is another row's question
    assert sorted(calls) == sorted(
        {(t, rows[i]["id"]) for t, i in zip(texts, row_index, strict=True)}
    )
    assert len(calls) == 4


@pytest.mark.parametrize("reuse", [False, True])
def test_reused_verdicts_serve_the_later_steps_only_with_reuse(monkeypatch, reuse):
    """With `reuse` a (completion, row, truncation) scored in an earlier step is not scored
    again, and gets that step's verdict; a new completion, another row or a truncated copy is
    scored. The step's stats count the reused completions."""
    import cptlab.train.rewards as rewards_module

    calls = []

    def counting_score(verifier, text, row, truncated=False):
        calls.append((text, row["id"], truncated))
        return rewards_module.Verdict(float(text == row["answer"] and not truncated), None, None)

    monkeypatch.setattr(rewards_module, "score", counting_score)
    rows = tiny_rows(2)
    reward = VerifierReward(rows, eos_token_id=9, reuse=reuse)
    right = rows[0]["answer"]

    def step(texts, row_index, ended):
        completions = [[{"role": "assistant", "content": t}] for t in texts]
        ids = [[1, 9] if end else [1, 2] for end in ended]
        got = reward(prompts=None, completions=completions, row_index=row_index, completion_ids=ids)
        return got, reward.take_step_stats()

    first, stats = step([right, "x"], [0, 0], [True, True])
    assert first == [1.0, 0.0] and stats["reused"] == 0 and len(calls) == 2
    # the same two again, the right answer for another row, and a truncated copy of it
    second, stats = step([right, "x", right, right], [0, 0, 1, 0], [True, True, True, False])
    assert second == [1.0, 0.0, 0.0, 0.0]
    assert stats["reused"] == (2 if reuse else 0)
    assert len(calls) == (4 if reuse else 6)
    metrics, _ = merge_step_stats([stats])
    assert metrics["verifier/reused_fraction"] == (0.5 if reuse else 0.0)


def test_collapse_statistics():
    texts = ["\\boxed{1} \\boxed{1} \\boxed{1}", "\\boxed{1} \\boxed{1} \\boxed{1}", "x \\boxed{2}"]
    ids = [[1, 2, 1, 2, 1, 2], [1, 2, 1, 2, 1, 2], [5, 6, 7]]
    stats = completion_stats(texts, ids, [None, None, "bad"], 2, {"boxed": "\\boxed"})
    assert stats["format/boxed/repeated_share"] == pytest.approx(2 / 3)
    assert stats["format/boxed/per_completion"] == pytest.approx(7 / 3)
    assert stats["duplicate_completion_share"] == pytest.approx(1 / 3)
    assert stats["format_violation_rate"] == pytest.approx(1 / 3)
    assert stats["top_ngram_share"] == pytest.approx(6 / 12)
    assert stats["repeated_ngram_share"] == pytest.approx((0.6 + 0.6 + 0) / 3)


def test_collapse_monitor_patience_and_unknown_metric():
    monitor = CollapseMonitor(thresholds={"format_violation_rate": 0.5}, patience=2, action="stop")
    assert monitor.judge(1, {"collapse/format_violation_rate": 0.9}) is None
    assert monitor.judge(2, {"collapse/format_violation_rate": 0.1}) is None
    assert monitor.last_ok_step == 2
    assert monitor.judge(3, {"collapse/format_violation_rate": 0.9}) is None
    assert monitor.judge(4, {"collapse/format_violation_rate": 0.9}) == "stop"
    assert "format_violation_rate=0.9 > 0.5" in monitor.message and monitor.last_ok_step == 2
    with pytest.raises(ValueError, match="unknown metric"):
        CollapseMonitor(thresholds={"boxed_rate": 1.0})


def test_cli_parser():
    args = parser().parse_args(
        "train-stage --config c.yaml --method grpo --domain math --seed 1 --start-from base "
        "--out o --state-dir s --data d.jsonl --threads 2".split()
    )
    assert (args.method, args.seed, args.threads, args.anchor) == ("grpo", 1, 2, None)
    assert callable(args.run)


def test_project_schema_checks_methods_and_training():
    import jsonschema

    project = yaml.safe_load(open("config/config.yaml"))
    validator = jsonschema.Draft202012Validator(schema())
    validator.validate(project)
    bad = {**project, "training": {**project["training"], "stepz": 3}}
    with pytest.raises(jsonschema.ValidationError, match="stepz"):
        validator.validate(bad)
    with pytest.raises(ConfigError, match=r"training.stepz: unknown key"):
        validate_config(bad)


def test_tiny_config_is_a_valid_project_config():
    assert validate_config(tiny_config())["methods"] == tiny_world.TINY_METHODS


def test_cli_exits_3_on_a_stage_error(monkeypatch, capsys):
    import cptlab.train.stage
    from cptlab.train.monitor import NonFiniteError

    def fail(*args, **kwargs):
        raise NonFiniteError("non-finite loss (nan) at step 2")

    monkeypatch.setattr(cptlab.train.stage, "train_stage", fail)
    argv = (
        "train-stage --config config/config.yaml --method grpo --domain math --seed 0 "
        "--start-from base --out o --state-dir s --data d.jsonl".split()
    )
    assert main(argv) == 3
    assert "NonFiniteError: non-finite loss (nan) at step 2" in capsys.readouterr().err
