"""Code benchmarks: Dolci-Think-RL-7B "code" / "code_stdio" rows (train / id, held-out
split) and LiveCodeBench (ood). Rows carry their tests in metadata["tests"]."""

from __future__ import annotations

import base64
import binascii
import io
import json
import pickle
import re
import zlib
from collections.abc import Sequence
from typing import Any

from cptlab.domains.paper.common import (
    SPLIT_SEED,
    TEST_FRACTION,
    PathSpec,
    _Bad,
    _check_n,
    _Ctx,
    _digest,
    _first,
    _json_value,
    _last_user,
    _open,
    _prompt,
    _row,
    _Run,
    _slug,
    _text,
    holdout_split,
)
from cptlab.domains.registry import Benchmark

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
# The study's code prompt, one user message (Moenupa/SDPO-CL, data/format/prompts.py:
# CODE_PROMPT); LiveCodeBench adds the starter code's signature (data/utils/livecodebench.py).
CODE_PROMPT = """You are a coding expert. You will be given a coding problem, and you need to write a correct Python program that matches the specification and passes all tests. The time limit is 1 second. You may start by outlining your thought process. In the end, please provide the complete code in a code block enclosed with ``` ```.

{problem}"""  # noqa: E501
LCB_SIGNATURE = "\n\nYour solution should have the following signature: ```python\n{signature}\n```"
LCB_PROMPTS = ("study", "driver")
LCB_PRELUDE = "from typing import *\n"
LCB_STUDY_TIME_LIMIT = 6  # seconds per test (data/utils/livecodebench.py)
LCB_TEST_SETS = ("private", "all")


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


def _dolci_label(raw: dict) -> str | None:
    value = raw.get(DOLCI_DATASET)
    if isinstance(value, list):
        value = value[0] if value else None
    return None if value is None else str(value).strip()


def _dolci_prompt(raw: dict) -> str:
    messages = raw.get(DOLCI_MESSAGES)
    if isinstance(messages, list) and messages:
        return _last_user(messages, "prompt", "messages have no user turn")
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
        # The study publishes no Dolci loader; its code prompt is the one it gives every code
        # problem it formats (data/format/train.py).
        user = CODE_PROMPT.format(problem=prompt)
        return _row(name, "code", key, _prompt(None, user), CODE_ANSWER, meta)

    positions = run.filter(keep, (DOLCI_DATASET,))
    if holdout is not None:
        positions = holdout_split(positions, part, holdout, split_seed)
    return run.finish(positions, n, seed, convert)


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


def _lcb_study_prompt(raw: dict, content: str, meta: dict) -> list[dict]:
    """The study's prompt; a functional problem's tests become asserts on its function."""
    problem = content
    starter = raw.get(LCB_STARTER)
    if isinstance(starter, str) and starter.strip():
        if "def " not in starter:
            raise _Bad("starter_code has no `def`")
        signature = "def " + starter.split("def ")[1].split("Input\n")[0].strip()
        problem += LCB_SIGNATURE.format(signature=signature)
    if meta["kind"] == "functional":
        meta["tests"] = [_lcb_assert(meta["func_name"], t) for t in meta["tests"]]
        meta["verifier"] = "python_unit_tests"
        # The signature's annotations (List[int]) need typing's names, which the study's
        # harness provides too.
        meta["prelude"] = LCB_PRELUDE
    # data/preprocess.py drops `self` from the whole prompt, so the function is top-level.
    return _prompt(None, CODE_PROMPT.format(problem=problem).replace("(self, ", "("))


def _lcb_assert(func: str, test: dict) -> str:
    """`assert f(*args) == expected` from a functional test: one JSON argument per line."""
    try:
        arguments = [json.loads(line) for line in test["input"].splitlines() if line.strip()]
        expected = json.loads(test["output"])
    except json.JSONDecodeError as err:
        raise _Bad(f"functional test is not JSON ({err.msg})") from None
    return f"assert {func}({', '.join(map(repr, arguments))}) == {expected!r}"


def _lcb_driver_prompt(raw: dict, content: str, kind: str, meta: dict) -> str:
    if kind == "stdin":
        return (
            f"### Question:\n{content}\n\n### Format: Read the inputs from standard input, "
            "solve the problem and write the answer to standard output (do not directly "
            "test on the sample inputs). Put your complete program in one Python code "
            "block:\n```python\n# YOUR CODE HERE\n```\n\n### Answer: (use the format above)\n"
        )
    starter = _text(raw.get(LCB_STARTER), "starter_code")
    return (
        f"### Question:\n{content}\n\n### Format: Complete the starter code below:\n"
        f"```python\n{starter}\n```\n"
        "Your program is run as a script. After the class, add a driver that reads the "
        "method's arguments from standard input, one JSON value per line in parameter "
        f"order, calls `Solution().{meta['func_name']}(...)` and prints the result with "
        "`print(json.dumps(result))`. Put the complete program in one Python code "
        "block.\n\n### Answer: (use the format above)\n"
    )


def load_livecodebench(
    n: int | None = None,
    seed: int = 0,
    path: PathSpec = None,
    *,
    start_date: str | None = None,
    end_date: str | None = None,
    platforms: Sequence[str] | None = None,
    functional: str = "stdio",
    prompt: str = "study",
    tests: str = "private",
    strict: bool = True,
    **hub: Any,
) -> list[dict]:
    """LiveCodeBench code generation (release_v6 by default).

    `prompt="study"`: the study's code prompt, one user message; a functional (LeetCode)
    problem shows its method's signature without `self`, as the study does, and its tests
    become asserts on that function (`python_unit_tests`). `prompt="driver"`: cptlab's own,
    with a system prompt; a functional problem asks for the starter class plus a driver that
    reads one JSON argument per line and prints `json.dumps(result)`, scored on stdin/stdout.
    `tests="private"` (the study's) or `"all"` (public and private). `functional="skip"`
    excludes functional problems (counted). `start_date` / `end_date` (ISO dates, inclusive)
    select a contest window.
    """
    _check_n(n)
    if functional not in ("stdio", "skip"):
        raise ValueError(f"functional must be 'stdio' or 'skip', got {functional!r}")
    if prompt not in LCB_PROMPTS:
        raise ValueError(f"prompt must be one of {LCB_PROMPTS}, got {prompt!r}")
    if tests not in LCB_TEST_SETS:
        raise ValueError(f"tests must be one of {LCB_TEST_SETS}, got {tests!r}")
    test_fields = (LCB_PRIVATE,) if tests == "private" else (LCB_PUBLIC, LCB_PRIVATE)
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
        cases = [t for field in test_fields for t in _lcb_tests(raw, field)]
        if not cases:
            raise _Bad(f"no test cases in {' / '.join(test_fields)}")
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
            raise _Bad(f"unknown test type {kind!r}")
        if kind == "functional":
            extra = _json_value(raw.get(LCB_METADATA) or "{}", LCB_METADATA)
            func = extra.get("func_name") if isinstance(extra, dict) else None
            meta["func_name"] = _text(func, "metadata.func_name")
        # The tests as the study stores them, for its reward (cptlab.verifiers.study_code).
        meta["study_tests"] = {
            "testtype": kind,
            "inputs": [t["input"] for t in meta["tests"]],
            "outputs": [t["output"] for t in meta["tests"]],
            "fn_name": meta.get("func_name", ""),
            "time_limit": LCB_STUDY_TIME_LIMIT,
        }
        meta = {k: v for k, v in meta.items() if v is not None}
        if prompt == "study":
            messages = _lcb_study_prompt(raw, content, meta)
        else:
            messages = _prompt(LCB_SYSTEM, _lcb_driver_prompt(raw, content, kind, meta))
        return _row(name, "code", _slug(raw_id), messages, CODE_ANSWER, meta)

    positions = run.filter(keep, (LCB_DATE, LCB_PLATFORM, LCB_PUBLIC))
    return run.finish(positions, n, seed, convert)


ENTRIES = (
    Benchmark("dolci_code_train", "code", "train", "python_unit_tests", load_dolci_code_train,
              "Dolci-Think-RL-7B 'code' rows (assert tests), train",
              study_verifier="study_code"),
    Benchmark("dolci_code_test", "code", "id", "python_unit_tests", load_dolci_code_test,
              "Dolci-Think-RL-7B 'code' rows (assert tests), held out",
              study_verifier="study_code"),
    Benchmark("dolci_code_stdio_train", "code", "train", "stdio_tests",
              load_dolci_code_stdio_train,
              "Dolci-Think-RL-7B 'code_stdio' rows (stdin/stdout tests), train",
              study_verifier="study_code"),
    Benchmark("dolci_code_stdio_test", "code", "id", "stdio_tests", load_dolci_code_stdio_test,
              "Dolci-Think-RL-7B 'code_stdio' rows (stdin/stdout tests), held out",
              study_verifier="study_code"),
    Benchmark("livecodebench", "code", "ood", "stdio_tests", load_livecodebench,
              "LiveCodeBench v6, private tests, the study's prompt", study_verifier="study_code"),
)  # fmt: skip
