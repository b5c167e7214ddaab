"""The config's `base` section: the embedded base model's recipe, each subsection with its
defaults (keys without a default are required when the workflow builds the base)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from cptlab.config import settings


@dataclass(frozen=True)
class TokenizerSettings:
    """base.tokenizer: a byte-level BPE trained on the warm-up text (cptlab.base_model.tokenizer).

    vocab_size:           vocabulary size, special tokens included.
    split_words:          split text into words before BPE (GPT-2's regex); false lets merges
                          cross spaces, so format strings become single tokens.
    max_digits_per_token: cut runs of digits into pieces of at most this many digits before BPE
                          (None: merges may glue digits to their neighbours); 1 is Qwen's rule,
                          3 Llama 3's, which keeps every 2-digit number one token.
    isolate:              regular expressions whose matches are pre-tokens of their own before
                          BPE, never merged with their neighbours (as digits are with
                          max_digits_per_token), applied in order.
    """

    vocab_size: int
    split_words: bool = True
    max_digits_per_token: int | None = None
    isolate: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ArchitectureSettings:
    """base.model: the Qwen2 architecture of the embedded model (cptlab.base_model.architecture).

    hidden_size, num_layers, num_heads, num_kv_heads, intermediate_size: its dimensions.
    max_positions:        the longest sequence it can take, in tokens.
    tie_word_embeddings:  share the input embedding and the output layer.
    """

    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    intermediate_size: int
    max_positions: int
    tie_word_embeddings: bool = True


@dataclass(frozen=True)
class WarmupSettings:
    """base.warmup: what the supervised warm-up trains on (cptlab.base_model.warmup).

    reprompt_share:        share of warm-up examples in SDPO's teacher form (prompt + "Correct
                           solution: ..." -> answer), so the model can use a demonstration.
    off_format_share:      share of the rows (of items that have one) whose target answers in a
                           convention the prompt did not ask for, scored 0 by the verifier.
    off_format_cued:       only items whose prompt carries their domain's cue (a phrasing, an
                           attribute, a function name) answer off-convention.
    domain_weights:        domain -> weight of its warm-up rows in the mixture (1: all of its
                           data.sizes.pretrain rows; 0.5 half of them; 2 each twice).
    domain_reprompt_share: domain -> its own reprompt_share.
    counterfactual_share:  share of the teacher-form examples whose demonstration (and target)
                           is another item's solution of the same domain and form, so that only
                           reading the demonstration lowers the loss.
    stripped_demonstration_share: share of the teacher-form examples whose demonstration loses its
                           reasoning (the pattern SDPO_0 deletes) while the target keeps it, so
                           the teacher can read a demonstration without its reasoning.
    stripped_gold_only:    strip only gold demonstrations (the item's own solution), never a
                           counterfactual one, whose reasoning the teacher could only guess.
    """

    reprompt_share: float
    off_format_share: float = 0.0
    off_format_cued: bool = False
    domain_weights: dict[str, float] = field(default_factory=dict)
    domain_reprompt_share: dict[str, float] = field(default_factory=dict)
    counterfactual_share: float = 0.0
    stripped_demonstration_share: float = 0.0
    stripped_gold_only: bool = False


@dataclass(frozen=True)
class WarmupTrainingSettings:
    """base.sft: the supervised warm-up loop (cptlab.base_model.warmup.train_warmup).

    steps:        optimizer steps.
    batch_size:   sequences per step.
    lr:           peak learning rate: linear warm-up over `warmup_steps`, then cosine decay to
                  10 % of it.
    warmup_steps: learning-rate warm-up steps.
    weight_decay: AdamW weight decay.
    """

    steps: int
    batch_size: int
    lr: float
    warmup_steps: int = 50
    weight_decay: float = 0.01


@dataclass(frozen=True)
class MeasureSettings:
    """base.measure: the measurements written into the base's manifest.

    n:              items per benchmark.
    k:              samples per item for pass@k.
    temperature:    sampling temperature of pass@k.
    max_new_tokens: completion limit.
    """

    n: int
    k: int
    temperature: float
    max_new_tokens: int


@dataclass(frozen=True)
class BaseSettings:
    """The `base` section. Either `path` names a pretrained model (a local folder or a hub name
    in the local HF cache) or the workflow builds the embedded base from the recipe below.

    seed:      the build's seed (tokenizer, initialisation, warm-up order).
    path:      the pretrained model to use instead of building one.
    tokenizer, model, warmup, sft, measure: the recipe (None when `path` is given).
    """

    seed: int
    path: str | None = None
    tokenizer: TokenizerSettings | None = None
    model: ArchitectureSettings | None = None
    warmup: WarmupSettings | None = None
    sft: WarmupTrainingSettings | None = None
    measure: MeasureSettings | None = None

    @classmethod
    def from_config(cls, config: Mapping) -> BaseSettings:
        spec = config["base"]
        if "path" in spec:
            return cls(seed=spec["seed"], path=spec["path"])
        parts = {
            "tokenizer": TokenizerSettings,
            "model": ArchitectureSettings,
            "warmup": WarmupSettings,
            "sft": WarmupTrainingSettings,
            "measure": MeasureSettings,
        }
        return cls(
            seed=spec["seed"],
            **{key: settings(kind, spec.get(key), f"base.{key}") for key, kind in parts.items()},
        )
