"""A byte-level BPE tokenizer trained locally (no hub), with the ChatML chat template."""

from __future__ import annotations

from collections.abc import Iterable

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from cptlab.chat import BOS, CHAT_TEMPLATE, IM_END, PAD, SPECIAL_TOKENS


def train_tokenizer(
    texts: Iterable[str],
    vocab_size: int,
    split_words: bool = True,
    max_digits_per_token: int | None = None,
    isolate: Iterable[str] = (),
) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE on `texts`; deterministic for the same texts and settings.

    `split_words=False` drops GPT-2's word-splitting regex, so merges may cross spaces and
    punctuation: frequent format strings become single tokens (`", "city": "`, `\\boxed{`).
    For the embedded testbed that halves sequence lengths, and a value in a tool call or a
    program then follows a token that names its key, so a one-token induction head can copy
    it from SDPO's demonstration (with word splitting every value follows the same ` "`).

    `max_digits_per_token=n` cuts every run of digits into pieces of at most n digits before
    BPE, so a number is spelled the same whatever surrounds it: 1 gives one token per digit (as
    Qwen's tokenizer does), 3 keeps every number below 1000 whole (as Llama 3's does). Without
    it, merges glue operands to their neighbours (`" - 7?"`, `" - 7."`), so the same sum is
    spelled with different tokens in different phrasings and what the model learns of it in one
    phrasing does not carry to another.

    `isolate` lists regular expressions whose matches become pre-tokens of their own in the
    same way, applied in order, each to the pieces the previous ones left (`\\b[A-D]\\b`: an
    MCQ option's letter is one token wherever it stands, rather than glued into `"gas (A), "`).
    """
    tokenizer = Tokenizer(models.BPE())
    patterns = list(isolate)
    if max_digits_per_token:
        patterns.append(rf"\d{{1,{max_digits_per_token}}}")
    splits = [pre_tokenizers.Split(Regex(p), "isolated") for p in patterns]
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=split_words)
    tokenizer.pre_tokenizer = (
        pre_tokenizers.Sequence([*splits, byte_level]) if splits else byte_level
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=BOS,
        eos_token=IM_END,
        pad_token=PAD,
        unk_token=None,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.padding_side = "left"  # decoder-only generation pads on the left
    return fast
