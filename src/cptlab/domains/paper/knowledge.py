"""Knowledge benchmark: MMLU-Redux 2.0 (ood), rows the annotators found sound."""

from __future__ import annotations

from typing import Any

from cptlab.domains.paper.common import (
    LETTERS,
    BadRawRow,
    PathSpec,
    RawSource,
    RowContext,
    canonical_row,
    check_hub_options,
    json_value,
    open_segments,
    open_source,
    options_text,
    path_specs,
    required_text,
    slug,
)
from cptlab.domains.paper.hub import HubRepo
from cptlab.domains.paper.pipeline import Load, Recipe
from cptlab.domains.registry import Benchmark, Prompt, Published, Source
from cptlab.errors import InputError

# MMLU-Redux 2.0 (edinburgh-dawg/mmlu-redux-2.0, one config per subject, split "test"; the
# repository holds <subject>/data-00000-of-00001.arrow, one Arrow file per subject):
#   question, choices [4 str], answer (int 0-3), error_type ("ok", "bad_question_clarity",
#   "bad_options_clarity", "no_correct_answer", "multiple_correct_answers",
#   "wrong_groundtruth", "expert"), source, correct_answer, potential_reason.
# Local copies: one file per subject, the subject taken from the file's folder or name.
MMLU_REDUX_HUB = "edinburgh-dawg/mmlu-redux-2.0"
# The commit OpenCompass's MMLU-Redux loader pins (found by search; not read from the hub here).
MMLU_REDUX_REVISION = "372ea425445d51e1ba1188c56e5e893f8138621f"
MMLU_QUESTION = "question"
MMLU_CHOICES = "choices"
MMLU_ANSWER = "answer"
MMLU_ERROR_TYPE = "error_type"
MMLU_CORRECT_ANSWER = "correct_answer"
MMLU_SUBJECT = "subject"  # not in the raw rows; accepted if a copy adds it
MMLU_KEEP_ERROR_TYPES = ("ok",)
MMLU_SUBJECTS = (
    "abstract_algebra anatomy astronomy business_ethics clinical_knowledge college_biology "
    "college_chemistry college_computer_science college_mathematics college_medicine "
    "college_physics computer_security conceptual_physics econometrics electrical_engineering "
    "elementary_mathematics formal_logic global_facts high_school_biology "
    "high_school_chemistry high_school_computer_science high_school_european_history "
    "high_school_geography high_school_government_and_politics high_school_macroeconomics "
    "high_school_mathematics high_school_microeconomics high_school_physics "
    "high_school_psychology high_school_statistics high_school_us_history "
    "high_school_world_history human_aging human_sexuality international_law jurisprudence "
    "logical_fallacies machine_learning management marketing medical_genetics miscellaneous "
    "moral_disputes moral_scenarios nutrition philosophy prehistory professional_accounting "
    "professional_law professional_medicine professional_psychology public_relations "
    "security_studies sociology us_foreign_policy virology world_religions"
).split()


def _mmlu_subject(raw: dict, label: str) -> str:
    if raw.get(MMLU_SUBJECT):
        return str(raw[MMLU_SUBJECT])
    parts = label.split("/")
    # Hub segments are labelled "<hub name>/<subject>", local files "<subject>/<file>" or
    # "<subject>"; take the part that is a known subject, else the folder / file name.
    for part in reversed(parts):
        if part in MMLU_SUBJECTS:
            return part
    return parts[0] if len(parts) > 1 else parts[-1]


def _mmlu_index(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise BadRawRow(f"{what} must be an option index or letter")
    if isinstance(value, int):
        index = value
    else:
        text = required_text(value, what)
        if text.isdigit():
            index = int(text)
        elif len(text) == 1 and text.upper() in LETTERS:
            index = LETTERS.index(text.upper())
        else:
            raise BadRawRow(f"{what} {text[:20]!r} is not an option index or letter")
    return index


# cptlab's prompt (the study publishes none for MMLU-Redux).
MMLU_PROMPT = Prompt(
    "The following is a multiple-choice question about {topic}.\n\n{question}\n\n{options}\n\n"
    'Think step by step, then finish with "The answer is X", where X is the letter of the '
    "correct option."
)


def _open_mmlu(load: Load, path: PathSpec) -> RawSource:
    """Local files or folders (one file per subject), or the hub snapshot: one config per
    subject."""
    name, hub = load.recipe.name, load.hub
    check_hub_options(name, hub)
    if path is None:
        specs: list = load.recipe.hub_repos(None, hub.get("revision"))
    else:
        specs = path_specs(name, path, hub.get("revision"))
    repos = [s for s in specs if isinstance(s, HubRepo)]
    load.state["local"] = not repos
    options = {"hub_split": "test", "cache_dir": None, "hub_kwargs": None}
    options.update({k: v for k, v in hub.items() if k in options})
    if not repos:
        return open_source(name, specs, **options)
    if len(specs) != 1:
        raise InputError(f"{name}: path mixes a hub repository with other sources: {path}")
    (repo,) = repos
    segments = []
    for subject in load["subjects"] or MMLU_SUBJECTS:
        segments += open_segments(name, repo, config=hub.get("config") or subject,
                                  label=f"{repo.repo}/{subject}", **options)  # fmt: skip
    return RawSource(name, segments)


def _select_subjects(load: Load, source: RawSource) -> RawSource:
    """Local files of subjects not in `subjects` are excluded (the hub reads only those)."""
    wanted = load["subjects"]
    if not wanted or not load.state["local"]:
        return source
    kept = []
    for segment in source.segments:
        if _mmlu_subject({}, segment.label) in wanted:
            kept.append(segment)
        else:
            load.run.excluded["subject not selected"] += len(segment)
    return RawSource(source.dataset, kept)


def _keep_mmlu(raw: dict, load: Load) -> str | None:
    """Rows whose error_type is not kept are excluded, counted per error type;
    `fix_wrong_groundtruth` keeps "wrong_groundtruth" rows with the annotators' answer."""
    kept = set(load["keep_error_types"]) | (
        {"wrong_groundtruth"} if load["fix_wrong_groundtruth"] else set()
    )
    error_type = raw.get(MMLU_ERROR_TYPE)
    return None if error_type in kept else f"error_type={error_type!r}"


def _convert_mmlu(raw: dict, ctx: RowContext, load: Load) -> dict:
    subject = _mmlu_subject(raw, ctx.label)
    question = required_text(raw.get(MMLU_QUESTION), "question")
    choices = json_value(raw.get(MMLU_CHOICES), "choices")
    if not isinstance(choices, list) or len(choices) < 2:
        raise BadRawRow("choices must be a list of 2+ options")
    options = [required_text(c, f"option {k}") for k, c in enumerate(choices)]
    index = _mmlu_index(raw.get(MMLU_ANSWER), "answer")
    error_type = raw.get(MMLU_ERROR_TYPE)
    answer_from = "answer"
    if error_type == "wrong_groundtruth" and load["fix_wrong_groundtruth"]:
        # The MMLU-Redux authors' `correct_redux` takes `correct_answer` only when it is
        # given; a row whose annotators gave none keeps the published `answer`.
        correct = raw.get(MMLU_CORRECT_ANSWER)
        if correct is not None and str(correct).strip():
            index = _mmlu_index(correct, "correct_answer")
            answer_from = "correct_answer"
    if not 0 <= index < len(options):
        raise BadRawRow(f"answer index {index} out of range for {len(options)} options")
    messages = MMLU_PROMPT.messages(
        topic=subject.replace("_", " "), question=question, options=options_text(options)
    )
    meta = {"options": options, "subject": subject, "error_type": error_type,
            "answer_from": answer_from, "source_index": ctx.local}  # fmt: skip
    key = f"{slug(subject)}-{ctx.local}"
    return canonical_row("mmlu_redux", "knowledge", key, messages, LETTERS[index], meta)


MMLU_OPTIONS = {"keep_error_types": MMLU_KEEP_ERROR_TYPES, "fix_wrong_groundtruth": False,
                "subjects": None}  # fmt: skip
# 5,700 questions, 370 of them not error_type "ok" (lm-evaluation-harness's mmlu_redux task
# reads fxmarty/mmlu-redux-2.0-ok, 5,330 rows); `fix_wrong_groundtruth` adds the
# wrong_groundtruth rows back, whose number is not published.
MMLU_PUBLISHED = (
    Published(5330, 5330, "MMLU-Redux 2.0's 5,330 rows of error_type 'ok'", rows=5330,
              options=MMLU_OPTIONS),
    Published(5330, 5700, "5,330 rows of error_type 'ok' and the wrong_groundtruth rows of its "
              "5,700", options={**MMLU_OPTIONS, "fix_wrong_groundtruth": True}),
)  # fmt: skip

ENTRIES = (
    Benchmark("mmlu_redux", "knowledge", "ood", "mcq_letter",
              Recipe("mmlu_redux", "knowledge",
                     Source(MMLU_REDUX_HUB, split="test", revision=MMLU_REDUX_REVISION,
                            also="local files, one per subject"),
                     MMLU_PROMPT, _convert_mmlu, keep=_keep_mmlu, columns=(MMLU_ERROR_TYPE,),
                     open=_open_mmlu, expand=_select_subjects, options=MMLU_OPTIONS,
                     published=MMLU_PUBLISHED),
              "MMLU-Redux 2.0, error_type 'ok' rows"),
)  # fmt: skip
