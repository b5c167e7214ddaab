"""Math benchmarks: DAPO-Math-17k (train), AIME 2024 + 2025 (id), MATH-500 (ood)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from cptlab.domains.paper.common import (
    BadRawRow,
    RowContext,
    canonical_row,
    content_digest,
    duplicate_reason,
    first_present,
    last_user_text,
    required_text,
    slug,
)
from cptlab.domains.paper.pipeline import Load, Recipe
from cptlab.domains.registry import Benchmark, Prompt, Published, Source
from cptlab.verifiers.math import last_boxed

# The study's math prompt is "{problem}\n\n" + this (Moenupa/SDPO-CL, data/format/prompts.py:
# PROMPT), for AIME, MATH-500 and every math problem it formats.
MATH_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."

# DAPO-Math-17k (BytedTsinghua-SIA/DAPO-Math-17k, verl parquet format, split "train"; the
# repository holds data/dapo-math-17k.parquet):
#   prompt       [{"role": "user", "content": DAPO_PREFIX + problem + DAPO_SUFFIX}]
#   reward_model {"ground_truth": "34", "style": "rule-lean"}
#   extra_info   {"index": "<uuid>"}, data_source "math_dapo", ability "MATH".
# The hub copy repeats each of its ~17.9k problems ~100 times; duplicates are dropped by rule.
# The deduplicated variant open-r1/DAPO-Math-17k-Processed has `prompt` as the bare problem
# string and the answer in `solution` (also accepted).
DAPO_HUB = "BytedTsinghua-SIA/DAPO-Math-17k"
# A commit public code pins beside data/dapo-math-17k.parquet's size and sha256 (found by
# search; not read from the hub here).
DAPO_REVISION = "65877096c24ffa7abc4e4fa5edb95cf3413a5674"
DAPO_PROMPT = "prompt"
DAPO_REWARD = "reward_model"  # ["ground_truth"]
DAPO_SOLUTION = "solution"  # processed variant
DAPO_EXTRA = "extra_info"  # ["index"]
DAPO_PREFIX = (
    "Solve the following math problem step by step. The last line of your response should be "
    "of the form Answer: $Answer (without quotes) where $Answer is the answer to the problem."
)
DAPO_SUFFIX = 'Remember to put your answer on its own line after "Answer:".'

# AIME 2024 + 2025, the study's sources (Moenupa/SDPO-CL, data/format/math.py and docs/DATA.md):
# math-ai/aime24 (id, problem, solution = the boxed answer, url) and math-ai/aime25 (problem,
# answer, id), each one test.jsonl, split "test". Other mirrors differ: HuggingFaceH4/aime_2024
# (id, problem, solution, answer, url, year), Maxwell-Jia/AIME_2024 (ID, Problem, Solution,
# Answer), opencompass/AIME2025 (question, answer), the AI-MO copies (answer "025"). The first
# present alias wins.
AIME_HUB = ("math-ai/aime24", "math-ai/aime25")
# main's commits as public dataset cards record them, with 30 rows each (found by search; not
# read from the hub here).
AIME_REVISIONS = (
    "83a7f387baaa524a8bda0022eac0541582297103",
    "563bb8404243c5f09de6ec262f2db674fe5bce9b",
)
AIME_PROBLEM = ("problem", "Problem", "question")
AIME_ANSWER = ("answer", "Answer")
AIME_SOLUTION = ("solution", "Solution")  # fallback: a boxed or short final answer
AIME_ID = ("id", "ID", "problem_idx", "url")

# MATH-500: the study reads math-ai/math500 (data/format/math.py; problem, answer), a copy of
# HuggingFaceH4/MATH-500 (split "test", test.jsonl):
#   problem, solution, answer, subject, level (int 1-5), unique_id ("test/precalculus/807.json").
# No commit of math-ai/math500 could be verified here: data.options.math500.revision must name
# one (`cptlab fetch-data` prints the commit main is at). HuggingFaceH4/MATH-500 at
# MATH500_H4_REVISION (a commit public code pins) is the other source:
# {path: HuggingFaceH4/MATH-500, revision: <it>}.
MATH500_HUB = "math-ai/math500"
MATH500_REVISION = None
MATH500_H4_HUB = "HuggingFaceH4/MATH-500"
MATH500_H4_REVISION = "6e4ed1a2a79af7d8630a6b768ec859cb5af4d3be"
MATH500_PROBLEM = "problem"
MATH500_ANSWER = "answer"
MATH500_ID = "unique_id"


def _math_answer(raw: dict, answer_keys: Sequence[str], solution_keys: Sequence[str]) -> str:
    value = first_present(raw, answer_keys)
    if value is None:
        solution = first_present(raw, solution_keys)
        if solution is None:
            raise BadRawRow(f"missing answer (none of {list(answer_keys) + list(solution_keys)})")
        solution = str(solution)
        boxed = last_boxed(solution)
        if boxed is not None:
            value = boxed
        elif len(solution.strip()) <= 40 and "\n" not in solution.strip():
            value = solution
        else:
            raise BadRawRow("no answer field, and the solution has no \\boxed{} final answer")
    text = required_text(value, "answer")
    boxed = last_boxed(text)
    return required_text(boxed, "answer") if boxed is not None else text


# The study's prompt format (the instruction's braces doubled for str.format).
MATH_PROMPT = Prompt("{problem}\n\n" + MATH_INSTRUCTION.replace("{}", "{{}}"))


def _math_row(name: str, key: str, problem: str, answer: str, meta: dict) -> dict:
    return canonical_row(name, "math", key, MATH_PROMPT.messages(problem=problem), answer, meta)


def _dapo_problem(raw: dict) -> str:
    prompt = raw.get(DAPO_PROMPT)
    if isinstance(prompt, list):
        text = last_user_text(prompt, "problem", "prompt has no user message")
    else:
        text = required_text(prompt, "problem")
    if text.startswith(DAPO_PREFIX):
        text = text[len(DAPO_PREFIX) :]
    if text.rstrip().endswith(DAPO_SUFFIX):
        text = text.rstrip()[: -len(DAPO_SUFFIX)]
    return required_text(text, "problem")


def _dapo_answer(raw: dict) -> str:
    reward = raw.get(DAPO_REWARD)
    value = reward.get("ground_truth") if isinstance(reward, dict) else None
    if value is None:
        value = raw.get(DAPO_SOLUTION)
    return required_text(value, "answer (reward_model.ground_truth)")


def _keep_dapo(raw: dict, load: Load) -> str | None:
    if not load["dedupe"]:
        return None
    problem, answer = _dapo_problem(raw), _dapo_answer(raw)
    return duplicate_reason(load.state.setdefault("seen", {}), " ".join(problem.split()), answer,
                      "problem")  # fmt: skip


def _convert_dapo(raw: dict, ctx: RowContext, load: Load) -> dict:
    problem, answer = _dapo_problem(raw), _dapo_answer(raw)
    extra = raw.get(DAPO_EXTRA)
    meta = {"source_index": ctx.index}
    if isinstance(extra, dict) and extra.get("index") is not None:
        meta["source_id"] = str(extra["index"])
    return _math_row("dapo_math", content_digest(" ".join(problem.split())), problem, answer, meta)


def _aime_year(raw: dict, raw_id: Any, label: str) -> str | None:
    """The contest year from a `year` field, the id/url ("2024-I-3"), or the source name."""
    if raw.get("year"):
        return str(raw["year"])
    found = re.search(r"(?<!\d)(20\d\d)(?!\d)", f"{raw_id} {raw.get('url', '')} {label}")
    if found:
        return found.group(1)
    found = re.search(r"aime[_-]?(\d\d)(?!\d)", label, re.IGNORECASE)
    return "20" + found.group(1) if found else None


def _convert_aime(raw: dict, ctx: RowContext, load: Load) -> dict:
    problem = required_text(first_present(raw, AIME_PROBLEM), "problem")
    answer = _math_answer(raw, AIME_ANSWER, AIME_SOLUTION)
    if not re.fullmatch(r"\d{1,3}", answer):
        raise BadRawRow(f"AIME answer {answer[:40]!r} is not an integer 0-999")
    answer = str(int(answer))
    raw_id = first_present(raw, AIME_ID)
    key = f"{slug(ctx.label)}-{slug(str(raw_id)) if raw_id is not None else ctx.local}"
    meta = {"source": ctx.label, "source_index": ctx.local}
    if raw_id is not None:
        meta["source_id"] = str(raw_id)
    year = _aime_year(raw, raw_id, ctx.label)
    if year is not None:
        meta["year"] = year
    return _math_row("aime", key, problem, answer, meta)


def _convert_math500(raw: dict, ctx: RowContext, load: Load) -> dict:
    problem = required_text(raw.get(MATH500_PROBLEM), "problem")
    answer = _math_answer(raw, (MATH500_ANSWER,), ("solution",))
    raw_id = raw.get(MATH500_ID)
    key = str(raw_id).removesuffix(".json") if raw_id else f"{ctx.index}"
    meta = {"source_index": ctx.index, "subject": raw.get("subject"), "level": raw.get("level")}
    meta = {k: v for k, v in meta.items() if v is not None}
    return _math_row("math500", key, problem, answer, meta)


ENTRIES = (
    Benchmark("dapo_math", "math", "train", "math_boxed",
              Recipe("dapo_math", "math",
                     Source(DAPO_HUB, split="train", revision=DAPO_REVISION), MATH_PROMPT,
                     _convert_dapo, keep=_keep_dapo, columns=(DAPO_PROMPT, DAPO_REWARD,
                     DAPO_SOLUTION), options={"dedupe": True}),
              "DAPO-Math-17k, deduplicated", study_verifier="study_math"),
    Benchmark("aime", "math", "id", "math_boxed",
              Recipe("aime", "math", Source(AIME_HUB, split="test", revision=AIME_REVISIONS),
                     MATH_PROMPT, _convert_aime,
                     published=(Published(60, 60, "AIME 2024 I+II and 2025 I+II, 30 problems "
                                          "a year", rows=60),)),
              "AIME 2024 + 2025 (one source per year)", study_verifier="study_math"),
    Benchmark("math500", "math", "ood", "math_boxed",
              Recipe("math500", "math",
                     Source(MATH500_HUB, split="test", revision=MATH500_REVISION),
                     MATH_PROMPT, _convert_math500,
                     published=(Published(500, 500, "MATH-500 (Lightman et al. 2023)",
                                          rows=500),)),
              "MATH-500", study_verifier="study_math"),
)  # fmt: skip
