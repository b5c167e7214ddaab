"""The study's real benchmarks: one registry entry per dataset split, RAW schema -> canonical rows.

Design
------
Every entry's loader is called as ``loader(n=None, seed=0, path=None, **options)`` and returns
a list of canonical rows (see `cptlab.rows`). The work is split in five fixed stages so that
every loader behaves the same way:

1. **Open** (`_open`): ``path`` is a local file or folder (``.json``, ``.jsonl``, ``.parquet``,
   ``.csv``), or, when no such path exists, a Hugging Face hub dataset name passed to
   ``datasets.load_dataset(name, config, split=..., cache_dir=...)``, so a cluster with a
   populated HF cache works offline (``HF_DATASETS_OFFLINE=1``). ``path=None`` means the
   dataset's documented hub name. Nothing is read or downloaded at import time.
   JSON/JSONL files are read with the standard library, not with ``datasets``: Arrow unifies
   the schemas of nested objects across rows and pads every missing key with ``None``, which
   corrupts exactly the heterogeneous fields these datasets carry (BFCL function schemas and
   possible answers, ToolAlpaca API documents). JSONL files are indexed by byte offset and
   parsed row by row, so LiveCodeBench's multi-GB test files are never held in memory whole.
   Parquet/CSV files and hub datasets go through ``datasets``; the converters of the
   nested-schema datasets drop the ``None`` padding Arrow adds (`_drop_none`). BFCL's hub
   files are fetched as files (``huggingface_hub.hf_hub_download``) and read like local ones.
2. **Filter** by the study's rules (level/type for SciKnowEval, ``error_type`` for MMLU-Redux,
   the code subset of Dolci, duplicates, ...). Rows excluded by a rule are counted per reason,
   logged as a warning and kept in `EXCLUSIONS[name]` (see `exclusions`): never silently.
3. **Split** train/test where the study holds out part of one dataset (SciKnowEval, and by
   default ToolAlpaca and Dolci): the permutation is the one ``datasets``'
   ``Dataset.train_test_split(test_size=f, seed=s)`` draws (numpy PCG64), so the split matches
   the public SDPO data preparation on the same filtered rows (SDPO filters one SciKnowEval
   domain at a time: ``domains=["Chemistry"]`` reproduces that).
4. **Subsample** ``n`` rows with ``random.Random(seed)`` (sorted, so rows keep source order).
5. **Convert** each selected raw row with the study's prompt format. A raw row that cannot be
   converted (missing answer, empty question, bad JSON, ...) raises `RowError` naming the
   dataset, the raw row index, where it is (file:line) and the problem. With ``strict=False``
   such rows are instead counted and logged like rule exclusions.

Row ids are ``<benchmark>-<key>`` where the key is the dataset's own id when it has one,
otherwise a hash of the row's content: stable across calls, seeds and subsample sizes.
Code rows have no reference program: their `answer` is a fixed note (`CODE_ANSWER`) and the
verifiers run ``metadata["tests"]``.

Defaults where the study is silent (all are loader options)
-----------------------------------------------------------
- SciKnowEval: all four science domains pooled (``domains=None``), levels ``("L3",)``.
- ToolAlpaca and Dolci: the test part is 10% of the rows (``holdout=0.1``, ``split_seed=42``),
  split by instance; ``holdout=None`` takes a whole file as the split (e.g. ToolAlpaca's
  eval_simulated.json). Failed ToolAlpaca generations (no reference calls) are excluded.
- Dolci: its "code" rows (assert tests, `python_unit_tests`) and "code_stdio" rows
  (stdin/stdout, `stdio_tests`) are separate entries, as one entry has one verifier.
- LiveCodeBench: all of release_v6, no contest-date window (``start_date`` / ``end_date``);
  functional problems mapped to stdin/stdout with a JSON driver (``functional="skip"``).
- GPQA: options shuffled per question with ``option_seed`` (default: the loader's ``seed``).
- MMLU-Redux: only ``error_type == "ok"`` rows (``keep_error_types``).
- DAPO: exact duplicate problems dropped (the hub copy repeats each ~100 times).

Raw schemas
-----------
The field names below are module constants with the documented schema they come from. They
were written from knowledge of the public datasets (dataset cards and the loaders of their
public evaluation code) and spot-checked against public code that reads them; they were not
checked against downloaded copies of the data (no hub access here). Where datasets exist in
several published variants, the converters accept the known aliases (e.g. AIME mirrors).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import json
import logging
import math
import pickle
import random
import re
import zlib
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cptlab.domains.registry import Benchmark, register_benchmark
from cptlab.rows import RowError
from cptlab.verifiers.math import last_boxed

logger = logging.getLogger(__name__)

LETTERS = "ABCDEFGHIJ"
LOCAL_SUFFIXES = (".json", ".jsonl", ".parquet", ".csv")

# Rows excluded by a rule at the last load of each benchmark: {benchmark: {reason: count}}.
EXCLUSIONS: dict[str, dict[str, int]] = {}


def exclusions(name: str) -> dict[str, int]:
    """Rows the last load of benchmark `name` excluded, counted per reason ({} if none)."""
    return dict(EXCLUSIONS.get(name, {}))


# ===== Raw schemas ==============================================================================

# Math prompt: the usual Qwen math instruction; the study scores the last \boxed{}.
MATH_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."

# DAPO-Math-17k (BytedTsinghua-SIA/DAPO-Math-17k, verl parquet format, split "train"):
#   prompt       [{"role": "user", "content": DAPO_PREFIX + problem + DAPO_SUFFIX}]
#   reward_model {"ground_truth": "34", "style": "rule-lean"}
#   extra_info   {"index": "<uuid>"}, data_source "math_dapo", ability "MATH".
# The hub copy repeats each of its ~17.9k problems ~100 times; duplicates are dropped by rule.
# The deduplicated variant open-r1/DAPO-Math-17k-Processed has `prompt` as the bare problem
# string and the answer in `solution` (also accepted).
DAPO_HUB = "BytedTsinghua-SIA/DAPO-Math-17k"
DAPO_PROMPT = "prompt"
DAPO_REWARD = "reward_model"  # ["ground_truth"]
DAPO_SOLUTION = "solution"  # processed variant
DAPO_EXTRA = "extra_info"  # ["index"]
DAPO_PREFIX = (
    "Solve the following math problem step by step. The last line of your response should be "
    "of the form Answer: $Answer (without quotes) where $Answer is the answer to the problem."
)
DAPO_SUFFIX = 'Remember to put your answer on its own line after "Answer:".'

# AIME 2024 + 2025. Mirrors differ: math-ai/aime24 (problem, solution = boxed answer, id, url),
# math-ai/aime25 (problem, answer, id), HuggingFaceH4/aime_2024 (id, problem, solution,
# answer, url, year), Maxwell-Jia/AIME_2024 (ID, Problem, Solution, Answer),
# opencompass/AIME2025 (question, answer). The first present alias wins.
AIME_HUB = ("math-ai/aime24", "math-ai/aime25")
AIME_PROBLEM = ("problem", "Problem", "question")
AIME_ANSWER = ("answer", "Answer")
AIME_SOLUTION = ("solution", "Solution")  # fallback: a boxed or short final answer
AIME_ID = ("id", "ID", "problem_idx", "url")

# MATH-500 (HuggingFaceH4/MATH-500, split "test"):
#   problem, solution, answer, subject, level (int 1-5), unique_id ("test/precalculus/807.json").
MATH500_HUB = "HuggingFaceH4/MATH-500"
MATH500_PROBLEM = "problem"
MATH500_ANSWER = "answer"
MATH500_ID = "unique_id"

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
SPLIT_SEED = 42
TEST_FRACTION = 0.1
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

# ToolAlpaca (github.com/tangqiaoyu/ToolAlpaca: data/train_data.json, data/eval_simulated.json,
# data/eval_real.json; no canonical hub copy): a JSON list of API entries
#   Name, Description, Category, Introduction, Documentation (OpenAPI JSON string),
#   NLDocumentation, Function_Description {function name: description incl. parameters},
#   Instructions [str], Instances [{input, output, Final Thought,
#       intermediate_steps: [[[action, action_input (JSON string), log], observation], ...]}]
#   Golden_Answers [[{"Action", "Action_Input"}], ...] (eval files, one list per instruction).
# An instance without intermediate steps is a failed generation ({"error": ...}): excluded.
TOOLALPACA_NAME = "Name"
TOOLALPACA_DESCRIPTION = ("Description", "Introduction")
TOOLALPACA_FUNCTIONS = "Function_Description"
TOOLALPACA_NLDOC = "NLDocumentation"
TOOLALPACA_INSTRUCTIONS = "Instructions"
TOOLALPACA_INSTANCES = "Instances"
TOOLALPACA_GOLDEN = "Golden_Answers"
TOOLALPACA_STEPS = "intermediate_steps"
# ToolAlpaca's agent always offers this tool to ask the user for missing information.
TOOLALPACA_GET_DETAILS = (
    "getDetails",
    'Ask the user for details that are missing. Input: {"Question": "<what to ask>"}',
)
TOOLALPACA_SYSTEM = """You can use the tools of the API "{api}" to help the user.
{description}

Tools:
{tools}

Use this format:
Thought: reason about what to do next
Action: the tool to call, one of [{names}]
Action Input: the tool's input, one JSON object
... (repeat Thought / Action / Action Input for every call that is needed)
Thought: I have made every call that is needed
Final Answer: a short answer for the user

You will not see the tools' outputs: write all the calls the request needs, with complete \
inputs, then the Final Answer."""

# BFCL v4 (github.com/ShishirPatil/gorilla, berkeley-function-call-leaderboard/bfcl_eval/data;
# also the hub repo gorilla-llm/Berkeley-Function-Calling-Leaderboard). Two JSONL files
# (named .json): BFCL_v4_multiple.json with
#   id "multiple_0", question [[{"role": "user", "content": ...}]] (turns of messages),
#   function [{"name", "description", "parameters": {"type": "dict", "properties", "required"}}]
# and possible_answer/BFCL_v4_multiple.json with
#   id, ground_truth [{function name: {argument: [allowed values]}}] ("" marks optional).
BFCL_FILE = re.compile(r"BFCL_v\d+_multiple\.json$")
BFCL_ANSWER_DIR = "possible_answer"
BFCL_HUB = "gorilla-llm/Berkeley-Function-Calling-Leaderboard"
BFCL_ID = "id"
BFCL_QUESTION = "question"
BFCL_FUNCTION = "function"
BFCL_GROUND_TRUTH = "ground_truth"
BFCL_SYSTEM = (
    "You are an expert in composing function calls. You are given a question and a set of "
    "possible functions. Based on the question, make one or more function calls to achieve "
    "the purpose. If none of the functions can be used, say so. If the question lacks "
    "parameters that a function requires, say so.\n\n"
    "If you call functions, reply only with the calls, in the format "
    "[func_name1(param_name1=value1, param_name2=value2), func_name2(param=value)], "
    "and no other text.\n\n"
    "Here is the list of functions you can call, in JSON format:\n{functions}"
)

# Dolci-Think-RL-7B (allenai/Dolci-Think-RL-7B, split "train"; Olmo 3 RLVR mixture):
#   prompt "user: ..." (one flat string; some copies use `messages`), ground_truth [str],
#   dataset [label] with label in {"math", "code", "code_stdio", "ifeval",
#   "general-quality", "general-quality_ref"}, id / custom_id, original_dataset, passrate.
# "code" rows: ground_truth = Python assert statements (the list itself, or one JSON string);
# "code_stdio" rows: ground_truth[0] = JSON [{"input", "output"}] or {"inputs", "outputs"},
# sometimes base64(zlib(pickle(...))) ("eJ..."), decoded here with a data-only unpickler.
DOLCI_HUB = "allenai/Dolci-Think-RL-7B"
DOLCI_PROMPT = "prompt"
DOLCI_MESSAGES = "messages"
DOLCI_GROUND_TRUTH = "ground_truth"
DOLCI_DATASET = "dataset"
DOLCI_ID = ("id", "custom_id")
DOLCI_UNIT = "code"
DOLCI_STDIO = "code_stdio"
# Code rows have no reference program; the verifiers run metadata["tests"], not the answer.
CODE_ANSWER = "(no reference solution: scored by the tests in metadata['tests'])"
CODE_UNIT_INSTRUCTION = (
    "Write a Python solution and put the complete code in one ```python code block."
)
CODE_STDIO_INSTRUCTION = (
    "Write a Python program that reads from standard input and writes to standard output, "
    "and put the complete program in one ```python code block."
)

# LiveCodeBench code generation (livecodebench/code_generation_lite; release_v6 = the files
# test.jsonl, test2.jsonl, ..., test6.jsonl):
#   question_title, question_content, platform ("leetcode", "codeforces", "atcoder"),
#   question_id, contest_id, contest_date (ISO), starter_code, difficulty,
#   public_test_cases (JSON string [{"input", "output", "testtype": "stdin"|"functional"}]),
#   private_test_cases (same, as JSON or base64(zlib(pickle(json string)))),
#   metadata (JSON string, {"func_name": ...} for functional problems).
# The hub repo's loading script is not supported by `datasets` >= 4, so the hub default reads
# its JSONL files through `data_files`.
LCB_HUB = "livecodebench/code_generation_lite"
LCB_HUB_FILES = ["test.jsonl"] + [f"test{k}.jsonl" for k in range(2, 7)]
LCB_TITLE = "question_title"
LCB_CONTENT = "question_content"
LCB_PLATFORM = "platform"
LCB_ID = "question_id"
LCB_DATE = "contest_date"
LCB_STARTER = "starter_code"
LCB_DIFFICULTY = "difficulty"
LCB_PUBLIC = "public_test_cases"
LCB_PRIVATE = "private_test_cases"
LCB_METADATA = "metadata"
LCB_SYSTEM = (
    "You are an expert Python programmer. You will be given a programming problem and will "
    "write a correct Python program that meets the specification and passes all tests."
)

# ZebraLogic (allenai/ZebraLogicBench-private, config "grid_mode", split "test"; the public
# allenai/ZebraLogicBench masks the solutions):
#   id "lgp-test-5x6-16", size "5*6", puzzle (text),
#   solution {"header": ["House", "Name", ...], "rows": [["1", "Eric", ...], ...]}.
ZEBRA_HUB = "allenai/ZebraLogicBench-private"
ZEBRA_CONFIG = "grid_mode"
ZEBRA_ID = "id"
ZEBRA_SIZE = "size"
ZEBRA_PUZZLE = "puzzle"
ZEBRA_SOLUTION = "solution"  # {"header", "rows"}

# MMLU-Redux 2.0 (edinburgh-dawg/mmlu-redux-2.0, one config per subject, split "test"):
#   question, choices [4 str], answer (int 0-3), error_type ("ok", "bad_question_clarity",
#   "bad_options_clarity", "no_correct_answer", "multiple_correct_answers",
#   "wrong_groundtruth", "expert"), source, correct_answer, potential_reason.
# Local copies: one file per subject, the subject taken from the file's folder or name.
MMLU_REDUX_HUB = "edinburgh-dawg/mmlu-redux-2.0"
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


# ===== Reading raw data =========================================================================


class _Bad(ValueError):
    """A raw row cannot be converted; the pipeline turns it into a RowError naming the row."""


class _JsonlTable:
    """A JSONL file indexed by byte offset: rows are parsed on access, never all held."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offsets: list[int] = []
        self.lines: list[int] = []
        with open(path, "rb") as handle:
            offset = 0
            for lineno, raw in enumerate(handle, start=1):
                if raw.strip():
                    self.offsets.append(offset)
                    self.lines.append(lineno)
                offset += len(raw)

    def __len__(self) -> int:
        return len(self.offsets)

    def where(self, k: int) -> str:
        return f"{self.path}:{self.lines[k]}"

    def row(self, k: int) -> dict:
        with open(self.path, "rb") as handle:
            handle.seek(self.offsets[k])
            return _parse_json_line(handle.readline())

    def iter_rows(self) -> Iterator[dict | _Bad]:
        with open(self.path, "rb") as handle:
            for raw in handle:
                if raw.strip():
                    try:
                        yield _parse_json_line(raw)
                    except _Bad as err:
                        yield err


def _parse_json_line(raw: bytes) -> dict:
    try:
        value = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise _Bad(f"invalid UTF-8 ({err.reason})") from None
    except json.JSONDecodeError as err:
        raise _Bad(f"invalid JSON ({err.msg})") from None
    if not isinstance(value, dict):
        raise _Bad(f"expected a JSON object, got {type(value).__name__}")
    return value


@dataclass
class _Segment:
    """One file or hub dataset: `label` names it in ids, `origin` in error messages."""

    label: str
    origin: str
    table: Any  # list[dict] | _JsonlTable | datasets.Dataset
    arrow: bool = False  # read through Arrow: nested dicts may carry None padding
    wheres: list[str] | None = None  # per-row locations for synthetic segments

    def __len__(self) -> int:
        return len(self.table)

    def where(self, k: int) -> str:
        if self.wheres is not None:
            return self.wheres[k]
        if isinstance(self.table, _JsonlTable):
            return self.table.where(k)
        return f"{self.origin}[{k}]"

    def row(self, k: int) -> dict:
        if isinstance(self.table, _JsonlTable):
            return self.table.row(k)
        value = self.table[k]
        if not isinstance(value, dict):
            raise _Bad(f"expected an object, got {type(value).__name__}")
        return value

    def iter_rows(self, columns: Sequence[str] | None) -> Iterator[dict | _Bad]:
        if isinstance(self.table, _JsonlTable):
            yield from self.table.iter_rows()
        elif self.arrow:
            table = self.table
            if columns is not None:
                table = table.select_columns([c for c in columns if c in table.column_names])
            yield from table
        else:
            for value in self.table:
                yield value if isinstance(value, dict) else _Bad("expected an object")


@dataclass(frozen=True)
class _Ctx:
    """Where a raw row comes from, for converters: global and in-segment index, label."""

    index: int
    local: int
    label: str
    arrow: bool


class _Source:
    """The raw rows of one benchmark: one or more segments addressed by a global index."""

    def __init__(self, dataset: str, segments: list[_Segment]) -> None:
        self.dataset = dataset
        self.segments = segments
        self.starts: list[int] = []
        total = 0
        for segment in segments:
            self.starts.append(total)
            total += len(segment)
        self.total = total

    def __len__(self) -> int:
        return self.total

    def locate(self, i: int) -> tuple[_Segment, int]:
        for segment, start in zip(reversed(self.segments), reversed(self.starts), strict=True):
            if i >= start:
                return segment, i - start
        raise IndexError(i)

    def where(self, i: int) -> str:
        segment, k = self.locate(i)
        return segment.where(k)

    def ctx(self, i: int) -> _Ctx:
        segment, k = self.locate(i)
        return _Ctx(i, k, segment.label, segment.arrow)

    def row(self, i: int) -> dict:
        segment, k = self.locate(i)
        return segment.row(k)

    def iter_rows(self, columns: Sequence[str] | None = None) -> Iterator[tuple[int, dict | _Bad]]:
        i = 0
        for segment in self.segments:
            for value in segment.iter_rows(columns):
                yield i, value
                i += 1

    def error(self, i: int, problem: str) -> RowError:
        return RowError(f"{self.dataset}: raw row {i} ({self.where(i)}): {problem}")


PathSpec = str | Path | Sequence[str | Path] | None
HUB_OPTIONS = ("config", "hub_split", "cache_dir", "hub_kwargs")


def _check_hub_options(dataset: str, hub: dict) -> None:
    unknown = sorted(set(hub) - set(HUB_OPTIONS))
    if unknown:
        raise TypeError(f"{dataset}: unknown option(s) {unknown}")


def _open(
    dataset: str,
    path: PathSpec,
    default: str | Sequence[str] | None,
    *,
    config: str | None = None,
    hub_split: str | None = None,
    cache_dir: str | None = None,
    hub_kwargs: dict | None = None,
) -> _Source:
    """Open `path` (local files/folders or hub names; `default` when None) as one source.

    The hub options are those of every loader: `config` (hub config name), `hub_split`,
    `cache_dir` (also used for the Arrow cache of local parquet/csv files) and `hub_kwargs`
    (extra keyword arguments of `datasets.load_dataset`, e.g. `data_files` or `revision`).
    """
    spec = default if path is None else path
    if spec is None:
        raise ValueError(f"{dataset}: no path given and the dataset has no hub default")
    specs = [spec] if isinstance(spec, str | Path) else list(spec)
    segments: list[_Segment] = []
    for item in specs:
        segments.extend(
            _open_one(
                dataset,
                item,
                config=config,
                hub_split=hub_split,
                cache_dir=cache_dir,
                hub_kwargs=hub_kwargs,
            )
        )
    return _Source(dataset, segments)


def _looks_local(spec: str) -> bool:
    return (
        spec.startswith(("/", ".", "~"))
        or spec.count("/") > 1
        or "\\" in spec
        or spec.endswith(LOCAL_SUFFIXES)
    )


def _open_one(
    dataset: str,
    spec: str | Path,
    *,
    config: str | None,
    hub_split: str | None,
    cache_dir: str | None,
    hub_kwargs: dict | None,
    label: str | None = None,
) -> list[_Segment]:
    local = Path(spec).expanduser()
    if local.exists():
        if local.is_file():
            return [_read_file(local, local.stem, cache_dir)]
        files = sorted(
            f for f in local.rglob("*") if f.is_file() and f.suffix.lower() in LOCAL_SUFFIXES
        )
        if not files:
            raise FileNotFoundError(f"{dataset}: no {'/'.join(LOCAL_SUFFIXES)} files in {local}")
        return [
            _read_file(f, f.relative_to(local).with_suffix("").as_posix(), cache_dir) for f in files
        ]
    if isinstance(spec, Path) or _looks_local(str(spec)):
        raise FileNotFoundError(f"{dataset}: {spec} does not exist")
    return [_load_hub(dataset, str(spec), config, hub_split, cache_dir, hub_kwargs, label)]


def _read_file(path: Path, label: str, cache_dir: str | None) -> _Segment:
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _Segment(label, str(path), _JsonlTable(path))
    if suffix == ".json":
        try:
            with open(path, encoding="utf-8") as handle:
                value = json.load(handle)
        except (json.JSONDecodeError, UnicodeDecodeError):
            # JSONL content in a .json file (BFCL's files): read it line by line.
            return _Segment(label, str(path), _JsonlTable(path))
        rows = value if isinstance(value, list) else [value]
        return _Segment(label, str(path), rows)
    import datasets  # heavy import, only when a parquet/csv file is read

    kind = {".parquet": "parquet", ".csv": "csv"}[suffix]
    table = datasets.load_dataset(kind, data_files=str(path), split="train", cache_dir=cache_dir)
    return _Segment(label, str(path), table, arrow=True)


def _load_hub(
    dataset: str,
    name: str,
    config: str | None,
    hub_split: str | None,
    cache_dir: str | None,
    hub_kwargs: dict | None,
    label: str | None,
) -> _Segment:
    import datasets

    loaded = datasets.load_dataset(
        name, config, split=hub_split, cache_dir=cache_dir, **(hub_kwargs or {})
    )
    if isinstance(loaded, datasets.DatasetDict):
        if len(loaded) != 1:
            raise ValueError(
                f"{dataset}: hub dataset {name} has splits {sorted(loaded)}; pass hub_split="
            )
        loaded = next(iter(loaded.values()))
    origin = f"hub:{name}" + (f"/{config}" if config else "")
    return _Segment(label or (f"{name}/{config}" if config else name), origin, loaded, arrow=True)


# ===== The pipeline =============================================================================

Keep = Callable[[dict], str | None]
Convert = Callable[[dict, _Ctx], dict]


class _Run:
    """Filter -> split -> subsample -> convert over one source, recording exclusions."""

    def __init__(self, name: str, source: _Source, strict: bool) -> None:
        self.name = name
        self.source = source
        self.strict = strict
        self.excluded: Counter[str] = Counter()

    def fail(self, i: int, problem: str) -> None:
        if self.strict:
            raise self.source.error(i, problem)
        self.excluded[f"unconvertible raw row ({problem[:80]})"] += 1
        logger.debug("%s", self.source.error(i, problem))

    def filter(self, keep: Keep | None, columns: Sequence[str] | None = None) -> list[int]:
        if keep is None:
            return list(range(len(self.source)))
        kept = []
        for i, raw in self.source.iter_rows(columns):
            if isinstance(raw, _Bad):
                self.fail(i, str(raw))
                continue
            try:
                reason = keep(raw)
            except (_Bad, KeyError, TypeError, ValueError, AttributeError) as err:
                self.fail(i, _describe(err))
                continue
            if reason is None:
                kept.append(i)
            else:
                self.excluded[reason] += 1
        return kept

    def convert(self, positions: list[int], convert: Convert) -> list[dict]:
        rows = []
        for i in positions:
            try:
                rows.append(convert(self.source.row(i), self.source.ctx(i)))
            except (_Bad, KeyError, TypeError, ValueError, AttributeError) as err:
                self.fail(i, _describe(err))
        return rows

    def report(self, returned: int) -> None:
        """Record the exclusions of this load and log them (a warning) if there are any."""
        EXCLUSIONS[self.name] = dict(self.excluded)
        if self.excluded:
            total = sum(self.excluded.values())
            details = "; ".join(f"{k}: {v}" for k, v in sorted(self.excluded.items()))
            logger.warning(
                "%s: excluded %d raw rows, returned %d rows: %s",
                self.name,
                total,
                returned,
                details,
            )


def _describe(err: Exception) -> str:
    if isinstance(err, KeyError):
        return f"missing field {err.args[0]!r}"
    if isinstance(err, _Bad):
        return str(err)
    return f"{type(err).__name__}: {err}"


def holdout_split(
    positions: Sequence[int], part: str, fraction: float, split_seed: int
) -> list[int]:
    """The `part` ("train" or "test") of a held-out split of `positions`, in source order.

    Same permutation as ``datasets.Dataset.train_test_split(test_size=fraction,
    seed=split_seed)``: the first ceil(fraction * N) permuted rows are the test part.
    """
    import numpy as np

    if part not in ("train", "test"):
        raise ValueError(f"part must be 'train' or 'test', got {part!r}")
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"test fraction must be in (0, 1), got {fraction}")
    total = len(positions)
    if total == 0:
        return []
    n_test = math.ceil(fraction * total)
    permutation = np.random.default_rng(split_seed).permutation(total)
    chosen = permutation[:n_test] if part == "test" else permutation[n_test:]
    return [positions[k] for k in sorted(int(k) for k in chosen)]


def subsample(positions: Sequence[int], n: int | None, seed: int) -> list[int]:
    """At most `n` of `positions`, drawn with `random.Random(seed)`, kept in source order."""
    if n is None or n >= len(positions):
        return list(positions)
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    chosen = random.Random(seed).sample(range(len(positions)), n)
    return [positions[k] for k in sorted(chosen)]


# ===== Helpers ==================================================================================


def _text(value: Any, what: str) -> str:
    if value is None:
        raise _Bad(f"missing {what}")
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise _Bad(f"{what} must be text, got {type(value).__name__}")
    text = str(value).strip()
    if not text:
        raise _Bad(f"empty {what}")
    return text


def _first(raw: dict, keys: Sequence[str]) -> Any:
    for key in keys:
        if raw.get(key) is not None:
            return raw[key]
    return None


def _digest(*parts: str) -> str:
    return hashlib.sha1("\x1f".join(parts).encode("utf-8")).hexdigest()[:16]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "_"


def _drop_none(value: Any) -> Any:
    """Remove the None-valued keys Arrow adds when it unifies nested object schemas."""
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value]
    return value


def _prompt(system: str | None, user: str) -> list[dict]:
    messages = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": user})
    return messages


def _row(name: str, domain: str, key: str, prompt: list[dict], answer: str, meta: dict) -> dict:
    return {
        "id": f"{name}-{key}",
        "domain": domain,
        "benchmark": name,
        "prompt": prompt,
        "answer": answer,
        "metadata": meta,
    }


def _options_text(options: Sequence[str], style: str = "{letter}. {text}") -> str:
    return "\n".join(style.format(letter=LETTERS[i], text=o) for i, o in enumerate(options))


def _json_value(value: Any, what: str) -> Any:
    """`value` itself, or parsed if it is a JSON string."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as err:
            raise _Bad(f"{what} is not valid JSON ({err.msg})") from None
    return value


class _DataOnlyUnpickler(pickle.Unpickler):
    """Unpickles plain data (str, list, dict, numbers) only: no class is ever imported."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def _decode_packed(text: str, what: str) -> Any:
    """JSON text, or base64(zlib(pickle | json)) as LiveCodeBench and Dolci store big tests."""
    stripped = text.strip()
    try:
        return json.loads(stripped)
    except json.JSONDecodeError:
        pass
    try:
        blob = zlib.decompress(base64.b64decode(stripped, validate=False))
    except (binascii.Error, zlib.error, ValueError):
        raise _Bad(f"{what} is neither JSON nor base64/zlib data") from None
    try:
        value = _DataOnlyUnpickler(io.BytesIO(blob)).load()
    except Exception:
        try:
            value = blob.decode("utf-8")
        except UnicodeDecodeError:
            raise _Bad(f"{what}: cannot decode the unpacked data") from None
    if isinstance(value, bytes):
        value = value.decode("utf-8")
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as err:
            raise _Bad(f"{what}: unpacked text is not JSON ({err.msg})") from None
    return value


def _stdio_tests(value: Any, what: str) -> list[dict]:
    """[{"input", "output"}] from a list of such dicts or {"inputs": [...], "outputs": [...]}."""
    if isinstance(value, dict) and "inputs" in value and "outputs" in value:
        if len(value["inputs"]) != len(value["outputs"]):
            raise _Bad(f"{what}: {len(value['inputs'])} inputs but {len(value['outputs'])} outputs")
        value = [
            {"input": i, "output": o}
            for i, o in zip(value["inputs"], value["outputs"], strict=True)
        ]
    if not isinstance(value, list) or not value:
        raise _Bad(f"{what}: expected a non-empty list of tests")
    tests = []
    for k, test in enumerate(value):
        if not isinstance(test, dict) or "input" not in test or "output" not in test:
            raise _Bad(f"{what}: test {k} is not an {{'input', 'output'}} object")
        if not isinstance(test["input"], str) or not isinstance(test["output"], str):
            raise _Bad(f"{what}: test {k} input/output must be strings")
        tests.append({"input": test["input"], "output": test["output"]})
    return tests


def _check_n(n: int | None) -> None:
    if n is not None and (not isinstance(n, int) or n < 0):
        raise ValueError(f"n must be a non-negative int or None, got {n!r}")


# ===== Math =====================================================================================


def _math_answer(raw: dict, answer_keys: Sequence[str], solution_keys: Sequence[str]) -> str:
    value = _first(raw, answer_keys)
    if value is None:
        solution = _first(raw, solution_keys)
        if solution is None:
            raise _Bad(f"missing answer (none of {list(answer_keys) + list(solution_keys)})")
        solution = str(solution)
        boxed = last_boxed(solution)
        if boxed is not None:
            value = boxed
        elif len(solution.strip()) <= 40 and "\n" not in solution.strip():
            value = solution
        else:
            raise _Bad("no answer field, and the solution has no \\boxed{} final answer")
    text = _text(value, "answer")
    boxed = last_boxed(text)
    return _text(boxed, "answer") if boxed is not None else text


def _math_row(name: str, key: str, problem: str, answer: str, meta: dict) -> dict:
    user = f"{problem}\n\n{MATH_INSTRUCTION}"
    return _row(name, "math", key, _prompt(None, user), answer, meta)


def _dapo_problem(raw: dict) -> str:
    prompt = raw.get(DAPO_PROMPT)
    if isinstance(prompt, list):
        users = [m for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
        if not users:
            raise _Bad("prompt has no user message")
        text = _text(users[-1].get("content"), "problem")
    else:
        text = _text(prompt, "problem")
    if text.startswith(DAPO_PREFIX):
        text = text[len(DAPO_PREFIX) :]
    if text.rstrip().endswith(DAPO_SUFFIX):
        text = text.rstrip()[: -len(DAPO_SUFFIX)]
    return _text(text, "problem")


def _dapo_answer(raw: dict) -> str:
    reward = raw.get(DAPO_REWARD)
    value = reward.get("ground_truth") if isinstance(reward, dict) else None
    if value is None:
        value = raw.get(DAPO_SOLUTION)
    return _text(value, "answer (reward_model.ground_truth)")


def load_dapo_math(
    n: int | None = None,
    seed: int = 0,
    path: PathSpec = None,
    *,
    dedupe: bool = True,
    strict: bool = True,
    **hub: Any,
) -> list[dict]:
    """DAPO-Math-17k training prompts, deduplicated by problem text."""
    _check_n(n)
    name = "dapo_math"
    source = _open(name, path, DAPO_HUB, **{"hub_split": "train", **hub})
    run = _Run(name, source, strict)
    seen: dict[str, str] = {}

    def keep(raw: dict) -> str | None:
        if not dedupe:
            return None
        problem, answer = _dapo_problem(raw), _dapo_answer(raw)
        key = " ".join(problem.split())
        if key not in seen:
            seen[key] = answer
            return None
        if seen[key] != answer:
            return "duplicate problem with a different answer (first kept)"
        return "duplicate problem"

    def convert(raw: dict, ctx: _Ctx) -> dict:
        problem, answer = _dapo_problem(raw), _dapo_answer(raw)
        extra = raw.get(DAPO_EXTRA)
        meta = {"source_index": ctx.index}
        if isinstance(extra, dict) and extra.get("index") is not None:
            meta["source_id"] = str(extra["index"])
        return _math_row(name, _digest(" ".join(problem.split())), problem, answer, meta)

    positions = run.filter(keep, (DAPO_PROMPT, DAPO_REWARD, DAPO_SOLUTION))
    rows = run.convert(subsample(positions, n, seed), convert)
    run.report(len(rows))
    return rows


def _aime_year(raw: dict, raw_id: Any, label: str) -> str | None:
    """The contest year from a `year` field, the id/url ("2024-I-3"), or the source name."""
    if raw.get("year"):
        return str(raw["year"])
    found = re.search(r"(?<!\d)(20\d\d)(?!\d)", f"{raw_id} {raw.get('url', '')} {label}")
    if found:
        return found.group(1)
    found = re.search(r"aime[_-]?(\d\d)(?!\d)", label, re.IGNORECASE)
    return "20" + found.group(1) if found else None


def load_aime(
    n: int | None = None,
    seed: int = 0,
    path: PathSpec = None,
    *,
    strict: bool = True,
    **hub: Any,
) -> list[dict]:
    """AIME 2024 + 2025 (two sources by default: one per year); integer answers 0-999."""
    _check_n(n)
    name = "aime"
    source = _open(name, path, AIME_HUB, **{"hub_split": "test", **hub})
    run = _Run(name, source, strict)

    def convert(raw: dict, ctx: _Ctx) -> dict:
        problem = _text(_first(raw, AIME_PROBLEM), "problem")
        answer = _math_answer(raw, AIME_ANSWER, AIME_SOLUTION)
        if not re.fullmatch(r"\d{1,3}", answer):
            raise _Bad(f"AIME answer {answer[:40]!r} is not an integer 0-999")
        answer = str(int(answer))
        raw_id = _first(raw, AIME_ID)
        key = f"{_slug(ctx.label)}-{_slug(str(raw_id)) if raw_id is not None else ctx.local}"
        meta = {"source": ctx.label, "source_index": ctx.local}
        if raw_id is not None:
            meta["source_id"] = str(raw_id)
        year = _aime_year(raw, raw_id, ctx.label)
        if year is not None:
            meta["year"] = year
        return _math_row(name, key, problem, answer, meta)

    rows = run.convert(subsample(run.filter(None), n, seed), convert)
    run.report(len(rows))
    return rows


def load_math500(
    n: int | None = None,
    seed: int = 0,
    path: PathSpec = None,
    *,
    strict: bool = True,
    **hub: Any,
) -> list[dict]:
    """MATH-500: the 500-problem subset of MATH used by PRM800K."""
    _check_n(n)
    name = "math500"
    source = _open(name, path, MATH500_HUB, **{"hub_split": "test", **hub})
    run = _Run(name, source, strict)

    def convert(raw: dict, ctx: _Ctx) -> dict:
        problem = _text(raw.get(MATH500_PROBLEM), "problem")
        answer = _math_answer(raw, (MATH500_ANSWER,), ("solution",))
        raw_id = raw.get(MATH500_ID)
        key = str(raw_id).removesuffix(".json") if raw_id else f"{ctx.index}"
        meta = {"source_index": ctx.index, "subject": raw.get("subject"), "level": raw.get("level")}
        meta = {k: v for k, v in meta.items() if v is not None}
        return _math_row(name, key, problem, answer, meta)

    rows = run.convert(subsample(run.filter(None), n, seed), convert)
    run.report(len(rows))
    return rows


# ===== Science ==================================================================================


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
        key = _digest(question, *options)
        if key in seen:
            if seen[key] != answer:
                return "duplicate question with a different answer (first kept)"
            return "duplicate question"
        seen[key] = answer
        return None

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
    rows = run.convert(subsample(positions, n, seed), convert)
    run.report(len(rows))
    return rows


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

    rows = run.convert(subsample(run.filter(None), n, seed), convert)
    run.report(len(rows))
    return rows


# ===== Tool use =================================================================================


def _toolalpaca_items(dataset: str, source: _Source, run: _Run) -> _Source:
    """One item per (API, instance) with its reference calls; failed instances excluded."""
    items: list[dict] = []
    wheres: list[str] = []
    for i, api in source.iter_rows():
        if isinstance(api, _Bad):
            run.fail(i, str(api))
            continue
        where = source.where(i)
        try:
            api_name = _text(api.get(TOOLALPACA_NAME), "API Name")
            instances = api.get(TOOLALPACA_INSTANCES) or []
            instructions = api.get(TOOLALPACA_INSTRUCTIONS) or []
            golden = api.get(TOOLALPACA_GOLDEN) or []
            if not isinstance(instances, list) or not isinstance(golden, list):
                raise _Bad("Instances and Golden_Answers must be lists")
        except _Bad as err:
            run.fail(i, str(err))
            continue
        count = max(len(instances), len(golden))
        if count == 0:
            run.excluded["API without instances"] += 1
        for k in range(count):
            instance = instances[k] if k < len(instances) else None
            reference = golden[k] if k < len(golden) and golden[k] else None
            if reference is None and isinstance(instance, dict):
                reference = instance.get(TOOLALPACA_STEPS)
            if not reference:
                run.excluded["instance without reference calls (failed generation)"] += 1
                continue
            instruction = instance.get("input") if isinstance(instance, dict) else None
            if instruction is None and k < len(instructions):
                instruction = instructions[k]
            items.append(
                {
                    "api": api,
                    "api_name": api_name,
                    "instance_index": k,
                    "api_index": i,
                    "instruction": instruction,
                    "reference": reference,
                }
            )
            wheres.append(f"{where} instance {k}")
    return _Source(dataset, [_Segment("toolalpaca", "toolalpaca", items, wheres=wheres)])


def _toolalpaca_calls(reference: Any) -> list[dict]:
    calls = []
    for s, step in enumerate(reference):
        if isinstance(step, dict):  # Golden_Answers: {"Action", "Action_Input"}
            action, action_input = step.get("Action"), step.get("Action_Input")
        elif isinstance(step, list | tuple) and step and isinstance(step[0], list | tuple):
            action, action_input = step[0][0], step[0][1] if len(step[0]) > 1 else None
        else:
            raise _Bad(f"reference step {s} is neither {{Action, Action_Input}} nor a step")
        action = _text(action, f"reference step {s} action")
        if action_input is None or (isinstance(action_input, str) and not action_input.strip()):
            arguments: Any = {}
        elif isinstance(action_input, str):
            try:
                arguments = json.loads(action_input)
            except json.JSONDecodeError as err:
                raise _Bad(f"reference step {s} Action Input is not JSON ({err.msg})") from None
        else:
            arguments = action_input
        if not isinstance(arguments, dict):
            raise _Bad(f"reference step {s} Action Input must be a JSON object")
        calls.append({"name": action, "arguments": arguments})
    return calls


def _toolalpaca_tools(api: dict) -> list[tuple[str, str]]:
    functions = api.get(TOOLALPACA_FUNCTIONS)
    if isinstance(functions, str):
        functions = _json_value(functions, TOOLALPACA_FUNCTIONS)
    tools: list[tuple[str, str]] = []
    if isinstance(functions, dict):
        tools = [(str(k), str(v).strip()) for k, v in functions.items() if v is not None]
    if not tools:
        raise _Bad("no Function_Description (tool documentation)")
    if TOOLALPACA_GET_DETAILS[0] not in dict(tools):
        tools.append(TOOLALPACA_GET_DETAILS)
    return tools


def _load_toolalpaca(
    name: str,
    part: str,
    n: int | None,
    seed: int,
    path: PathSpec,
    *,
    holdout: float | None = TEST_FRACTION,
    split_seed: int = SPLIT_SEED,
    strict: bool = True,
    **hub: Any,
) -> list[dict]:
    _check_n(n)
    if path is None:
        raise ValueError(
            f"{name}: ToolAlpaca has no canonical hub copy; pass path= (the ToolAlpaca repo's "
            "data/train_data.json, or an eval file with holdout=None)"
        )
    raw_source = _open(name, path, None, **hub)
    run = _Run(name, raw_source, strict)
    items = _toolalpaca_items(name, raw_source, run)
    run.source = items

    def convert(item: dict, ctx: _Ctx) -> dict:
        api = _drop_none(item["api"]) if raw_source.segments[0].arrow else item["api"]
        instruction = _text(item["instruction"], "instruction (instance input)")
        calls = _toolalpaca_calls(item["reference"])
        tools = _toolalpaca_tools(api)
        names = [t for t, _ in tools]
        unknown = sorted({c["name"] for c in calls} - set(names))
        if unknown:
            raise _Bad(f"reference calls undocumented tool(s) {unknown}")
        description = _first(api, TOOLALPACA_DESCRIPTION) or ""
        system = TOOLALPACA_SYSTEM.format(
            api=item["api_name"],
            description=str(description).strip(),
            tools="\n".join(f"- {t}: {doc}" for t, doc in tools),
            names=", ".join(names),
        )
        key = f"{_slug(item['api_name'])}-{item['instance_index']}"
        meta = {
            "api": item["api_name"],
            "tools": names,
            "source_index": item["api_index"],
            "instance_index": item["instance_index"],
        }
        answer = json.dumps(calls, ensure_ascii=False, sort_keys=True)
        return _row(name, "tool", key, _prompt(system, instruction), answer, meta)

    positions = list(range(len(items)))
    if holdout is not None:
        positions = holdout_split(positions, part, holdout, split_seed)
    rows = run.convert(subsample(positions, n, seed), convert)
    run.source = raw_source
    run.report(len(rows))
    return rows


def load_toolalpaca_train(
    n: int | None = None, seed: int = 0, path: PathSpec = None, **options: Any
) -> list[dict]:
    """ToolAlpaca instances, the training part (90%, split seed 42; holdout=None: all)."""
    return _load_toolalpaca("toolalpaca_train", "train", n, seed, path, **options)


def load_toolalpaca_test(
    n: int | None = None, seed: int = 0, path: PathSpec = None, **options: Any
) -> list[dict]:
    """ToolAlpaca instances, the held-out part (10%, split seed 42; holdout=None: all)."""
    return _load_toolalpaca("toolalpaca_test", "test", n, seed, path, **options)


def _bfcl_files(dataset: str, path: Path, answer_path: str | None) -> tuple[Path, Path]:
    if path.is_dir():
        found = sorted(
            (
                p
                for p in path.rglob("*.json")
                if BFCL_FILE.search(p.name) and BFCL_ANSWER_DIR not in p.relative_to(path).parts
            ),
            key=lambda p: int(re.search(r"v(\d+)", p.name).group(1)),
        )
        if not found:
            raise FileNotFoundError(f"{dataset}: no BFCL_v*_multiple.json under {path}")
        questions = found[-1]  # the newest version
    else:
        questions = path
    answers = (
        Path(answer_path) if answer_path else questions.parent / BFCL_ANSWER_DIR / questions.name
    )
    if not answers.exists():
        raise FileNotFoundError(f"{dataset}: possible-answer file {answers} does not exist")
    return questions, answers


def load_bfcl_multiple(
    n: int | None = None,
    seed: int = 0,
    path: PathSpec = None,
    *,
    answer_path: str | None = None,
    version: int = 4,
    strict: bool = True,
    **hub: Any,
) -> list[dict]:
    """BFCL "multiple": one call to choose among several functions; AST-checked arguments.

    `path`: the BFCL data folder (with possible_answer/), the question file (its answers
    beside it in possible_answer/, or `answer_path`), or a hub repo (default: the BFCL hub
    repo's BFCL_v{version}_multiple.json and possible_answer/ files, fetched with
    `huggingface_hub.hf_hub_download`; `hub_kwargs` go to it, e.g. `revision`).
    """
    _check_n(n)
    name = "bfcl_multiple"
    _check_hub_options(name, hub)
    local = Path(str(path)).expanduser() if isinstance(path, str | Path) else None
    if local is not None and local.exists():
        questions_file, answers_file = _bfcl_files(name, local, answer_path)
        questions = _open(name, str(questions_file), None)
        answers = _open(name, str(answers_file), None)
    else:
        if local is not None and _looks_local(str(path)):
            raise FileNotFoundError(f"{name}: {path} does not exist")
        # The hub repo's JSON files are fetched as files (from the HF cache when offline) and
        # read like local ones: `datasets` cannot unify their per-row function schemas.
        from huggingface_hub import hf_hub_download

        repo = str(path) if path is not None else BFCL_HUB
        file = f"BFCL_v{version}_multiple.json"
        fetched = [
            hf_hub_download(repo, f, repo_type="dataset", cache_dir=hub.get("cache_dir"),
                            **(hub.get("hub_kwargs") or {}))
            for f in (file, f"{BFCL_ANSWER_DIR}/{file}")
        ]  # fmt: skip
        questions, answers = _open(name, fetched[0], None), _open(name, fetched[1], None)
    run = _Run(name, questions, strict)
    truth: dict[str, Any] = {}
    for i, raw in answers.iter_rows():
        if isinstance(raw, _Bad) or raw.get(BFCL_ID) is None:
            problem = str(raw) if isinstance(raw, _Bad) else "possible answer without an id"
            raise answers.error(i, problem)
        value = raw.get(BFCL_GROUND_TRUTH)
        truth[str(raw[BFCL_ID])] = _drop_none(value) if answers.segments[0].arrow else value

    def convert(raw: dict, ctx: _Ctx) -> dict:
        if ctx.arrow:
            raw = _drop_none(raw)
        raw_id = _text(raw.get(BFCL_ID), "id")
        functions = _json_value(raw.get(BFCL_FUNCTION), "function")
        if not isinstance(functions, list) or not functions:
            raise _Bad("'function' must be a non-empty list of schemas")
        for f in functions:
            if not isinstance(f, dict) or not f.get("name"):
                raise _Bad("every function schema needs a 'name'")
        turns = _json_value(raw.get(BFCL_QUESTION), "question")
        if not isinstance(turns, list) or not turns:
            raise _Bad("'question' must be a non-empty list of turns")
        if len(turns) != 1:
            raise _Bad(f"{len(turns)} turns; the multiple category is single-turn")
        messages = turns[0] if isinstance(turns[0], list) else turns
        system = BFCL_SYSTEM.format(functions=json.dumps(functions, ensure_ascii=False, indent=1))
        prompt = [{"role": "system", "content": system}]
        for m in messages:
            role, content = m.get("role"), _text(m.get("content"), "message content")
            if role == "system":
                prompt[0]["content"] = f"{content}\n\n{prompt[0]['content']}"
            elif role in ("user", "assistant"):
                prompt.append({"role": role, "content": content})
            else:
                raise _Bad(f"unknown message role {role!r}")
        if raw_id not in truth:
            raise _Bad(f"no possible answer for id {raw_id!r}")
        expected = truth[raw_id]
        if (
            not isinstance(expected, list)
            or not expected
            or not all(isinstance(e, dict) and len(e) == 1 for e in expected)
        ):
            raise _Bad("ground_truth must be a non-empty list of {function: {arg: [values]}}")
        for call in expected:
            ((func, arguments),) = call.items()
            if not isinstance(arguments, dict) or not all(
                isinstance(v, list) for v in arguments.values()
            ):
                raise _Bad(f"ground_truth for {func!r} must map each argument to a value list")
        answer = json.dumps(expected, ensure_ascii=False)
        meta = {"functions": functions, "source_id": raw_id, "source_index": ctx.index}
        return _row(name, "tool", _slug(raw_id), prompt, answer, meta)

    rows = run.convert(subsample(run.filter(None), n, seed), convert)
    run.report(len(rows))
    return rows


# ===== Code =====================================================================================


def _dolci_label(raw: dict) -> str | None:
    value = raw.get(DOLCI_DATASET)
    if isinstance(value, list):
        value = value[0] if value else None
    return None if value is None else str(value).strip()


def _dolci_prompt(raw: dict) -> str:
    messages = raw.get(DOLCI_MESSAGES)
    if isinstance(messages, list) and messages:
        users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
        if not users:
            raise _Bad("messages have no user turn")
        return _text(users[-1].get("content"), "prompt")
    text = _text(raw.get(DOLCI_PROMPT), "prompt")
    text = re.sub(r"^\s*user\s*:\s*", "", text, count=1, flags=re.IGNORECASE)
    return _text(text, "prompt")


def _dolci_tests(raw: dict, kind: str) -> list:
    value = raw.get(DOLCI_GROUND_TRUTH)
    if value is None:
        raise _Bad("missing ground_truth")
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str):
        single = value[0].strip()
        if not single.startswith("assert"):
            value = _decode_packed(single, "ground_truth")
    elif isinstance(value, str):
        value = _decode_packed(value, "ground_truth")
    if kind == DOLCI_STDIO:
        return _stdio_tests(value, "ground_truth")
    if not isinstance(value, list) or not value:
        raise _Bad("ground_truth must be a non-empty list of assert statements")
    tests = []
    for k, test in enumerate(value):
        if not isinstance(test, str) or not test.strip():
            raise _Bad(f"ground_truth test {k} is not a non-empty string")
        tests.append(test.strip())
    return tests


def _load_dolci(
    name: str,
    part: str,
    kind: str,
    n: int | None,
    seed: int,
    path: PathSpec,
    *,
    holdout: float | None = TEST_FRACTION,
    split_seed: int = SPLIT_SEED,
    strict: bool = True,
    **hub: Any,
) -> list[dict]:
    _check_n(n)
    source = _open(name, path, DOLCI_HUB, **{"hub_split": "train", **hub})
    run = _Run(name, source, strict)

    def keep(raw: dict) -> str | None:
        label = _dolci_label(raw)
        return None if label == kind else f"dataset label {label!r} (not the {kind!r} subset)"

    instruction = CODE_STDIO_INSTRUCTION if kind == DOLCI_STDIO else CODE_UNIT_INSTRUCTION

    def convert(raw: dict, ctx: _Ctx) -> dict:
        prompt = _dolci_prompt(raw)
        tests = _dolci_tests(raw, kind)
        raw_id = _first(raw, DOLCI_ID)
        key = _slug(str(raw_id)) if raw_id is not None else _digest(prompt)
        meta = {
            "tests": tests,
            "test_format": "stdio" if kind == DOLCI_STDIO else "asserts",
            "source_index": ctx.index,
        }
        if raw.get("original_dataset") is not None:
            meta["original_dataset"] = raw["original_dataset"]
        user = f"{prompt}\n\n{instruction}"
        return _row(name, "code", key, _prompt(None, user), CODE_ANSWER, meta)

    positions = run.filter(keep, (DOLCI_DATASET,))
    if holdout is not None:
        positions = holdout_split(positions, part, holdout, split_seed)
    rows = run.convert(subsample(positions, n, seed), convert)
    run.report(len(rows))
    return rows


def load_dolci_code_train(
    n: int | None = None, seed: int = 0, path: PathSpec = None, **options: Any
) -> list[dict]:
    """Dolci-Think-RL-7B "code" rows (assert tests), the training part (90%, seed 42)."""
    return _load_dolci("dolci_code_train", "train", DOLCI_UNIT, n, seed, path, **options)


def load_dolci_code_test(
    n: int | None = None, seed: int = 0, path: PathSpec = None, **options: Any
) -> list[dict]:
    """Dolci-Think-RL-7B "code" rows (assert tests), the held-out part (10%, seed 42)."""
    return _load_dolci("dolci_code_test", "test", DOLCI_UNIT, n, seed, path, **options)


def load_dolci_code_stdio_train(
    n: int | None = None, seed: int = 0, path: PathSpec = None, **options: Any
) -> list[dict]:
    """Dolci-Think-RL-7B "code_stdio" rows (stdin/stdout tests), the training part."""
    return _load_dolci("dolci_code_stdio_train", "train", DOLCI_STDIO, n, seed, path, **options)


def load_dolci_code_stdio_test(
    n: int | None = None, seed: int = 0, path: PathSpec = None, **options: Any
) -> list[dict]:
    """Dolci-Think-RL-7B "code_stdio" rows (stdin/stdout tests), the held-out part."""
    return _load_dolci("dolci_code_stdio_test", "test", DOLCI_STDIO, n, seed, path, **options)


def _lcb_tests(raw: dict, field: str) -> list[dict]:
    value = raw.get(field)
    if value is None or (isinstance(value, str) and not value.strip()):
        return []
    tests = _decode_packed(value, field) if isinstance(value, str) else value
    if not isinstance(tests, list):
        raise _Bad(f"{field} must be a list of tests")
    return tests


def _lcb_kind(tests: list[dict]) -> str:
    kinds = {str(t.get("testtype", "stdin")) for t in tests if isinstance(t, dict)}
    if len(kinds) != 1:
        raise _Bad(f"test types {sorted(kinds)}: expected exactly one of stdin / functional")
    return kinds.pop()


def _lcb_date(value: Any) -> str:
    return str(value)[:10] if value is not None else ""


def load_livecodebench(
    n: int | None = None,
    seed: int = 0,
    path: PathSpec = None,
    *,
    start_date: str | None = None,
    end_date: str | None = None,
    platforms: Sequence[str] | None = None,
    functional: str = "stdio",
    strict: bool = True,
    **hub: Any,
) -> list[dict]:
    """LiveCodeBench code generation (release_v6 by default): stdin/stdout tests.

    Functional (LeetCode) problems are mapped to stdin/stdout (`functional="stdio"`): the prompt
    asks for the starter code's class plus a driver that reads one JSON argument per line and
    prints `json.dumps(result)`, and each test's input/output are LiveCodeBench's own JSON
    lines. `functional="skip"` excludes them (counted). `start_date` / `end_date` (ISO dates,
    inclusive) select a contest window.
    """
    _check_n(n)
    if functional not in ("stdio", "skip"):
        raise ValueError(f"functional must be 'stdio' or 'skip', got {functional!r}")
    name = "livecodebench"
    if path is None and "hub_kwargs" not in hub:
        hub = {**hub, "hub_kwargs": {"data_files": LCB_HUB_FILES}}
    source = _open(name, path, LCB_HUB, **{"hub_split": "train", **hub})
    run = _Run(name, source, strict)
    wanted_platforms = {p.lower() for p in platforms} if platforms else None

    def keep(raw: dict) -> str | None:
        day = _lcb_date(raw.get(LCB_DATE))
        if start_date and day < start_date:
            return f"contest_date before {start_date}"
        if end_date and day > end_date:
            return f"contest_date after {end_date}"
        if wanted_platforms and str(raw.get(LCB_PLATFORM, "")).lower() not in wanted_platforms:
            return f"platform {raw.get(LCB_PLATFORM)!r} not in {sorted(wanted_platforms)}"
        if functional == "skip":
            public = _lcb_tests(raw, LCB_PUBLIC)
            if public and _lcb_kind(public) == "functional":
                return "functional (LeetCode) problem, functional='skip'"
        return None

    def convert(raw: dict, ctx: _Ctx) -> dict:
        content = _text(raw.get(LCB_CONTENT), "question_content")
        raw_id = _text(raw.get(LCB_ID), "question_id")
        tests = _lcb_tests(raw, LCB_PUBLIC) + _lcb_tests(raw, LCB_PRIVATE)
        if not tests:
            raise _Bad("no test cases")
        kind = _lcb_kind(tests)
        meta = {
            "tests": _stdio_tests(tests, "test cases"),
            "kind": kind,
            "platform": raw.get(LCB_PLATFORM),
            "difficulty": raw.get(LCB_DIFFICULTY),
            "contest_date": _lcb_date(raw.get(LCB_DATE)) or None,
            "source_index": ctx.index,
        }
        if kind == "stdin":
            user = (
                f"### Question:\n{content}\n\n### Format: Read the inputs from standard input, "
                "solve the problem and write the answer to standard output (do not directly "
                "test on the sample inputs). Put your complete program in one Python code "
                "block:\n```python\n# YOUR CODE HERE\n```\n\n### Answer: (use the format above)\n"
            )
        elif kind == "functional":
            extra = _json_value(raw.get(LCB_METADATA) or "{}", LCB_METADATA)
            func = extra.get("func_name") if isinstance(extra, dict) else None
            func = _text(func, "metadata.func_name")
            starter = _text(raw.get(LCB_STARTER), "starter_code")
            meta["func_name"] = func
            user = (
                f"### Question:\n{content}\n\n### Format: Complete the starter code below:\n"
                f"```python\n{starter}\n```\n"
                "Your program is run as a script. After the class, add a driver that reads the "
                "method's arguments from standard input, one JSON value per line in parameter "
                f"order, calls `Solution().{func}(...)` and prints the result with "
                "`print(json.dumps(result))`. Put the complete program in one Python code "
                "block.\n\n### Answer: (use the format above)\n"
            )
        else:
            raise _Bad(f"unknown test type {kind!r}")
        meta = {k: v for k, v in meta.items() if v is not None}
        return _row(name, "code", _slug(raw_id), _prompt(LCB_SYSTEM, user), CODE_ANSWER, meta)

    positions = run.filter(keep, (LCB_DATE, LCB_PLATFORM, LCB_PUBLIC))
    rows = run.convert(subsample(positions, n, seed), convert)
    run.report(len(rows))
    return rows


# ===== Logic ====================================================================================


def zebra_grid(solution: Any) -> dict:
    """{"House 1": {attribute: value}} from ZebraLogic's {"header", "rows"} solution."""
    solution = _json_value(solution, "solution")
    if not isinstance(solution, dict):
        raise _Bad("solution must be {'header': [...], 'rows': [...]}")
    header, rows = solution.get("header"), solution.get("rows")
    if not isinstance(header, list) or len(header) < 2 or not isinstance(rows, list) or not rows:
        raise _Bad("solution needs a header of 2+ columns and 1+ rows")
    grid: dict[str, dict[str, str]] = {}
    for r, cells in enumerate(rows):
        if not isinstance(cells, list) or len(cells) != len(header):
            raise _Bad(f"solution row {r} does not have {len(header)} cells")
        values = [_text(c, f"solution cell ({r}, {k})") for k, c in enumerate(cells)]
        if any(set(v) <= {"_"} for v in values):
            raise _Bad("the solution is masked (___): use allenai/ZebraLogicBench-private")
        house = values[0] if values[0].lower().startswith("house") else f"House {values[0]}"
        grid[house] = {str(h): v for h, v in zip(header[1:], values[1:], strict=True)}
    return grid


def load_zebralogic(
    n: int | None = None,
    seed: int = 0,
    path: PathSpec = None,
    *,
    strict: bool = True,
    **hub: Any,
) -> list[dict]:
    """ZebraLogic grid puzzles; the answer is the JSON solution grid (cell accuracy)."""
    _check_n(n)
    name = "zebralogic"
    source = _open(name, path, ZEBRA_HUB, **{"config": ZEBRA_CONFIG, "hub_split": "test", **hub})
    run = _Run(name, source, strict)

    def convert(raw: dict, ctx: _Ctx) -> dict:
        puzzle = _text(raw.get(ZEBRA_PUZZLE), "puzzle")
        grid = zebra_grid(raw.get(ZEBRA_SOLUTION))
        template = {
            "reasoning": "___",
            "solution": {h: {a: "___" for a in attrs} for h, attrs in grid.items()},
        }
        user = (
            f"{puzzle}\n\nSolve the puzzle. Explain your reasoning, then give your answer as a "
            "JSON object of the following form, with every ___ replaced by the right value:\n"
            f"```json\n{json.dumps(template, indent=2)}\n```"
        )
        raw_id = raw.get(ZEBRA_ID)
        key = _slug(str(raw_id)) if raw_id else _digest(puzzle)
        meta = {"size": raw.get(ZEBRA_SIZE), "source_index": ctx.index}
        meta = {k: v for k, v in meta.items() if v is not None}
        answer = json.dumps(grid, ensure_ascii=False)
        return _row(name, "logic", key, _prompt(None, user), answer, meta)

    rows = run.convert(subsample(run.filter(None), n, seed), convert)
    run.report(len(rows))
    return rows


# ===== Knowledge ================================================================================


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
        raise _Bad(f"{what} must be an option index or letter")
    if isinstance(value, int):
        index = value
    else:
        text = _text(value, what)
        if text.isdigit():
            index = int(text)
        elif len(text) == 1 and text.upper() in LETTERS:
            index = LETTERS.index(text.upper())
        else:
            raise _Bad(f"{what} {text[:20]!r} is not an option index or letter")
    return index


def load_mmlu_redux(
    n: int | None = None,
    seed: int = 0,
    path: PathSpec = None,
    *,
    keep_error_types: Sequence[str] = MMLU_KEEP_ERROR_TYPES,
    fix_wrong_groundtruth: bool = False,
    subjects: Sequence[str] | None = None,
    strict: bool = True,
    **hub: Any,
) -> list[dict]:
    """MMLU-Redux 2.0: rows whose error_type is not in `keep_error_types` are excluded (counted
    per error type). `fix_wrong_groundtruth=True` keeps "wrong_groundtruth" rows with the
    annotators' `correct_answer` instead."""
    _check_n(n)
    name = "mmlu_redux"
    keep_types = set(keep_error_types) | ({"wrong_groundtruth"} if fix_wrong_groundtruth else set())
    local = isinstance(path, str | Path) and Path(path).expanduser().exists()
    if local or (path is not None and not isinstance(path, str)):
        source = _open(name, path, None, **hub)
    else:
        repo = str(path) if path is not None else MMLU_REDUX_HUB
        _check_hub_options(name, hub)
        options = {"hub_split": "test", "config": None, "cache_dir": None, "hub_kwargs": None}
        options.update(hub)
        config = options.pop("config")
        segments = []
        for subject in subjects or MMLU_SUBJECTS:
            label = f"{repo}/{subject}"
            segments += _open_one(name, repo, config=config or subject, label=label, **options)
        source = _Source(name, segments)
    run = _Run(name, source, strict)
    wanted_subjects = set(subjects) if subjects else None

    def keep(raw: dict) -> str | None:
        error_type = raw.get(MMLU_ERROR_TYPE)
        if error_type not in keep_types:
            return f"error_type={error_type!r}"
        return None

    def convert(raw: dict, ctx: _Ctx) -> dict:
        subject = _mmlu_subject(raw, ctx.label)
        question = _text(raw.get(MMLU_QUESTION), "question")
        choices = _json_value(raw.get(MMLU_CHOICES), "choices")
        if not isinstance(choices, list) or len(choices) < 2:
            raise _Bad("choices must be a list of 2+ options")
        options = [_text(c, f"option {k}") for k, c in enumerate(choices)]
        index = _mmlu_index(raw.get(MMLU_ANSWER), "answer")
        error_type = raw.get(MMLU_ERROR_TYPE)
        if error_type == "wrong_groundtruth" and fix_wrong_groundtruth:
            index = _mmlu_index(raw.get(MMLU_CORRECT_ANSWER), "correct_answer")
        if not 0 <= index < len(options):
            raise _Bad(f"answer index {index} out of range for {len(options)} options")
        topic = subject.replace("_", " ")
        user = (
            f"The following is a multiple-choice question about {topic}.\n\n{question}\n\n"
            f"{_options_text(options)}\n\nThink step by step, then finish with "
            '"The answer is X", where X is the letter of the correct option.'
        )
        meta = {
            "options": options,
            "subject": subject,
            "error_type": error_type,
            "source_index": ctx.local,
        }
        key = f"{_slug(subject)}-{ctx.local}"
        return _row(name, "knowledge", key, _prompt(None, user), LETTERS[index], meta)

    positions = run.filter(keep, (MMLU_ERROR_TYPE,))
    if wanted_subjects is not None and local:
        kept = []
        for i in positions:
            if _mmlu_subject({}, source.ctx(i).label) in wanted_subjects:
                kept.append(i)
            else:
                run.excluded["subject not selected"] += 1
        positions = kept
    rows = run.convert(subsample(positions, n, seed), convert)
    run.report(len(rows))
    return rows


# ===== Registry =================================================================================

_M, _S, _T, _C = "math", "science", "tool", "code"
_ENTRIES = [
    # name, domain, split, verifier, loader, description
    ("dapo_math", _M, "train", "math_boxed", load_dapo_math, "DAPO-Math-17k, deduplicated"),
    ("aime", _M, "id", "math_boxed", load_aime, "AIME 2024 + 2025"),
    ("math500", _M, "ood", "math_boxed", load_math500, "MATH-500"),
    ("sciknoweval_train", _S, "train", "mcq_answer_tag", load_sciknoweval_train,
     "SciKnowEval L3 2/4-choice MCQ, 90% split part (seed 42)"),
    ("sciknoweval_test", _S, "id", "mcq_answer_tag", load_sciknoweval_test,
     "SciKnowEval L3 2/4-choice MCQ, 10% held out (seed 42)"),
    ("gpqa_diamond", _S, "ood", "mcq_boxed_letter", load_gpqa_diamond,
     "GPQA-Diamond, options shuffled per seed"),
    ("toolalpaca_train", _T, "train", "react_tool", load_toolalpaca_train, "ToolAlpaca, train"),
    ("toolalpaca_test", _T, "id", "react_tool", load_toolalpaca_test, "ToolAlpaca, held out"),
    ("bfcl_multiple", _T, "ood", "function_call_ast", load_bfcl_multiple,
     "BFCL v4 'multiple' category, AST match"),
    ("dolci_code_train", _C, "train", "python_unit_tests", load_dolci_code_train,
     "Dolci-Think-RL-7B 'code' rows (assert tests), train"),
    ("dolci_code_test", _C, "id", "python_unit_tests", load_dolci_code_test,
     "Dolci-Think-RL-7B 'code' rows (assert tests), held out"),
    ("dolci_code_stdio_train", _C, "train", "stdio_tests", load_dolci_code_stdio_train,
     "Dolci-Think-RL-7B 'code_stdio' rows (stdin/stdout tests), train"),
    ("dolci_code_stdio_test", _C, "id", "stdio_tests", load_dolci_code_stdio_test,
     "Dolci-Think-RL-7B 'code_stdio' rows (stdin/stdout tests), held out"),
    ("livecodebench", _C, "ood", "stdio_tests", load_livecodebench,
     "LiveCodeBench v6, stdin/stdout (functional problems via a JSON driver)"),
    ("zebralogic", "logic", "ood", "zebra_grid", load_zebralogic, "ZebraLogic grid puzzles"),
    ("mmlu_redux", "knowledge", "ood", "mcq_letter", load_mmlu_redux,
     "MMLU-Redux 2.0, error_type 'ok' rows"),
]  # fmt: skip

PAPER_BENCHMARKS = tuple(Benchmark(*entry) for entry in _ENTRIES)
for _benchmark in PAPER_BENCHMARKS:
    register_benchmark(_benchmark)
