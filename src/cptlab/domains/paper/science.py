"""Science benchmarks: SciKnowEval L3 MCQ (train / id, held-out split), GPQA-Diamond (ood)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from cptlab.domains.paper.common import (
    LETTERS,
    SPLIT_SEED,
    TEST_FRACTION,
    PathSpec,
    _Bad,
    _check_n,
    _Ctx,
    _digest,
    _duplicate,
    _open,
    _options_text,
    _prompt,
    _row,
    _Run,
    _slug,
    _text,
    holdout_split,
)
from cptlab.domains.registry import Benchmark

# SciKnowEval (hicai-zju/SciKnowEval, one split "test"):
#   question, choices {"text": [...], "label": ["A", ...]}, answerKey "B",
#   type ("mcq-4-choices", "mcq-2-choices", "true_or_false", "open-ended-qa", "filling",
#   "relation_extraction"), domain ("Biology", "Chemistry", "Material", "Physics"),
#   details {"level": "L1".."L5", "task", "subtask", "source"}, prompt {"default": ...}.
# Some copies carry `level` at the top level instead of in `details` (both accepted).
SCIKNOWEVAL_HUB = "hicai-zju/SciKnowEval"
SKE_QUESTION = "question"
SKE_CHOICES = "choices"  # {"text": [...], "label": [...]}
SKE_ANSWER = "answerKey"
SKE_TYPE = "type"
SKE_DOMAIN = "domain"
SKE_DETAILS = "details"  # {"level", "task", "subtask"}
SKE_LEVEL = "level"
SKE_TYPES = ("mcq-4-choices", "mcq-2-choices")
SKE_LEVELS = ("L3",)
SCIKNOWEVAL_SYSTEM = (
    "You will be given a multiple-choice science question. Think it through, then reply in "
    "exactly this format:\n<reasoning>\n...\n</reasoning>\n<answer>\n...\n</answer>\n"
    "Inside <answer> write only the letter of the correct option and nothing else."
)

# GPQA (Idavidrein/gpqa, config "gpqa_diamond", split "train"; also the CSV release):
#   Question, Correct Answer, Incorrect Answer 1..3, Record ID, High-level domain, Subdomain.
GPQA_HUB = "Idavidrein/gpqa"
GPQA_CONFIG = "gpqa_diamond"
GPQA_QUESTION = "Question"
GPQA_CORRECT = "Correct Answer"
GPQA_INCORRECT = ("Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")
GPQA_ID = "Record ID"
GPQA_DOMAIN = "High-level domain"
GPQA_SUBDOMAIN = "Subdomain"
GPQA_INSTRUCTION = (
    "Answer the following multiple-choice question. Think step by step, then put only the "
    "letter of the correct option inside \\boxed{}."
)


def _ske_level(raw: dict) -> Any:
    details = raw.get(SKE_DETAILS)
    if isinstance(details, dict) and details.get("level") is not None:
        return details["level"]
    return raw.get(SKE_LEVEL)


def _ske_options(raw: dict) -> tuple[list[str], str]:
    choices = raw.get(SKE_CHOICES)
    if not isinstance(choices, dict):
        raise _Bad("choices must be {'text': [...], 'label': [...]}")
    texts, labels = choices.get("text"), choices.get("label")
    if not isinstance(texts, list) or not isinstance(labels, list) or len(texts) != len(labels):
        raise _Bad("choices.text and choices.label must be lists of the same length")
    if len(texts) < 2:
        raise _Bad(f"{len(texts)} option(s); a multiple-choice question needs 2 or more")
    options = [_text(t, f"option {k}") for k, t in enumerate(texts)]
    key = _text(raw.get(SKE_ANSWER), "answerKey")
    labels = [str(label).strip() for label in labels]
    if key not in labels:
        raise _Bad(f"answerKey {key!r} is not one of the labels {labels}")
    return options, LETTERS[labels.index(key)]


def _load_sciknoweval(
    name: str,
    part: str,
    n: int | None,
    seed: int,
    path: PathSpec,
    *,
    levels: Sequence[str] = SKE_LEVELS,
    types: Sequence[str] = SKE_TYPES,
    domains: Sequence[str] | None = None,
    test_fraction: float = TEST_FRACTION,
    split_seed: int = SPLIT_SEED,
    strict: bool = True,
    **hub: Any,
) -> list[dict]:
    _check_n(n)
    source = _open(name, path, SCIKNOWEVAL_HUB, **{"hub_split": "test", **hub})
    run = _Run(name, source, strict)
    wanted_domains = {d.lower() for d in domains} if domains else None
    seen: dict[str, str] = {}

    def keep(raw: dict) -> str | None:
        if raw.get(SKE_TYPE) not in types:
            return f"type {raw.get(SKE_TYPE)!r} not in {list(types)}"
        if _ske_level(raw) not in levels:
            return f"level {_ske_level(raw)!r} not in {list(levels)}"
        if (
            wanted_domains is not None
            and str(raw.get(SKE_DOMAIN, "")).lower() not in wanted_domains
        ):
            return f"domain {raw.get(SKE_DOMAIN)!r} not in {sorted(wanted_domains)}"
        # Exact duplicates would leak between the train and test parts: keep the first.
        question = _text(raw.get(SKE_QUESTION), "question")
        options, answer = _ske_options(raw)
        return _duplicate(seen, _digest(question, *options), answer, "question")

    def convert(raw: dict, ctx: _Ctx) -> dict:
        question = _text(raw.get(SKE_QUESTION), "question")
        options, answer = _ske_options(raw)
        letters = ", ".join(LETTERS[: len(options)])
        user = f"{question}\n\n{_options_text(options)}\n\nAnswer with one letter ({letters})."
        details = raw.get(SKE_DETAILS) if isinstance(raw.get(SKE_DETAILS), dict) else {}
        meta = {
            "options": options,
            "source_index": ctx.index,
            "type": raw.get(SKE_TYPE),
            "level": _ske_level(raw),
            "science_domain": raw.get(SKE_DOMAIN),
            "task": details.get("task"),
            "subtask": details.get("subtask"),
        }
        meta = {k: v for k, v in meta.items() if v is not None}
        key = _digest(question, *options)
        return _row(name, "science", key, _prompt(SCIKNOWEVAL_SYSTEM, user), answer, meta)

    positions = run.filter(
        keep, (SKE_TYPE, SKE_DETAILS, SKE_LEVEL, SKE_DOMAIN, SKE_QUESTION, SKE_CHOICES, SKE_ANSWER)
    )
    positions = holdout_split(positions, part, test_fraction, split_seed)
    return run.finish(positions, n, seed, convert)


def load_sciknoweval_train(
    n: int | None = None, seed: int = 0, path: PathSpec = None, **options: Any
) -> list[dict]:
    """SciKnowEval L3 2-/4-choice MCQ, the 90% training part (split seed 42)."""
    return _load_sciknoweval("sciknoweval_train", "train", n, seed, path, **options)


def load_sciknoweval_test(
    n: int | None = None, seed: int = 0, path: PathSpec = None, **options: Any
) -> list[dict]:
    """SciKnowEval L3 2-/4-choice MCQ, the 10% held-out part (split seed 42)."""
    return _load_sciknoweval("sciknoweval_test", "test", n, seed, path, **options)


def gpqa_option_order(record_id: str, option_seed: int) -> list[int]:
    """The shuffled order of [correct, incorrect 1, 2, 3] for one GPQA question.

    Depends only on the question's Record ID and the seed, not on which rows are loaded.
    """
    order = [0, 1, 2, 3]
    random.Random(f"gpqa/{option_seed}/{record_id}").shuffle(order)
    return order


def load_gpqa_diamond(
    n: int | None = None,
    seed: int = 0,
    path: PathSpec = None,
    *,
    option_seed: int | None = None,
    strict: bool = True,
    **hub: Any,
) -> list[dict]:
    """GPQA-Diamond with the options shuffled per question (`option_seed`, default `seed`)."""
    _check_n(n)
    name = "gpqa_diamond"
    source = _open(name, path, GPQA_HUB, **{"config": GPQA_CONFIG, "hub_split": "train", **hub})
    run = _Run(name, source, strict)
    shuffle_seed = seed if option_seed is None else option_seed

    def convert(raw: dict, ctx: _Ctx) -> dict:
        question = _text(raw.get(GPQA_QUESTION), "Question")
        choices = [_text(raw.get(GPQA_CORRECT), GPQA_CORRECT)]
        choices += [_text(raw.get(k), k) for k in GPQA_INCORRECT]
        if len(set(choices)) != len(choices):
            raise _Bad("two options have the same text")
        record_id = raw.get(GPQA_ID)
        key = _slug(str(record_id)) if record_id else _digest(question)
        order = gpqa_option_order(key, shuffle_seed)
        options = [choices[k] for k in order]
        answer = LETTERS[order.index(0)]
        user = f"{GPQA_INSTRUCTION}\n\n{question}\n\n{_options_text(options, '({letter}) {text}')}"
        meta = {
            "options": options,
            "option_seed": shuffle_seed,
            "source_index": ctx.index,
            "domain": raw.get(GPQA_DOMAIN),
            "subdomain": raw.get(GPQA_SUBDOMAIN),
        }
        meta = {k: v for k, v in meta.items() if v is not None}
        return _row(name, "science", key, _prompt(None, user), answer, meta)

    return run.finish(run.filter(None), n, seed, convert)


ENTRIES = (
    Benchmark("sciknoweval_train", "science", "train", "mcq_answer_tag", load_sciknoweval_train,
              "SciKnowEval L3 2/4-choice MCQ, 90% split part (seed 42)"),
    Benchmark("sciknoweval_test", "science", "id", "mcq_answer_tag", load_sciknoweval_test,
              "SciKnowEval L3 2/4-choice MCQ, 10% held out (seed 42)"),
    Benchmark("gpqa_diamond", "science", "ood", "mcq_boxed_letter", load_gpqa_diamond,
              "GPQA-Diamond, options shuffled per seed"),
)  # fmt: skip
