"""The ChatML-style chat format shared by the embedded tokenizer, training and evaluation."""

from __future__ import annotations

BOS = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
PAD = "<|pad|>"
SPECIAL_TOKENS = (BOS, IM_START, IM_END, PAD)

# Same layout as Qwen's template, without tool or thinking extras.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def render(messages: list[dict], add_generation_prompt: bool = True) -> str:
    """The template above in plain Python (used to build training text without Jinja)."""
    text = "".join(f"{IM_START}{m['role']}\n{m['content']}{IM_END}\n" for m in messages)
    return text + (f"{IM_START}assistant\n" if add_generation_prompt else "")


def prompt_length(tokenizer, messages: list[dict], chat_template_kwargs: dict) -> int:
    """Tokens of `messages` as the model reads them: the chat template with its generation
    prompt (what the study's prompt-length filter counts, verl's RLHFDataset)."""
    encoded = tokenizer.apply_chat_template(
        messages, tokenize=True, add_generation_prompt=True, **chat_template_kwargs
    )
    return len(encoded["input_ids"])
