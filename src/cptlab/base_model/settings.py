"""The config's `base` section: the embedded base model's recipe, each subsection with its
defaults (keys without a default are required when the workflow builds the base)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from cptlab.config import setting, settings


@dataclass(frozen=True)
class TokenizerSettings:
    """base.tokenizer: a byte-level BPE trained on the warm-up text (cptlab.base_model.tokenizer).

    Parameters:
        vocab_size:
            Vocabulary size, special tokens included.
        split_words:
            Split text into words before BPE (GPT-2's regex); false lets merges cross spaces, so
            format strings become single tokens.
        max_digits_per_token:
            Cut runs of digits into pieces of at most this many digits before BPE (None: merges
            may glue digits to their neighbours); 1 is Qwen's rule, 3 Llama 3's, which keeps
            every 2-digit number one token.
        isolate:
            Regular expressions whose matches are pre-tokens of their own before BPE, never
            merged with their neighbours, applied in order, each to the pieces the previous ones
            left (e.g. '\b[A-D]\b' keeps an MCQ letter one token).
    """

    vocab_size: int = setting(minimum=300)
    split_words: bool = True
    max_digits_per_token: int | None = setting(None, minimum=1)
    isolate: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ArchitectureSettings:
    """base.model: the Qwen2 architecture of the embedded model (cptlab.base_model.architecture).

    Parameters:
        hidden_size:
            Width of the residual stream.
        num_layers:
            Transformer layers.
        num_heads:
            Attention heads.
        num_kv_heads:
            Key/value heads (grouped-query attention).
        intermediate_size:
            Width of the MLP.
        max_positions:
            Longest sequence in tokens (the warm-up's longest example must fit).
        tie_word_embeddings:
            Share the input embedding and the output layer.
    """

    hidden_size: int = setting(minimum=8)
    num_layers: int = setting(minimum=1)
    num_heads: int = setting(minimum=1)
    num_kv_heads: int = setting(minimum=1)
    intermediate_size: int = setting(minimum=8)
    max_positions: int = setting(minimum=32)
    tie_word_embeddings: bool = True


@dataclass(frozen=True)
class WarmupSettings:
    """base.warmup: what the supervised warm-up trains on (cptlab.base_model.warmup).

    Parameters:
        reprompt_share:
            Share of warm-up examples in SDPO's teacher form (prompt + "Correct solution: ..."
            -> answer), so the model can use a demonstration.
        off_format_share:
            Share of the warm-up rows (of items that have one) whose target answers in a
            convention the prompt did not ask for, scored 0 by the verifier.
        off_format_cued:
            Only items whose prompt carries their domain's cue (math's "Find"/"Give" phrasings,
            science's color questions, tool's second request phrasing, code's calc and transform
            functions) answer off-convention, a rule the base learns the same way on every
            build.
        domain_weights:
            Domain -> weight of its warm-up rows in the mixture (1: all of its
            data.sizes.pretrain rows; 0.5 takes half of them, 2 repeats them twice).
        domain_reprompt_share:
            Domain -> its own reprompt_share (teacher-form rows teach reading the demonstration;
            plain rows teach answering without one).
        counterfactual_share:
            Share of the teacher-form examples whose demonstration (and target) is another warm-
            up item's solution of the same domain and form, so that only reading the
            demonstration lowers the loss.
        stripped_demonstration_share:
            Share of the teacher-form examples whose demonstration loses its reasoning (the
            pattern SDPO_0 deletes from its demonstrations) while the target keeps it, so that
            the teacher can read a demonstration without its reasoning.
        stripped_gold_only:
            Strip only gold demonstrations (the item's own solution), never a counterfactual
            one, whose reasoning (another item's entity and attribute) the teacher could only
            guess from its answer.
    """

    reprompt_share: float = setting(minimum=0, maximum=1)
    off_format_share: float = setting(0.0, minimum=0, maximum=1)
    off_format_cued: bool = False
    domain_weights: dict[str, float] = setting(
        factory=dict, additionalProperties={"type": "number", "minimum": 0}
    )
    domain_reprompt_share: dict[str, float] = setting(
        factory=dict, additionalProperties={"type": "number", "minimum": 0, "maximum": 1}
    )
    counterfactual_share: float = setting(0.0, minimum=0, maximum=1)
    stripped_demonstration_share: float = setting(0.0, minimum=0, maximum=1)
    stripped_gold_only: bool = False


@dataclass(frozen=True)
class WarmupTrainingSettings:
    """base.sft: the supervised warm-up loop (cptlab.base_model.warmup.train_warmup).

    Parameters:
        steps:
            Optimizer steps.
        batch_size:
            Sequences per step.
        lr:
            Peak learning rate: linear warm-up over `warmup_steps`, then cosine decay to 10 % of
            it.
        warmup_steps:
            Learning-rate warm-up steps.
        weight_decay:
            AdamW weight decay.
    """

    steps: int = setting(minimum=1)
    batch_size: int = setting(minimum=1)
    lr: float = setting(exclusiveMinimum=0)
    warmup_steps: int = setting(50, minimum=0)
    weight_decay: float = setting(0.01, minimum=0)


@dataclass(frozen=True)
class MeasureSettings:
    """base.measure: the measurements written into the base's manifest.

    Parameters:
        n:
            Items per benchmark.
        k:
            Samples per item for pass@k.
        temperature:
            Sampling temperature of pass@k.
        max_new_tokens:
            Completion limit in tokens.
    """

    n: int = setting(minimum=1)
    k: int = setting(minimum=1)
    temperature: float = setting(minimum=0)
    max_new_tokens: int = setting(minimum=1)


@dataclass(frozen=True)
class BaseSettings:
    """The `base` section. Either `path` names a pretrained model (a local folder or a hub name
    in the local HF cache) or the workflow builds the embedded base from the recipe below.

    Parameters:
        seed:
            The build's seed (tokenizer, initialisation, warm-up order).
        path:
            Use this pretrained model (a local folder, or a hub name already in the local HF
            cache) instead of building one; a local folder's files are inputs of the jobs that
            read the base, so replacing the model reruns them.
        tokenizer:
            The byte-level BPE tokenizer trained on the warm-up text
            (cptlab.base_model.tokenizer).
        model:
            The Qwen2 architecture of the embedded model (cptlab.base_model.architecture).
        warmup:
            What the supervised warm-up trains on (cptlab.base_model.warmup).
        sft:
            The supervised warm-up loop (cptlab.base_model.settings.WarmupTrainingSettings).
        measure:
            Measurements written into the base's manifest, with the bounds they are checked
            against.
    """

    seed: int
    path: str | None = setting(None, type="string")  # a config names a model or leaves it out
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
