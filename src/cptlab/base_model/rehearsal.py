"""The rehearsal's base (config/rehearsal.yaml, docs/rehearsal.md): a tiny, untrained model of
Qwen3's architecture and chat format, built offline, so that paper.yaml's path (Qwen3 config
classes, its thinking switch, vLLM rollouts and evaluation, ZeRO-2) runs end to end on a CPU.

It answers nothing: the rehearsal checks that every job runs, not what the study found.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from tokenizers import AddedToken
from transformers import PreTrainedTokenizerFast

from cptlab.base_model.tokenizer import train_tokenizer
from cptlab.errors import InputError

# Qwen3's chat template (Qwen/Qwen3-4B, tokenizer_config.json `chat_template`) for the messages
# the study sends: system, user and assistant turns, no tools. Its behaviour, reproduced here:
# - every turn is `<|im_start|>{role}\n{content}<|im_end|>\n`;
# - an assistant turn after the last user query is written with a think block: its reasoning
#   (the text before `</think>`, or `reasoning_content`) inside `<think>\n...\n</think>\n\n`,
#   an empty block when it has none; earlier assistant turns lose their reasoning;
# - the generation prompt is `<|im_start|>assistant\n`, followed by an empty think block
#   `<think>\n\n</think>\n\n` exactly when `enable_thinking` is given and false.
QWEN3_CHAT_TEMPLATE = (
    "{%- set ns = namespace(last_query_index=messages|length - 1, found=false) %}"
    "{%- for message in messages[::-1] %}"
    "{%- if not ns.found and message.role == 'user' %}"
    "{%- set ns.found = true %}{%- set ns.last_query_index = messages|length - 1 - loop.index0 %}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- for message in messages %}"
    "{%- set content = message.content if message.content is string else '' %}"
    "{%- if message.role == 'assistant' %}"
    "{%- set reasoning = '' %}"
    "{%- if message.reasoning_content is string %}"
    "{%- set reasoning = message.reasoning_content %}"
    "{%- elif '</think>' in content %}"
    "{%- set reasoning = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1]"
    ".lstrip('\\n') %}"
    "{%- set content = content.split('</think>')[-1].lstrip('\\n') %}"
    "{%- endif %}"
    "{%- if loop.index0 > ns.last_query_index and (loop.last or reasoning) %}"
    "{{- '<|im_start|>assistant\\n<think>\\n' + reasoning.strip('\\n') + '\\n</think>\\n\\n'"
    " + content.lstrip('\\n') }}"
    "{%- else %}"
    "{{- '<|im_start|>assistant\\n' + content }}"
    "{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- endif %}"
    "{%- endif %}"
)
# Qwen3's reasoning delimiters: added tokens that are not special, so a decoded completion
# keeps them (SDPO_0^CoT keeps them in its demonstrations; the others strip the block).
THINK_TOKENS = ("<think>", "</think>")
# Where the tokenizer's training text comes from: the paper loaders' fixtures, which every clone
# has (the shared study rows are not in a fresh clone, and would change the vocabulary).
FIXTURES = Path("tests/fixtures/paper")


@dataclass(frozen=True)
class RehearsalBase:
    """The base's shape. head_dim (hidden_size / num_heads) is 32: vLLM's CPU attention
    refuses 16. Embeddings are untied: colocated rollouts on vLLM's CPU build need it
    (cptlab.train.vllm_sync). max_positions covers paper.yaml's prompt (2048) plus the
    rehearsal's completion lengths."""

    vocab_size: int = 1024
    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 2
    num_kv_heads: int = 1
    intermediate_size: int = 128
    max_positions: int = 4096
    seed: int = 0


def fixture_texts(root: Path = FIXTURES) -> Iterator[str]:
    """Every string value of every fixture row under `root`, in a fixed order (sorted files,
    rows and keys as written), for a deterministic vocabulary."""
    files = sorted(p for p in root.rglob("*") if p.suffix in {".json", ".jsonl", ".csv"})
    if not files:
        raise InputError(f"{root}: no fixture files (.json, .jsonl, .csv) to train a tokenizer on")
    for path in files:
        text = path.read_text()
        if path.suffix == ".csv":
            yield text
            continue
        for row in _json_rows(path, text):
            yield from _strings(row)


def _json_rows(path: Path, text: str) -> list:
    """A JSON document, or JSON lines (several datasets ship JSON lines as `.json`: BFCL)."""
    try:
        return [json.loads(text)]
    except json.JSONDecodeError:
        pass
    try:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: neither JSON nor JSON lines ({err})") from None


def _strings(value) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def build_tokenizer(spec: RehearsalBase, root: Path = FIXTURES) -> PreTrainedTokenizerFast:
    """A byte-level BPE on the fixtures with Qwen3's chat format: `<|im_end|>` ends a turn
    (the eos), `<think>`/`</think>` are single tokens, and the chat template honours
    `enable_thinking` as Qwen3's does. Digits are split one per token, as Qwen's tokenizer does."""
    tokenizer = train_tokenizer(fixture_texts(root), spec.vocab_size, max_digits_per_token=1)
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in THINK_TOKENS])
    tokenizer.chat_template = QWEN3_CHAT_TEMPLATE
    return tokenizer


def build_rehearsal_base(
    out: str | Path, spec: RehearsalBase = RehearsalBase(), fixtures: str | Path = FIXTURES
) -> dict:
    """Build the tokenizer (on `fixtures`) and a seeded, untrained Qwen3ForCausalLM, save both
    to `out`; the same inputs give the same bytes. Returns what was built (also written to
    rehearsal_base.json)."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from cptlab.base_model.architecture import seeded_model

    if spec.hidden_size % spec.num_heads or spec.hidden_size // spec.num_heads != 32:
        raise InputError(
            f"rehearsal base: hidden_size / num_heads must be 32 (vLLM's CPU attention refuses "
            f"16), got {spec.hidden_size} / {spec.num_heads}"
        )
    tokenizer = build_tokenizer(spec, Path(fixtures))
    model = seeded_model(
        Qwen3Config,
        Qwen3ForCausalLM,
        tokenizer,
        spec.seed,
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_kv_heads,
        head_dim=spec.hidden_size // spec.num_heads,
        max_position_embeddings=spec.max_positions,
        tie_word_embeddings=False,
    )
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    built = {
        **asdict(spec),
        "vocab": len(tokenizer),
        "parameters": sum(p.numel() for p in model.parameters()),
    }
    (out / "rehearsal_base.json").write_text(json.dumps(built, indent=1, sort_keys=True) + "\n")
    return built
