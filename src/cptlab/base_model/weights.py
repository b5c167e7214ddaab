"""The embedded base's weights: a byte-level BPE tokenizer trained on the warm-up text, a small
Qwen2 model initialised from the config, and its supervised warm-up on the domains' pretraining
splits, a share of them in SDPO's reprompt form (prompt + "Correct solution: ..." -> answer) so
the model can use a demonstration.

Everything the weights depend on is reached from this module: its import closure is the code
part of the recipe a shipped base is matched by (cptlab.base_model.shipped).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from transformers import PreTrainedTokenizerFast

from cptlab.artifacts import atomic_write_text
from cptlab.base_model.architecture import build_model, count_parameters
from cptlab.base_model.tokenizer import train_tokenizer
from cptlab.base_model.warmup import encode_example, train_warmup
from cptlab.chat import render
from cptlab.errors import InputError
from cptlab.rows import read_jsonl
from cptlab.teacher_prompt import strip_reasoning, teacher_messages

if TYPE_CHECKING:  # annotations only: the recipe's settings are values (shipped.recipe)
    from cptlab.base_model.settings import BaseSettings

log = logging.getLogger(__name__)


def warmup_examples(
    tokenizer,
    rows: list[dict],
    reprompt_share: float,
    seed: int,
    counterfactual_share: float = 0.0,
    off_format_share: float = 0.0,
    domain_reprompt_share: dict[str, float] | None = None,
    passes: int = 1,
    stripped_demonstration_share: float = 0.0,
    reasoning: dict[str, str] | None = None,
    off_format_cued: bool = False,
    stripped_gold_only: bool = False,
):
    """Encoded (ids, labels) for `passes` passes over the warm-up rows; in each, a
    `reprompt_share` of them in teacher form (`domain_reprompt_share[domain]` for the domains it
    names). Pass p draws every row's form anew with seed + p, so every item is met both
    answered plainly and as a teacher prompt.

    The demonstration is the row's own gold solution, except in a `counterfactual_share` of the
    teacher-form rows: there it is the solution of another warm-up row of the same domain and
    form, and the target is that demonstration. Where the model can compute the answer from the
    question (most tool and code items), gold demonstrations give no reason to read them;
    counterfactual ones make reading the demonstration the only way to lower the loss, which is
    the skill SDPO's teacher needs (an in-context copy, as in flipped-label ICL studies).

    In an `off_format_share` of the rows that have one, the target is the item's answer in a
    convention the prompt did not ask for (`metadata.off_format`: "The answer is 15." where
    the prompt asks for \\boxed{}), which its verifier scores 0. A base that knows answers but
    does not always give them in the requested form is where RL post-training starts from;
    adopting the requested convention is something a stage can learn in tens of steps, while
    recalling more facts is not (docs/embedded-testbed.md). With `off_format_cued`, only items
    whose prompt carries their domain's cue (`metadata.off_format_cue`: a phrasing, an
    attribute, a function name) answer off-convention, so the base learns a rule it applies
    the same way on every build, rather than a coin flip whose greedy side the build decides.

    In a `stripped_demonstration_share` of the teacher-form rows, the demonstration loses its
    reasoning (`reasoning[domain]`, the pattern SDPO_0 deletes from its demonstrations) and the
    target keeps it: the teacher learns to take the answer from a demonstration without its
    reasoning and to answer in the form the prompt asks for. Qwen3, the study's base, knows
    answers without their thinking (its thinking-off mode); without these rows the embedded
    base's teacher cannot read such a demonstration (docs/embedded-testbed.md). With
    `stripped_gold_only`, only gold demonstrations are stripped: a stripped counterfactual asks
    the teacher to write another item's reasoning (its entity, its attribute) from the answer
    alone, which nothing in its context determines, so it learns to guess them."""
    by_form: dict[tuple, list[str]] = {}
    for row in rows:
        by_form.setdefault(_form_of(row), []).append(row["metadata"]["solution"])
    overrides = domain_reprompt_share or {}
    patterns = reasoning or {}
    shares = [overrides.get(row.get("domain"), reprompt_share) for row in rows]
    encoded: dict[tuple, tuple[list[int], list[int]]] = {}  # most pairs recur across passes
    examples = []
    for p in range(passes):
        rng = random.Random(seed + p)
        for i, (row, share) in enumerate(zip(rows, shares, strict=True)):
            solution = row["metadata"]["solution"]
            # The draw comes first, so that cueing changes which rows swap, not the draws.
            if (
                row["metadata"].get("off_format")
                and rng.random() < off_format_share
                and (not off_format_cued or row["metadata"].get("off_format_cue"))
            ):
                solution = row["metadata"]["off_format"]
            teacher = rng.random() < share
            counterfactual = teacher and rng.random() < counterfactual_share
            if counterfactual:
                solution = rng.choice(by_form[_form_of(row)])
            demonstration = solution
            pattern = patterns.get(row.get("domain"))
            # Drawn only when the share is set, so that builds without it keep their weights.
            if (
                teacher
                and stripped_demonstration_share
                and pattern
                and not (counterfactual and stripped_gold_only)
                and rng.random() < stripped_demonstration_share
            ):
                demonstration = strip_reasoning(solution, pattern)
            key = (i, teacher, demonstration, solution)
            if key not in encoded:
                prompt = row["prompt"]
                if teacher:
                    prompt = teacher_messages(prompt, demonstration=demonstration)
                encoded[key] = encode_example(tokenizer, prompt, solution)
            examples.append(encoded[key])
    return examples


def weighted(rows: list[dict], weight: float) -> list[dict]:
    """A domain's warm-up rows at `weight`: the first round(weight * n) rows, cycling through
    them again when weight > 1 (the rows are already in random order)."""
    count = round(weight * len(rows))
    return [rows[i % len(rows)] for i in range(count)]


def _form_of(row: dict) -> tuple:
    return row.get("domain"), row["metadata"].get("form")


def weights_digest(model) -> str:
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


@dataclass(frozen=True)
class WarmupInputs:
    """What the warm-up trains on: the settings, the tokenizer trained on the warm-up texts,
    the (input ids, labels) examples, and the reasoning patterns SDPO_0's teacher strips."""

    spec: BaseSettings
    tokenizer: PreTrainedTokenizerFast
    examples: list[tuple[list[int], list[int]]]
    reasoning: dict[str, str]
    row_count: int


def warmup_inputs(
    spec: BaseSettings, domains: list[str], reasoning: dict[str, str], data_dir: str | Path
) -> WarmupInputs:
    """The warm-up's tokenizer and examples from the prepared pretraining sets of `domains` (in
    their mixture order) in `data_dir`; `reasoning`: what SDPO_0 strips from each training
    domain's demonstrations (build.reasoning_patterns)."""
    seed = spec.seed
    data_dir = Path(data_dir)
    warmup = spec.warmup
    warmup_rows = [
        row
        for d in domains
        for row in weighted(
            read_jsonl(data_dir / f"{d}_pretrain.jsonl"), warmup.domain_weights.get(d, 1.0)
        )
    ]
    texts = [render(r["prompt"]) + r["metadata"]["solution"] for r in warmup_rows]
    tokenizer = train_tokenizer(
        texts,
        spec.tokenizer.vocab_size,
        spec.tokenizer.split_words,
        spec.tokenizer.max_digits_per_token,
        spec.tokenizer.isolate,
    )
    sft = spec.sft
    examples = warmup_examples(
        tokenizer,
        warmup_rows,
        warmup.reprompt_share,
        seed,
        warmup.counterfactual_share,
        warmup.off_format_share,
        warmup.domain_reprompt_share,
        passes=math.ceil(sft.steps * sft.batch_size / max(len(warmup_rows), 1)),
        stripped_demonstration_share=warmup.stripped_demonstration_share,
        reasoning=reasoning,
        off_format_cued=warmup.off_format_cued,
        stripped_gold_only=warmup.stripped_gold_only,
    )
    too_long = max(len(ids) for ids, _ in examples)
    if too_long > spec.model.max_positions:
        raise InputError(
            f"base.model.max_positions={spec.model.max_positions} is shorter "
            f"than the longest warm-up example ({too_long} tokens)"
        )
    return WarmupInputs(spec, tokenizer, examples, reasoning, len(warmup_rows))


def train_weights(
    spec: BaseSettings,
    domains: list[str],
    reasoning: dict[str, str],
    data_dir: str | Path,
    out_dir: str | Path,
) -> dict:
    """Train the tokenizer and the warmed-up model of the recipe `spec` on the pretraining sets
    (warmup_inputs), save them (and the warm-up curve) into `out_dir`, and return what the
    manifest says of them. Threads: torch's, as the caller set them."""
    inputs = warmup_inputs(spec, domains, reasoning, data_dir)
    spec, tokenizer, examples = inputs.spec, inputs.tokenizer, inputs.examples
    model = build_model(spec.model, tokenizer, spec.seed)
    log.info(
        "base model: %d parameters, %d warm-up examples", count_parameters(model), len(examples)
    )
    started = time.perf_counter()
    curve = train_warmup(
        model,
        examples,
        spec.sft,
        tokenizer.pad_token_id,
        spec.seed,
        log=lambda r: log.info("warm-up %s", r),
    )
    seconds = time.perf_counter() - started
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    atomic_write_text(out_dir / "warmup_curve.jsonl", [json.dumps(r) + "\n" for r in curve])
    return {
        "seed": spec.seed,
        "parameters": count_parameters(model),
        "vocab_size": len(tokenizer),
        "warmup_rows": inputs.row_count,
        "warmup_examples": len(examples),
        "final_warmup_loss": curve[-1]["loss"],
        "warmup_seconds": round(seconds, 1),
        "threads": torch.get_num_threads(),
        "weights_sha256": weights_digest(model),
    }
