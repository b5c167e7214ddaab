"""The weights a stage hands on (cptlab.train.handoff, `training.handoff_precision`), on a real
DeepSpeed ZeRO-2 engine in bf16 on the CPU (one process, gloo).

A stage that hands on its fp32 masters saves exactly them, and the next stage's masters start
from them rather than from their bf16 rounding; with `model`, the masters' extra bits are lost
at the handoff. Each run is a fresh interpreter: DeepSpeed's process group lives for the
process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from tiny_models import tiny_qwen3

from cptlab.train.handoff import handed_on, hands_on_masters, stored_in_fp32

pytestmark = pytest.mark.integration

ENGINE = textwrap.dedent(
    """
    import json, os, sys, types
    os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=sys.argv[3], DS_ACCELERATOR="cpu")
    import torch, deepspeed
    from transformers import AutoModelForCausalLM
    from cptlab.train.handoff import RestoreMasterWeights, master_state_dict, save_fp32
    from cptlab.train.mixin import tied_copies
    from cptlab.train.stage import skip_cpu_shm_allreduce

    skip_cpu_shm_allreduce()
    start, out = sys.argv[1], sys.argv[2]
    model = AutoModelForCausalLM.from_pretrained(start, dtype=torch.bfloat16)
    config = {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
              "zero_optimization": {"stage": 2}}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    engine, *_ = deepspeed.initialize(model=model, optimizer=optimizer, config=config)
    trainer = types.SimpleNamespace(model=engine, accelerator=types.SimpleNamespace(
        unwrap_model=lambda m: m.module))
    if os.environ.get("RESTORE") == "1":
        RestoreMasterWeights(trainer, start).on_train_begin(None, None, None)
    before = master_state_dict(engine.module, skip=tied_copies(engine.module))
    save_fp32(engine.module, before, out + "/start")
    ids = torch.arange(1, 9).view(1, 8)
    for _ in range(3):
        loss = engine(input_ids=ids, labels=ids).loss
        engine.backward(loss)
        engine.step()
    after = master_state_dict(engine.module, skip=tied_copies(engine.module))
    save_fp32(engine.module, after, out + "/end")
    bf16 = {k: v.detach().float() for k, v in engine.module.state_dict().items()}
    torch.save(bf16, out + "/bf16_copy.pt")
    """
)


def run_engine(start: Path, out: Path, restore: bool, port: int) -> None:
    out.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", ENGINE, str(start), str(out), str(port)],
        env={**os.environ, "RESTORE": "1" if restore else "0", "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.fixture(scope="module")
def start(tmp_path_factory) -> Path:
    """An fp32 checkpoint whose weights are not bf16 values: what a float32 handoff gives."""
    folder = tmp_path_factory.mktemp("start")
    model = tiny_qwen3(vocab_size=32)
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(param.bfloat16().float() + 1e-4 * torch.randn_like(param))
    model.save_pretrained(folder)
    assert stored_in_fp32(folder)
    return folder


def test_restored_masters_are_the_handed_on_weights_and_stay_fp32(start, tmp_path) -> None:
    run_engine(start, tmp_path / "restored", restore=True, port=29561)
    handed = load_file(start / "model.safetensors")
    masters = load_file(tmp_path / "restored" / "start" / "model.safetensors")
    assert masters.keys() == handed.keys()
    for name, value in handed.items():
        assert torch.equal(masters[name], value), name
    # after 3 steps the masters hold what the bf16 copy rounds away
    end = load_file(tmp_path / "restored" / "end" / "model.safetensors")
    assert all(t.dtype == torch.float32 for t in end.values())
    copy = torch.load(tmp_path / "restored" / "bf16_copy.pt")
    apart = sum((end[k] != copy[k]).sum().item() for k in end)
    assert apart > 0.5 * sum(t.numel() for t in end.values())
    assert json.loads((tmp_path / "restored/end/config.json").read_text())["dtype"] == "float32"


def test_without_restoring_the_masters_start_from_the_bf16_rounding(start, tmp_path) -> None:
    """What DeepSpeed does by itself, and what the `model` handoff amounts to."""
    run_engine(start, tmp_path / "plain", restore=False, port=29562)
    handed = load_file(start / "model.safetensors")
    masters = load_file(tmp_path / "plain" / "start" / "model.safetensors")
    for name, value in handed.items():
        assert torch.equal(masters[name], value.bfloat16().float()), name
    assert any(not torch.equal(masters[n], v) for n, v in handed.items())


@pytest.mark.parametrize(
    "precision, dtype, deepspeed, masters, said",
    [
        ("float32", torch.bfloat16, True, True, "float32 master weights"),
        ("model", torch.bfloat16, True, False, "the model's bfloat16 weights"),
        ("float32", torch.bfloat16, False, False, "the model's bfloat16 weights"),  # no masters
        ("float32", torch.float32, True, False, "the model's float32 weights"),
    ],
)
def test_what_a_stage_hands_on(precision, dtype, deepspeed, masters, said) -> None:
    model = tiny_qwen3(vocab_size=32).to(dtype)
    trainer = types.SimpleNamespace(
        model=model,
        is_deepspeed_enabled=deepspeed,
        accelerator=types.SimpleNamespace(unwrap_model=lambda m: m),
    )
    assert hands_on_masters(precision, trainer) == masters
    assert handed_on(precision, trainer) == said
