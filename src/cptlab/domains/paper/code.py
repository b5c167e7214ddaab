"""Code benchmarks: Dolci-Think-RL-7B "code" / "code_stdio" rows (train / id, held-out
split) and LiveCodeBench (ood). Rows carry their tests in metadata["tests"]."""

from __future__ import annotations

import base64
import binascii
import io
import json
import math
import pickle
import re
import zlib
from typing import Any

from cptlab.domains.paper.common import (
    SPLIT_SEED,
    TEST_FRACTION,
    BadRawRow,
    RowContext,
    canonical_row,
    chat_prompt,
    content_digest,
    first_present,
    json_value,
    last_user_text,
    required_text,
    slug,
)
from cptlab.domains.paper.pipeline import Holdout, Load, Recipe
from cptlab.domains.registry import Benchmark, Prompt, Published, Source
from cptlab.errors import InputError

# Dolci-Think-RL-7B (allenai/Dolci-Think-RL-7B, split "train"; Olmo 3 RLVR mixture):
#   prompt "user: ..." (one flat string; some copies use `messages`), ground_truth [str],
#   dataset [label] with label in {"math", "code", "code_stdio", "ifeval",
#   "general-quality", "general-quality_ref"}, id / custom_id, original_dataset, passrate.
# "code" rows: ground_truth = Python assert statements (the list itself, or one JSON string);
# "code_stdio" rows: ground_truth[0] = JSON [{"input", "output"}] or {"inputs", "outputs"},
# sometimes base64(zlib(pickle(...))) ("eJ..."), decoded here with a data-only unpickler.
DOLCI_HUB = "allenai/Dolci-Think-RL-7B"
# A commit two public projects pin (found by search; not read from the hub here).
DOLCI_REVISION = "0fb6466d31ef3a9dd16985ef635e6429e05a6491"
DOLCI_ROWS = 102_014  # every row, all subsets (the dataset card)
DOLCI_PROMPT = "prompt"
DOLCI_MESSAGES = "messages"
DOLCI_GROUND_TRUTH = "ground_truth"
DOLCI_DATASET = "dataset"
DOLCI_ID = ("id", "custom_id")
DOLCI_UNIT = "code"
DOLCI_STDIO = "code_stdio"
# Code rows have no reference program; the verifiers run metadata["tests"], not the answer.
CODE_ANSWER = "(no reference solution: scored by the tests in metadata['tests'])"

# LiveCodeBench code generation (livecodebench/code_generation_lite; release_v6 = the files
# test.jsonl, test2.jsonl, ..., test6.jsonl, 1,055 problems from 2023-05 to 2025-04):
#   question_title, question_content, platform ("leetcode", "codeforces", "atcoder"),
#   question_id, contest_id, contest_date (ISO), starter_code, difficulty,
#   public_test_cases (JSON string [{"input", "output", "testtype": "stdin"|"functional"}]),
#   private_test_cases (same, as JSON or base64(zlib(pickle(json string)))),
#   metadata (JSON string, {"func_name": ...} for functional problems).
# The repository also holds its loading script, code_generation_lite.py, and `datasets` 5.2.0
# refuses a hub repository that holds one whatever `data_files` are given (datasets/load.py,
# `dataset_module_factory`): the JSONL files are read from the snapshot directly.
LCB_HUB = "livecodebench/code_generation_lite"
LCB_HUB_FILES = ("test.jsonl", *(f"test{k}.jsonl" for k in range(2, 7)))
# main's commit (2025-06-05), which public code pins for release_v6's files (found by search;
# not read from the hub here). The study reads `revision="refs/pr/6"`, `split="test"`
# (data/utils/livecodebench.py), a pull-request ref whose files could not be read here:
# data.options.livecodebench.revision: refs/pr/6 reads the same six files from it.
LCB_REVISION = "0fe84c3912ea0c4d4a78037083943e8f0c4dd505"
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
# The study's code prompt, one user message (Moenupa/SDPO-CL, data/format/prompts.py:
# CODE_PROMPT); LiveCodeBench adds the starter code's signature (data/utils/livecodebench.py).
CODE_PROMPT = """You are a coding expert. You will be given a coding problem, and you need to write a correct Python program that matches the specification and passes all tests. The time limit is 1 second. You may start by outlining your thought process. In the end, please provide the complete code in a code block enclosed with ``` ```.

{problem}"""  # noqa: E501
# The prompt format of every code benchmark: the study publishes no Dolci loader, and its code
# prompt is the one it gives every code problem it formats (data/format/train.py).
CODE_FORMAT = Prompt(CODE_PROMPT)
LCB_SIGNATURE = "\n\nYour solution should have the following signature: ```python\n{signature}\n```"
LCB_PROMPTS = ("study", "driver")
LCB_PRELUDE = "from typing import *\n"
LCB_STUDY_TIME_LIMIT = 6  # seconds per test (data/utils/livecodebench.py)
LCB_TEST_SETS = ("private", "all")


class _DataOnlyUnpickler(pickle.Unpickler):
    """Unpickles plain data (str, list, dict, numbers) only: no class is ever imported."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]+")


def _looks_packed(text: str) -> bool:
    """Whether one string of tests is packed (a JSON list or object, or base64 of zlib data,
    whose first byte is 0x78) rather than a program."""
    if text.startswith(("[", "{")):
        try:
            json.loads(text)
        except json.JSONDecodeError:
            return False
        return True
    if not _BASE64.fullmatch(text):
        return False
    try:
        head = base64.b64decode(text[:8], validate=False)
    except (binascii.Error, ValueError):
        return False
    return head[:1] == b"\x78"


def decode_packed(text: str, what: str) -> Any:
    """JSON text, or base64(zlib(pickle | json)) as LiveCodeBench and Dolci store big tests."""
    stripped = text.strip()
    try:
        return json.loads(stripped)
    except json.JSONDecodeError:
        pass
    try:
        blob = zlib.decompress(base64.b64decode(stripped, validate=False))
    except (binascii.Error, zlib.error, ValueError):
        raise BadRawRow(f"{what} is neither JSON nor base64/zlib data") from None
    try:
        value = _DataOnlyUnpickler(io.BytesIO(blob)).load()
    except Exception:
        try:
            value = blob.decode("utf-8")
        except UnicodeDecodeError:
            raise BadRawRow(f"{what}: cannot decode the unpacked data") from None
    if isinstance(value, bytes):
        value = value.decode("utf-8")
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as err:
            raise BadRawRow(f"{what}: unpacked text is not JSON ({err.msg})") from None
    return value


def _stdio_tests(value: Any, what: str) -> list[dict]:
    """[{"input", "output"}] from a list of such dicts or {"inputs": [...], "outputs": [...]}."""
    if isinstance(value, dict) and "inputs" in value and "outputs" in value:
        if len(value["inputs"]) != len(value["outputs"]):
            raise BadRawRow(
                f"{what}: {len(value['inputs'])} inputs but {len(value['outputs'])} outputs"
            )
        value = [
            {"input": i, "output": o}
            for i, o in zip(value["inputs"], value["outputs"], strict=True)
        ]
    if not isinstance(value, list) or not value:
        raise BadRawRow(f"{what}: expected a non-empty list of tests")
    tests = []
    for k, test in enumerate(value):
        if not isinstance(test, dict) or "input" not in test or "output" not in test:
            raise BadRawRow(f"{what}: test {k} is not an {{'input', 'output'}} object")
        if not isinstance(test["input"], str) or not isinstance(test["output"], str):
            raise BadRawRow(f"{what}: test {k} input/output must be strings")
        tests.append({"input": test["input"], "output": test["output"]})
    return tests


def _dolci_label(raw: dict) -> str | None:
    value = raw.get(DOLCI_DATASET)
    if isinstance(value, list):
        value = value[0] if value else None
    return None if value is None else str(value).strip()


def _dolci_prompt(raw: dict) -> str:
    messages = raw.get(DOLCI_MESSAGES)
    if isinstance(messages, list) and messages:
        return last_user_text(messages, "prompt", "messages have no user turn")
    text = required_text(raw.get(DOLCI_PROMPT), "prompt")
    text = re.sub(r"^\s*user\s*:\s*", "", text, count=1, flags=re.IGNORECASE)
    return required_text(text, "prompt")


def _dolci_tests(raw: dict, kind: str) -> list:
    value = raw.get(DOLCI_GROUND_TRUTH)
    if value is None:
        raise BadRawRow("missing ground_truth")
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str):
        # One string is either a packed blob (JSON or base64/zlib) or a single test, which
        # need not start with `assert` (a class definition, then asserts).
        single = value[0].strip()
        if _looks_packed(single):
            value = decode_packed(single, "ground_truth")
    elif isinstance(value, str):
        value = decode_packed(value, "ground_truth")
    if kind == DOLCI_STDIO:
        return _stdio_tests(value, "ground_truth")
    if not isinstance(value, list) or not value:
        raise BadRawRow("ground_truth must be a non-empty list of assert statements")
    tests = []
    for k, test in enumerate(value):
        if not isinstance(test, str) or not test.strip():
            raise BadRawRow(f"ground_truth test {k} is not a non-empty string")
        tests.append(test.strip())
    return tests


def _dolci(name: str, part: str, kind: str) -> Recipe:
    """Dolci-Think-RL-7B rows of one subset ("code": assert tests; "code_stdio": stdin/stdout
    tests), one part of its 90/10 split (seed 42)."""

    def keep(raw: dict, load: Load) -> str | None:
        label = _dolci_label(raw)
        return None if label == kind else f"dataset label {label!r} (not the {kind!r} subset)"

    def convert(raw: dict, ctx: RowContext, load: Load) -> dict:
        prompt = _dolci_prompt(raw)
        tests = _dolci_tests(raw, kind)
        raw_id = first_present(raw, DOLCI_ID)
        key = slug(str(raw_id)) if raw_id is not None else content_digest(prompt)
        meta = {
            "tests": tests,
            "test_format": "stdio" if kind == DOLCI_STDIO else "asserts",
            "source_index": ctx.index,
        }
        if raw.get("original_dataset") is not None:
            meta["original_dataset"] = raw["original_dataset"]
        messages = CODE_FORMAT.messages(problem=prompt)
        return canonical_row(name, "code", key, messages, CODE_ANSWER, meta)

    # No count of the code subsets is published; the whole dataset's bounds the split's.
    share = TEST_FRACTION if part == "test" else 1 - TEST_FRACTION
    bound = Published(
        1,
        math.ceil(share * DOLCI_ROWS),
        f"none for the {kind!r} rows; at most a {share:.0%} share of the "
        f"{DOLCI_ROWS:,} rows of Dolci-Think-RL-7B (its card)",
        options={"holdout": TEST_FRACTION, "split_seed": SPLIT_SEED},
    )
    return Recipe(name, "code", Source(DOLCI_HUB, split="train", revision=DOLCI_REVISION),
                  CODE_FORMAT, convert,
                  keep=keep, columns=(DOLCI_DATASET,), holdout=Holdout(part),
                  published=(bound,))  # fmt: skip


def _lcb_tests(raw: dict, field: str) -> list[dict]:
    value = raw.get(field)
    if value is None or (isinstance(value, str) and not value.strip()):
        return []
    tests = decode_packed(value, field) if isinstance(value, str) else value
    if not isinstance(tests, list):
        raise BadRawRow(f"{field} must be a list of tests")
    return tests


def _lcb_kind(tests: list[dict]) -> str:
    kinds = {str(t.get("testtype", "stdin")) for t in tests if isinstance(t, dict)}
    if len(kinds) != 1:
        raise BadRawRow(f"test types {sorted(kinds)}: expected exactly one of stdin / functional")
    return kinds.pop()


def _lcb_date(value: Any) -> str:
    return str(value)[:10] if value is not None else ""


def _lcb_study_prompt(raw: dict, content: str) -> list[dict]:
    """The study's prompt: the problem, with a functional problem's signature line."""
    problem = content
    starter = raw.get(LCB_STARTER)
    if isinstance(starter, str) and starter.strip():
        if "def " not in starter:
            raise BadRawRow("starter_code has no `def`")
        signature = "def " + starter.split("def ")[1].split("Input\n")[0].strip()
        problem += LCB_SIGNATURE.format(signature=signature)
    # data/preprocess.py drops `self` from the whole prompt, so the function is top-level.
    (user,) = CODE_FORMAT.messages(problem=problem)
    return [{**user, "content": user["content"].replace("(self, ", "(")}]


def _lcb_assert(func: str, test: dict) -> str:
    """`assert f(*args) == expected` from a functional test: one JSON argument per line."""
    try:
        arguments = [json.loads(line) for line in test["input"].splitlines() if line.strip()]
        expected = json.loads(test["output"])
    except json.JSONDecodeError as err:
        raise BadRawRow(f"functional test is not JSON ({err.msg})") from None
    return f"assert {func}({', '.join(map(repr, arguments))}) == {expected!r}"


def _lcb_driver_prompt(raw: dict, content: str, kind: str, meta: dict) -> str:
    if kind == "stdin":
        return (
            f"### Question:\n{content}\n\n### Format: Read the inputs from standard input, "
            "solve the problem and write the answer to standard output (do not directly "
            "test on the sample inputs). Put your complete program in one Python code "
            "block:\n```python\n# YOUR CODE HERE\n```\n\n### Answer: (use the format above)\n"
        )
    starter = required_text(raw.get(LCB_STARTER), "starter_code")
    return (
        f"### Question:\n{content}\n\n### Format: Complete the starter code below:\n"
        f"```python\n{starter}\n```\n"
        "Your program is run as a script. After the class, add a driver that reads the "
        "method's arguments from standard input, one JSON value per line in parameter "
        f"order, calls `Solution().{meta['func_name']}(...)` and prints the result with "
        "`print(json.dumps(result))`. Put the complete program in one Python code "
        "block.\n\n### Answer: (use the format above)\n"
    )


def _check_livecodebench(load: Load) -> None:
    for option, allowed in (("functional", ("stdio", "skip")), ("prompt", LCB_PROMPTS),
                            ("tests", LCB_TEST_SETS)):  # fmt: skip
        if load[option] not in allowed:
            raise InputError(f"{option} must be one of {allowed}, got {load[option]!r}")


def _keep_livecodebench(raw: dict, load: Load) -> str | None:
    """The contest window (`start_date` / `end_date`, ISO dates, inclusive), `platforms`, and
    with ``functional="skip"`` the functional (LeetCode) problems."""
    day = _lcb_date(raw.get(LCB_DATE))
    start, end, platforms = load["start_date"], load["end_date"], load["platforms"]
    if start and day < start:
        return f"contest_date before {start}"
    if end and day > end:
        return f"contest_date after {end}"
    wanted = {p.lower() for p in platforms} if platforms else None
    if wanted and str(raw.get(LCB_PLATFORM, "")).lower() not in wanted:
        return f"platform {raw.get(LCB_PLATFORM)!r} not in {sorted(wanted)}"
    if load["functional"] == "skip":
        public = _lcb_tests(raw, LCB_PUBLIC)
        if public and _lcb_kind(public) == "functional":
            return "functional (LeetCode) problem, functional='skip'"
    return None


def _convert_livecodebench(raw: dict, ctx: RowContext, load: Load) -> dict:
    """`prompt="study"`: the study's code prompt, one user message; a functional problem shows
    its method's signature without `self`, as the study does, and its tests become asserts on
    that function (`python_unit_tests`). `prompt="driver"`: cptlab's own, with a system prompt;
    a functional problem asks for the starter class plus a driver that reads one JSON argument
    per line and prints `json.dumps(result)`, scored on stdin/stdout. `tests="private"` (the
    study's) or `"all"` (public and private)."""
    fields = (LCB_PRIVATE,) if load["tests"] == "private" else (LCB_PUBLIC, LCB_PRIVATE)
    content = required_text(raw.get(LCB_CONTENT), "question_content")
    raw_id = required_text(raw.get(LCB_ID), "question_id")
    cases = [t for field in fields for t in _lcb_tests(raw, field)]
    if not cases:
        raise BadRawRow(f"no test cases in {' / '.join(fields)}")
    kind = _lcb_kind(cases)
    meta = {
        "tests": _stdio_tests(cases, "test cases"),
        "kind": kind,
        "platform": raw.get(LCB_PLATFORM),
        "difficulty": raw.get(LCB_DIFFICULTY),
        "contest_date": _lcb_date(raw.get(LCB_DATE)) or None,
        "source_index": ctx.index,
    }
    if kind not in ("stdin", "functional"):
        raise BadRawRow(f"unknown test type {kind!r}")
    if kind == "functional":
        extra = json_value(raw.get(LCB_METADATA) or "{}", LCB_METADATA)
        func = extra.get("func_name") if isinstance(extra, dict) else None
        meta["func_name"] = required_text(func, "metadata.func_name")
    # The tests as the study stores them, for its reward (cptlab.verifiers.study_code).
    meta["study_tests"] = {
        "testtype": kind,
        "inputs": [t["input"] for t in meta["tests"]],
        "outputs": [t["output"] for t in meta["tests"]],
        "fn_name": meta.get("func_name", ""),
        "time_limit": LCB_STUDY_TIME_LIMIT,
    }
    meta = {k: v for k, v in meta.items() if v is not None}
    if load["prompt"] == "study":
        messages = _lcb_study_prompt(raw, content)
        if kind == "functional":  # the top-level function the prompt asks for, by asserts
            meta["tests"] = [_lcb_assert(meta["func_name"], t) for t in meta["tests"]]
            meta["verifier"] = "python_unit_tests"
            # The signature's annotations (List[int]) need typing's names, which the study's
            # harness provides too.
            meta["prelude"] = LCB_PRELUDE
    else:
        messages = chat_prompt(LCB_SYSTEM, _lcb_driver_prompt(raw, content, kind, meta))
    return canonical_row("livecodebench", "code", slug(raw_id), messages, CODE_ANSWER, meta)


LCB_OPTIONS = {"start_date": None, "end_date": None, "platforms": None, "functional": "stdio",
               "prompt": "study", "tests": "private"}  # fmt: skip
# The study's contest window (data/utils/livecodebench.py: 2025-02-01 <= date < 2025-05-01).
LCB_STUDY_WINDOW = {"start_date": "2025-02-01", "end_date": "2025-04-30"}
LCB_PUBLISHED = (
    Published(1055, 1055, "release_v6, 1,055 problems (LiveCodeBench's release notes)",
              rows=1055, options={"start_date": None, "end_date": None, "platforms": None,
                                  "functional": "stdio"}),
    Published(1, 175, "none for the study's window; it lies in release_v6's last 175 problems "
              "(2025-01 to 2025-04; 1,055 - 880 of release_v5)",
              options={**LCB_STUDY_WINDOW, "platforms": None, "functional": "stdio"}),
)  # fmt: skip


ENTRIES = (
    Benchmark("dolci_code_train", "code", "train", "python_unit_tests",
              _dolci("dolci_code_train", "train", DOLCI_UNIT),
              "Dolci-Think-RL-7B 'code' rows (assert tests), train", study_verifier="study_code"),
    Benchmark("dolci_code_test", "code", "id", "python_unit_tests",
              _dolci("dolci_code_test", "test", DOLCI_UNIT),
              "Dolci-Think-RL-7B 'code' rows (assert tests), held out",
              study_verifier="study_code"),
    Benchmark("dolci_code_stdio_train", "code", "train", "stdio_tests",
              _dolci("dolci_code_stdio_train", "train", DOLCI_STDIO),
              "Dolci-Think-RL-7B 'code_stdio' rows (stdin/stdout tests), train",
              study_verifier="study_code"),
    Benchmark("dolci_code_stdio_test", "code", "id", "stdio_tests",
              _dolci("dolci_code_stdio_test", "test", DOLCI_STDIO),
              "Dolci-Think-RL-7B 'code_stdio' rows (stdin/stdout tests), held out",
              study_verifier="study_code"),
    Benchmark("livecodebench", "code", "ood", "stdio_tests",
              Recipe("livecodebench", "code",
                     Source(LCB_HUB, revision=LCB_REVISION, files=LCB_HUB_FILES),
                     CODE_FORMAT,
                     _convert_livecodebench, keep=_keep_livecodebench,
                     columns=(LCB_DATE, LCB_PLATFORM, LCB_PUBLIC), check=_check_livecodebench,
                     options=LCB_OPTIONS, published=LCB_PUBLISHED),
              "LiveCodeBench v6, private tests, the study's prompt", study_verifier="study_code"),
)  # fmt: skip
