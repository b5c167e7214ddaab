"""The memory model (cptlab.memory, `cptlab plan-memory`) on known numbers, against what autograd
and the frameworks keep, and its verdict on config/paper.yaml. The measurement it is checked
against in the rehearsal: tests/test_peak_memory.py."""

from __future__ import annotations

import gc
import json
import sys
import types
import weakref
from pathlib import Path

import pytest
import torch

from cptlab.cli import main
from cptlab.memory import (
    EVAL_VLLM_GPU_MEMORY_UTILIZATION,
    GIB,
    TEACHER_COPY,
    TRL_VLLM_GPU_MEMORY_UTILIZATION,
    Forward,
    measured_shape,
    plan,
    step_shape,
    training_memory,
)
from cptlab.model_sizes import PUBLISHED_ARCHITECTURES, Architecture
from cptlab.train.spec import resolve_stage
from cptlab.train.teachers import TEACHER_KINDS
from cptlab.validation import load_config

QWEN3_4B = Architecture.from_config(PUBLISHED_ARCHITECTURES["Qwen/Qwen3-4B"])
PAPER = load_config("config/paper.yaml")


def tiny_arch(**shape) -> tuple[Architecture, object]:
    """A seeded Qwen3ForCausalLM of `shape` and its Architecture (read from its config)."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config(attn_implementation="sdpa", **shape)
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(config)
    return Architecture.from_config(config.to_dict()), model


def test_qwen3_4b_has_its_published_parameter_count():
    # The model card: 4.0 B parameters, 3.6 B without the (tied) embeddings.
    assert QWEN3_4B.parameters == 4_022_468_096
    assert QWEN3_4B.parameters - QWEN3_4B.vocab * QWEN3_4B.hidden == 3_633_511_936
    assert QWEN3_4B.kv_cache_per_token(2) == 2 * 36 * 8 * 128 * 2  # 144 KiB a token in bf16


@pytest.mark.parametrize("family", ["qwen2", "qwen3"])
@pytest.mark.parametrize("tied", [True, False])
def test_the_parameter_count_is_the_models(family, tied):
    import transformers

    names = {"qwen2": "Qwen2", "qwen3": "Qwen3"}
    config = getattr(transformers, f"{names[family]}Config")(
        vocab_size=97, hidden_size=48, intermediate_size=80, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=tied,
    )  # fmt: skip
    model = getattr(transformers, f"{names[family]}ForCausalLM")(config)
    assert Architecture.from_config(config.to_dict()).parameters == model.num_parameters()


def saved_bytes(model, rows: int, tokens: int, dtype) -> int:
    """Bytes of the distinct storages autograd still keeps for the backward when one forward
    ends (its parameters excluded), on a left-padded batch as training forwards it."""
    model = model.to(dtype).train()
    ids = torch.randint(0, model.config.vocab_size, (rows, tokens))
    mask = torch.ones(rows, tokens, dtype=torch.long)
    mask[0, :3] = 0
    params = {id(p.untyped_storage()) for p in model.parameters()}
    kept: dict[int, weakref.ref] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if id(storage) not in params:
            kept[id(storage)] = weakref.ref(storage)
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(input_ids=ids, attention_mask=mask, use_cache=False, logits_to_keep=1)
    gc.collect()
    alive = [ref() for ref in kept.values()]
    del out
    return sum(storage.nbytes() for storage in alive if storage is not None)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("heads, kv_heads, head_dim", [(4, 2, 8), (2, 1, 16), (2, 2, 16)])
def test_a_layers_activations_are_what_autograd_keeps(dtype, heads, kv_heads, head_dim):
    shape = dict(vocab_size=64, hidden_size=48, intermediate_size=80, num_attention_heads=heads,
                 num_key_value_heads=kv_heads, head_dim=head_dim)  # fmt: skip
    rows, tokens, b = 2, 40, torch.tensor([], dtype=dtype).element_size()
    two, one = (saved_bytes(tiny_arch(num_hidden_layers=n, **shape)[1], rows, tokens, dtype)
                for n in (2, 1))  # fmt: skip
    arch, _ = tiny_arch(num_hidden_layers=1, **shape)
    assert two - one == arch.layer_activations(rows, tokens, b)
    # outside the layers: at most what the model says (its rotary tables are shared)
    assert one - arch.layer_activations(rows, tokens, b) <= arch.outside_layers(rows, tokens, b)


@pytest.mark.parametrize(
    "hidden, mlp, heads, kv_heads, head_dim",
    [(64, 128, 2, 1, 32), (256, 972, 32, 8, 8), (48, 80, 4, 4, 12)],
)
def test_a_layer_without_gradient_holds_its_larger_moment(hidden, mlp, heads, kv_heads, head_dim):
    """The peak of a one-layer forward without gradient, counted by TorchBytes, is the layer's
    (its embedding, rotary tables and ids add under 2 % here). In float32: bf16's no-gradient
    SDPA needs AVX-512 kernels on CPUs with AMX (#49), the same count there."""
    from cptlab.train.peak_memory import TorchBytes

    arch, model = tiny_arch(vocab_size=64, hidden_size=hidden, intermediate_size=mlp,
                            num_hidden_layers=1, num_attention_heads=heads,
                            num_key_value_heads=kv_heads, head_dim=head_dim)  # fmt: skip
    ids = torch.randint(0, 64, (8, 300))
    mask = torch.ones(8, 300, dtype=torch.long)
    mask[0, :3] = 0
    count = TorchBytes()
    with torch.no_grad(), count:
        model.train()(input_ids=ids, attention_mask=mask, use_cache=False, logits_to_keep=1)
    assert 1.0 <= count.peak / arch.no_grad_layer(8, 300, 4) < 1.02


def test_checkpointing_keeps_each_layers_input():
    shape = dict(vocab_size=64, hidden_size=48, intermediate_size=80, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=8)  # fmt: skip
    kept = []
    for layers in (1, 2, 3):
        _, model = tiny_arch(num_hidden_layers=layers, **shape)
        model.gradient_checkpointing_enable({"use_reentrant": False})
        kept.append(saved_bytes(model, 2, 40, torch.bfloat16))
    assert kept[2] - kept[1] == kept[1] - kept[0] == 2 * 40 * 48 * 2  # rows x tokens x hidden x b


def stage(config, method, domain="math"):
    return resolve_stage(dict(config), method, domain)


def terms(job) -> dict[str, float]:
    """The job's resident terms and those of its moments (the gradients exist from an update's
    first backward to the optimizer step), by name."""
    found = {t.name: t.bytes for m in job.moments for t in m.terms}
    return {**found, **{t.name: t.bytes for t in job.resident}}


def with_deepspeed(tmp_path, **changes) -> dict:
    """paper.yaml with its DeepSpeed config changed: `stage`, `grad_accum_dtype`."""
    ds = json.loads(Path(PAPER["training"]["deepspeed"]).read_text())
    ds["zero_optimization"]["stage"] = changes.get("stage", 2)
    ds["data_types"] = {"grad_accum_dtype": changes.get("grad_accum_dtype", "bf16")}
    path = tmp_path / f"ds{len(list(tmp_path.iterdir()))}.json"
    path.write_text(json.dumps(ds))
    return load_config("config/paper.yaml", {"training": {"deepspeed": str(path)}})


@pytest.mark.parametrize(
    "zero, accumulate, grads",
    [(2, "bf16", 2 / 8), (2, "fp32", 4 / 8), (1, "bf16", 2)],
)
def test_zero_shards_optimizer_state_and_gradients_over_the_processes(
    tmp_path, zero, accumulate, grads
):
    settings = stage(with_deepspeed(tmp_path, stage=zero, grad_accum_dtype=accumulate), "grpo")
    n = QWEN3_4B.parameters
    got = terms(training_memory(settings, QWEN3_4B, 8, step_shape(settings, 8), 79 * GIB))
    assert got["weights"] == n * 2  # bf16, whole on every GPU
    assert got["fp32 master"] == n * 4 / 8
    assert got["optimizer"] == n * 8 / 8  # Adam's two fp32 moments
    # ZeRO-2: the process's partition, in the accumulation dtype; ZeRO-1: whole, in bf16. With
    # overlap_comm, two reduce buckets of hidden^2 elements (accelerate's "auto") in bf16.
    assert got["gradients"] == n * grads + 2 * 2560**2 * 2


def test_each_teacher_kind_has_its_copy():
    assert set(TEACHER_COPY) == set(TEACHER_KINDS)
    n = QWEN3_4B.parameters
    for method, teacher in (("sdpo_frozen", n * 2), ("sdpo_ema5", n * 2), ("grpo", None)):
        settings = stage(PAPER, method)
        job = training_memory(settings, QWEN3_4B, 8, step_shape(settings, 8), 79 * GIB)
        assert terms(job).get("teacher") == teacher, method
        # the EMA teacher's float32 weights are in host memory (cptlab.train.ema_teacher)
        assert any("host memory" in note for note in job.notes) == (method == "sdpo_ema5")


def test_the_logits_moments_at_paper_scale():
    settings = stage(PAPER, "sdpo_frozen")
    job = training_memory(settings, QWEN3_4B, 8, step_shape(settings, 8), 79 * GIB)
    moments = {m.name: {t.name: t.bytes for t in m.terms} for m in job.moments}
    unit = 1 * 8192 * 151936 * 2  # one row's logits over the completion, bf16: 2.32 GiB
    assert moments["update: student forward"]["logits"] == 2 * unit  # and its temperature copy
    assert moments["update: loss and backward"]["logits"] == 4.8 * unit
    assert moments["update: entropy log"]["entropy"] == 3 * 256 * 151936 * 4  # 3 fp32 chunks
    # the rollout weights, a row at a time through TRL's fused head: a [4096, 32768] bf16 tile
    weights = moments["rollout weights (no gradient): fused LM head"]
    assert weights == {"logits tile": 4096 * 32768 * 2}
    # the KL probe, a row at a time: its logits over every token, the completion's in fp32
    probe = moments["KL probe (no gradient): logits"]["logits"]
    assert probe == 2176 * 151936 * 2 + 128 * 151936 * 4
    update = [m for m in job.moments if m.name.startswith("update")]
    assert max(update, key=lambda m: m.bytes).name == "update: loss and backward"
    # GRPO: TRL's fused head, one tile and the head's fp32 gradient, never the logits
    grpo = stage(PAPER, "grpo")
    head = training_memory(grpo, QWEN3_4B, 8, step_shape(grpo, 8), None).moments[0]
    got = {t.name: t.bytes for t in head.terms}
    assert got["logits tile"] == 4096 * 32768 * 2
    assert got["head gradients"] == (4 + 2) * (151936 + 8192) * 2560


def test_the_paper_configs_gpu_jobs_fit_an_h100_80gb():
    arch, source, jobs = plan(PAPER)
    assert arch == QWEN3_4B and source == "cptlab.model_sizes.PUBLISHED_ARCHITECTURES"
    assert [j.name for j in jobs] == [*PAPER["run"]["methods"], "every checkpoint"]
    for job in jobs:
        assert job.limit == 79 * GIB and job.fits, (job.name, job.peak / GIB)
    # vLLM sleeps during the update (enable_sleep_mode): the rollouts are each job's peak
    assert {j.peak_moment.name for j in jobs[:-1]} == {"rollouts (vLLM awake)"}


def test_without_sleep_mode_vllm_is_resident():
    config = load_config("config/paper.yaml", {"training": {"vllm": {"enable_sleep_mode": False}}})
    settings = stage(config, "sdpo_ema5")
    job = training_memory(settings, QWEN3_4B, 8, step_shape(settings, 8), 79 * GIB)
    assert terms(job)["vLLM"] == 0.3 * 79 * GIB
    assert job.peak_moment.name == "update: loss and backward"


def test_a_job_over_its_gpu_fails_the_plan_naming_it(tmp_path, capsys):
    deepspeed = with_deepspeed(tmp_path, grad_accum_dtype="bf16")["training"]["deepspeed"]
    config = tmp_path / "small.yaml"
    config.write_text(
        f"extends: {Path('config/paper.yaml').resolve()}\n"
        "resources: {train: {gpu_memory_gib: 36}, evaluate: {gpu_memory_gib: 36}}\n"
        f"training: {{deepspeed: {deepspeed}}}\n"
    )
    assert main(["plan-memory", "--config", str(config)]) == 2
    failures = [line for line in capsys.readouterr().err.splitlines() if "does not fit" in line]
    # vLLM's share shrinks with the GPU (0.3 x 36 GiB), so GRPO (27 GiB) and the evaluation
    # (0.85 x 36 + 3) fit; the SDPO jobs' loss and backward (14.05 GiB with gradients accumulated
    # in bf16) over the 23.60 GiB they hold between steps do not. One line each: the job, its
    # prediction and the GPU's memory.
    assert [line.split(": does not fit: ")[1].split(" (")[0] for line in failures] == [
        "train sdpo_frozen", "train sdpo_ema5", "train sdpo_frozen_cot"
    ]  # fmt: skip
    assert "stage 4 (code)): predicted 37.65 GiB per GPU > 36.00 GiB" in failures[1]


def test_the_command_prints_every_term(capsys):
    assert main(["plan-memory", "--config", "config/paper.yaml"]) == 0
    out = capsys.readouterr().out
    names = ("weights", "fp32 master", "optimizer", "gradients", "teacher", "CUDA runtime",
             "vLLM", "activations", "logits", "entropy", "rollout weights", "KL probe")  # fmt: skip
    for name in names:
        assert f"    {name}" in out or f"+ {name}" in out, name
    assert out.count("fits") == 5 and "4,022,468,096 parameters" in out
    assert "drift: not modelled" in out  # its GPU jobs are said to be left out


def test_the_models_defaults_are_the_frameworks(monkeypatch):
    from trl import GRPOConfig

    from cptlab.evaluation import vllm_backend

    field = GRPOConfig.__dataclass_fields__["vllm_gpu_memory_utilization"]
    assert field.default == TRL_VLLM_GPU_MEMORY_UTILIZATION
    seen = {}
    fake = types.ModuleType("vllm")
    fake.LLM = lambda **kwargs: seen.update(kwargs)
    monkeypatch.setitem(sys.modules, "vllm", fake)
    monkeypatch.setattr(vllm_backend, "cpu_head_sizes", lambda: None)
    vllm_backend.build_llm("checkpoint")
    assert seen["gpu_memory_utilization"] == EVAL_VLLM_GPU_MEMORY_UTILIZATION


def test_a_recorded_shape_is_the_models():
    settings = stage(load_config("config/rehearsal.yaml"), "sdpo_ema5")
    forwards = {
        "grad": {"rows": 1, "tokens": 300, "kept": 17},
        "nograd": {"rows": 4, "tokens": 310, "kept": 68},
        "teacher": {"rows": 1, "tokens": 700, "kept": 17},
        "eval": {"rows": 8, "tokens": 250, "kept": 2000},
    }
    shape = measured_shape(settings, forwards)
    assert shape.update == Forward(1, 300, 17)
    assert shape.log_probs == Forward(4, 310, 17) and shape.teacher == Forward(1, 700, 17)
    assert shape.probe == Forward(8, 250, 16)  # the probe keeps its completion: <= 16 tokens
