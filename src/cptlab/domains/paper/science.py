"""Science benchmarks: SciKnowEval L3 MCQ (train / id, held-out split), GPQA-Diamond (ood)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cptlab.domains.paper.common import (
    LETTERS,
    BadRawRow,
    RowContext,
    canonical_row,
    chat_prompt,
    content_digest,
    required_text,
    slug,
)
from cptlab.domains.paper.pipeline import Holdout, Load, Recipe
from cptlab.domains.registry import Benchmark, Prompt, Published, Source

# SciKnowEval (hicai-zju/SciKnowEval, one split "test"; at the pinned commit one config, "v2",
# data/v2/sciknoweval_test_v2.jsonl; the study loads the repository without a revision):
#   question, choices {"text": [...], "label": ["A", ...]}, answerKey "B",
#   type ("mcq-4-choices", "mcq-2-choices", "true_or_false", "open-ended-qa", "filling",
#   "relation_extraction"), domain ("Biology", "Chemistry", "Material", "Physics"),
#   details {"level": "L1".."L5", "task", "subtask", "source"}, prompt {"default": ...}.
# Some copies carry `level` at the top level instead of in `details` (both accepted).
SCIKNOWEVAL_HUB = "hicai-zju/SciKnowEval"
# The SciKnowEval V2 commit public code links to (found by search; not read from the hub here).
SCIKNOWEVAL_REVISION = "92ef969ad0a8bd6e195e0ac18af2c46e307e0cc2"
SKE_QUESTION = "question"
SKE_CHOICES = "choices"  # {"text": [...], "label": [...]}
SKE_ANSWER = "answerKey"
SKE_TYPE = "type"
SKE_DOMAIN = "domain"
SKE_DETAILS = "details"  # {"level", "task", "subtask"}
SKE_LEVEL = "level"
SKE_TYPES = ("mcq-4-choices", "mcq-2-choices")
SKE_LEVELS = ("L3",)
# The study's science stage is SciKnowEval's Chemistry domain (its docs/DATA.md table).
SKE_DOMAINS = ("Chemistry",)
SKE_ALL_DOMAINS = ("biology", "chemistry", "material", "physics")
# The study's prompt (Moenupa/SDPO-CL, data/format/sciknoweval.py: SYSTEM_PROMPT and format()).
SCIKNOWEVAL_SYSTEM = """
Given a question and four options, please select the right answer. Respond in the following format:
<reasoning>
...
</reasoning>
<answer>
...
</answer>

For the answer, only output the letter corresponding to the correct option (A, B, C, or D), and nothing else. Do not restate the answer text. For example, if the answer is "A", just output:
<answer>
A
</answer>
"""  # noqa: E501
SCIKNOWEVAL_SUFFIX = "\nPlease reason step by step."  # data/format/sciknoweval.py: format()
SCIKNOWEVAL_PROMPT = Prompt("{question}\n\n{options}" + SCIKNOWEVAL_SUFFIX, SCIKNOWEVAL_SYSTEM)

# The study's prepared files (Moenupa/SDPO-CL datasets/sciknoweval/<domain>.json and its
# <domain>/{train,test}.json split): rows already in the prompt format above,
#   idx (position in the domain's filtered hub rows), kind "mcq", dataset "sciknoweval",
#   system, prompt (user text), answer (letter), description, tests, elo, embedding.
STUDY_KIND = "kind"
STUDY_PROMPT = "prompt"
STUDY_SYSTEM = "system"
STUDY_ANSWER = "answer"
STUDY_INDEX = "idx"


# GPQA (Idavidrein/gpqa, config "gpqa_diamond" = gpqa_diamond.csv, split "train"; gated: a token
# whose account accepted its terms; also the CSV release):
#   Question, Correct Answer, Incorrect Answer 1..3, Record ID, High-level domain, Subdomain.
# Some questions repeat an incorrect option, and some options have leading or trailing spaces:
# the study keeps both rows and spaces (its prompt inserts the texts as they are).
GPQA_HUB = "Idavidrein/gpqa"
# A commit public code pins, with gpqa_diamond.csv's sha256 (found by search; not read here).
GPQA_REVISION = "633f5ee89ab8ad4522a9f850766b73f62147ffdd"
GPQA_CONFIG = "gpqa_diamond"
GPQA_QUESTION = "Question"
GPQA_CORRECT = "Correct Answer"
GPQA_INCORRECT = ("Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")
GPQA_ID = "Record ID"
GPQA_DOMAIN = "High-level domain"
GPQA_SUBDOMAIN = "Subdomain"
# The study's prompt (Moenupa/SDPO-CL, data/format/gpqa.py: PROMPT; options joined by ", ").
GPQA_PROMPT = """Return your final response within \\boxed{{}} and only include the letter choice (A, B, C, or D) as your final response.
Problem: {problem}
Options: {options}
Answer:"""  # noqa: E501
# The prompt format: the template above, filled once (its `\\boxed{{}}` becomes `\\boxed{}`).
GPQA_FORMAT = Prompt("{text}")


def _ske_level(raw: dict) -> Any:
    details = raw.get(SKE_DETAILS)
    if isinstance(details, dict) and details.get("level") is not None:
        return details["level"]
    return raw.get(SKE_LEVEL)


def _ske_options(raw: dict) -> tuple[list[str], list[str], str]:
    """(option texts, their labels, the answer label), checked; texts are kept as published."""
    choices = raw.get(SKE_CHOICES)
    if not isinstance(choices, dict):
        raise BadRawRow("choices must be {'text': [...], 'label': [...]}")
    texts, labels = choices.get("text"), choices.get("label")
    if not isinstance(texts, list) or not isinstance(labels, list) or len(texts) != len(labels):
        raise BadRawRow("choices.text and choices.label must be lists of the same length")
    if len(texts) < 2:
        raise BadRawRow(f"{len(texts)} option(s); a multiple-choice question needs 2 or more")
    for k, text in enumerate(texts):
        required_text(text, f"option {k}")
    labels = [required_text(label, f"label {k}") for k, label in enumerate(labels)]
    if labels != list(LETTERS[: len(labels)]):
        raise BadRawRow(f"labels {labels} are not A, B, ... in order")
    key = required_text(raw.get(SKE_ANSWER), "answerKey")
    if key not in labels:
        raise BadRawRow(f"answerKey {key!r} is not one of the labels {labels}")
    return [str(t) for t in texts], labels, key


def _ske_lines(options: Sequence[str], labels: Sequence[str]) -> str:
    return "\n".join(f"{label}: {text}" for label, text in zip(labels, options, strict=True))


def study_options(user: str) -> list[str]:
    """The option texts of a study-format user message (the `A: ...` lines after the question)."""
    body = user.removesuffix(SCIKNOWEVAL_SUFFIX)
    start = body.rfind("\n\nA: ")
    if start < 0:
        raise BadRawRow("prompt has no 'A: ' option line after a blank line")
    rest, options = body[start + len("\n\nA: ") :], []
    for letter in LETTERS[1:]:
        cut = rest.find(f"\n{letter}: ")
        if cut < 0:
            break
        options.append(rest[:cut])
        rest = rest[cut + len(f"\n{letter}: ") :]
    return [*options, rest]


def is_study_file_row(raw: dict) -> bool:
    """A row of the study's prepared files (its prompt format), not a raw hub row."""
    return isinstance(raw.get(STUDY_PROMPT), str) and SKE_QUESTION not in raw


def _study_domain(origin: str) -> str:
    """The science domain of a study file, from its path (chemistry.json, chemistry/test.json)."""
    parts = [Path(part).stem for part in Path(origin.lower()).parts]
    return next((p for p in reversed(parts) if p in SKE_ALL_DOMAINS), slug(parts[-1]))


def _keep_sciknoweval(raw: dict, load: Load) -> str | None:
    """The study's filters (data/format/sciknoweval.py); a study-prepared row is kept as is."""
    if is_study_file_row(raw):
        return None
    if raw.get(SKE_TYPE) not in load["types"]:
        return f"type {raw.get(SKE_TYPE)!r} not in {list(load['types'])}"
    if _ske_level(raw) not in load["levels"]:
        return f"level {_ske_level(raw)!r} not in {list(load['levels'])}"
    domains = load["domains"]
    if domains and raw.get(SKE_DOMAIN) not in domains:
        return f"domain {raw.get(SKE_DOMAIN)!r} not in {sorted(domains)}"
    required_text(raw.get(SKE_QUESTION), "question")
    _ske_options(raw)
    return None


def _group_sciknoweval(load: Load, positions: list[int]) -> dict[str, list[int]]:
    """Each science domain (a raw row's field, a study file's path) is split on its own; the
    study's `idx` of each row is its index within its domain."""
    source, groups = load.run.source, {}
    where = load.state["where"] = {}
    for i in positions:
        raw = source.row(i)
        if is_study_file_row(raw):
            domain = _study_domain(source.locate(i)[0].origin)
            index = raw.get(STUDY_INDEX)
            if isinstance(index, bool) or not isinstance(index, int):
                index = len(groups.get(domain, []))
        else:
            domain = str(raw.get(SKE_DOMAIN) or "unknown")
            index = len(groups.get(domain, []))
        where[i] = (domain, index)
        groups.setdefault(domain, []).append(i)
    return groups


def _convert_sciknoweval(raw: dict, ctx: RowContext, load: Load) -> dict:
    domain, index = load.state["where"][ctx.index]
    if is_study_file_row(raw):
        required_text(raw.get(STUDY_SYSTEM), "system")
        user = required_text(raw.get(STUDY_PROMPT), "prompt")
        answer = required_text(raw.get(STUDY_ANSWER), "answer")
        options = study_options(user)
        if answer not in LETTERS[: len(options)]:
            raise BadRawRow(f"answer {answer!r} is not one of the {len(options)} option letters")
        messages = chat_prompt(raw[STUDY_SYSTEM], raw[STUDY_PROMPT])  # as published, unstripped
        meta = {"options": options, "source_index": ctx.index, "science_domain": domain}
    else:
        options, labels, answer = _ske_options(raw)
        messages = SCIKNOWEVAL_PROMPT.messages(
            question=str(raw[SKE_QUESTION]), options=_ske_lines(options, labels)
        )
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
    meta["study_index"] = index
    key = f"{slug(domain.lower())}-{index}"
    return canonical_row(load.recipe.name, "science", key, messages, answer, meta)


# The study's Chemistry split (Moenupa/SDPO-CL @ d277934, datasets/sciknoweval/chemistry/).
SKE_STUDY_ROWS = {"train": 1890, "test": 210}


def _sciknoweval(name: str, part: str) -> Recipe:
    """SciKnowEval as the study prepares it: filter the hub rows by domain, level and type, then
    split each domain on its own (no de-duplication first, as in the study). `path` may also be
    the study's prepared files: each is one domain, already filtered and formatted (its
    `<domain>.json`, split here; or its `train.json` / `test.json` with ``holdout=None``)."""
    return Recipe(
        name, "science",
        Source(SCIKNOWEVAL_HUB, split="test", revision=SCIKNOWEVAL_REVISION,
               also="a local copy; the study's datasets/sciknoweval/<domain>.json or its splits"),
        SCIKNOWEVAL_PROMPT, _convert_sciknoweval, keep=_keep_sciknoweval,
        columns=(SKE_TYPE, SKE_DETAILS, SKE_LEVEL, SKE_DOMAIN, SKE_QUESTION, SKE_CHOICES,
                 SKE_ANSWER, STUDY_PROMPT, STUDY_SYSTEM, STUDY_ANSWER, STUDY_INDEX),
        holdout=Holdout(part), group=_group_sciknoweval,
        options={"levels": SKE_LEVELS, "types": SKE_TYPES, "domains": SKE_DOMAINS},
        published=(Published(SKE_STUDY_ROWS[part], SKE_STUDY_ROWS[part],
                             f"the study's Chemistry {part} split (its chemistry/{part}.json)",
                             rows=SKE_STUDY_ROWS[part],
                             options={"levels": SKE_LEVELS, "types": SKE_TYPES,
                                      "domains": SKE_DOMAINS, "holdout": 0.1, "split_seed": 42}),),
    )  # fmt: skip


def gpqa_option_order(record_id: str, option_seed: int) -> list[int]:
    """The shuffled order of [correct, incorrect 1, 2, 3] for one GPQA question.

    Depends only on the question's Record ID and the seed, not on which rows are loaded.
    """
    order = [0, 1, 2, 3]
    random.Random(f"gpqa/{option_seed}/{record_id}").shuffle(order)
    return order


def _convert_gpqa(raw: dict, ctx: RowContext, load: Load) -> dict:
    """Options shuffled per question with `option_seed` (default: the load's `seed`), then
    formatted as the study's data/format/gpqa.py does: the texts as published (repeated
    incorrect options kept, spaces kept), the answer the first letter whose text is the correct
    answer's."""
    question = required_text(raw.get(GPQA_QUESTION), "Question")
    for field in (GPQA_CORRECT, *GPQA_INCORRECT):
        required_text(raw.get(field), field)
    choices = [str(raw[field]) for field in (GPQA_CORRECT, *GPQA_INCORRECT)]
    record_id = raw.get(GPQA_ID)
    key = slug(str(record_id)) if record_id else content_digest(question)
    shuffle_seed = load.seed if load["option_seed"] is None else load["option_seed"]
    order = gpqa_option_order(key, shuffle_seed)
    options = [choices[k] for k in order]
    answer = LETTERS[options.index(choices[0])]
    listed = ", ".join(f"{LETTERS[k]}) {text}" for k, text in enumerate(options))
    text = GPQA_PROMPT.format(problem=raw[GPQA_QUESTION], options=listed)
    meta = {
        "options": options,
        "option_seed": shuffle_seed,
        "source_index": ctx.index,
        "domain": raw.get(GPQA_DOMAIN),
        "subdomain": raw.get(GPQA_SUBDOMAIN),
    }
    meta = {k: v for k, v in meta.items() if v is not None}
    return canonical_row(
        "gpqa_diamond", "science", key, GPQA_FORMAT.messages(text=text), answer, meta
    )


ENTRIES = (
    Benchmark("sciknoweval_train", "science", "train", "mcq_answer_tag",
              _sciknoweval("sciknoweval_train", "train"),
              "SciKnowEval L3 2/4-choice MCQ (Chemistry), 90% of each domain (seed 42)",
              study_verifier="study_mcq_answer_tag"),
    Benchmark("sciknoweval_test", "science", "id", "mcq_answer_tag",
              _sciknoweval("sciknoweval_test", "test"),
              "SciKnowEval L3 2/4-choice MCQ (Chemistry), 10% of each domain held out",
              study_verifier="study_mcq_answer_tag"),
    Benchmark("gpqa_diamond", "science", "ood", "mcq_boxed_letter",
              Recipe("gpqa_diamond", "science",
                     Source(GPQA_HUB, config=GPQA_CONFIG, split="train",
                            revision=GPQA_REVISION, gated=True, also="the CSV release"),
                     GPQA_FORMAT, _convert_gpqa, options={"option_seed": None},
                     published=(Published(198, 198, "GPQA-Diamond (Rein et al. 2023)",
                                          rows=198),)),
              "GPQA-Diamond, options shuffled per seed", study_verifier="study_gpqa"),
)  # fmt: skip
