"""The study's benchmark loaders (cptlab.domains.paper) on small raw-schema fixtures.

Each fixture under tests/fixtures/paper/<dataset>/ is written in the dataset's RAW schema (as
published), so these tests check the whole path: raw fields -> prompt format -> canonical row
-> verifier. A constructed correct completion must score 1 and a wrong one 0.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import pickle
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

import cptlab.domains.paper as paper
from cptlab.domains import verifier_for
from cptlab.domains.registry import get_benchmark, load_benchmark
from cptlab.rows import RowError, validate_row
from cptlab.verifiers import score

FIXTURES = Path(__file__).parent / "fixtures" / "paper"

# benchmark -> (fixture path, domain, split, verifier)
EXPECTED = {
    "dapo_math": ("dapo_math", "math", "train", "math_boxed"),
    "aime": ("aime", "math", "id", "math_boxed"),
    "math500": ("math500", "math", "ood", "math_boxed"),
    "sciknoweval_train": ("sciknoweval", "science", "train", "mcq_answer_tag"),
    "sciknoweval_test": ("sciknoweval", "science", "id", "mcq_answer_tag"),
    "gpqa_diamond": ("gpqa_diamond/gpqa_diamond.csv", "science", "ood", "mcq_boxed_letter"),
    "toolalpaca_train": ("toolalpaca/train_data.json", "tool", "train", "react_tool"),
    "toolalpaca_test": ("toolalpaca/eval_simulated.json", "tool", "id", "react_tool"),
    "bfcl_multiple": ("bfcl_multiple", "tool", "ood", "bfcl_ast"),
    "dolci_code_train": ("dolci_code", "code", "train", "python_unit_tests"),
    "dolci_code_test": ("dolci_code", "code", "id", "python_unit_tests"),
    "dolci_code_stdio_train": ("dolci_code", "code", "train", "stdio_tests"),
    "dolci_code_stdio_test": ("dolci_code", "code", "id", "stdio_tests"),
    "livecodebench": ("livecodebench", "code", "ood", "stdio_tests"),
    "zebralogic": ("zebralogic", "logic", "ood", "zebra_grid"),
    "mmlu_redux": ("mmlu_redux", "knowledge", "ood", "mcq_letter"),
}
CODE = {name for name, spec in EXPECTED.items() if spec[1] == "code"}

# Correct programs for the code fixtures, by raw id.
SOLUTIONS = {
    "code-add-1": "def add(a, b):\n    return a + b\n",
    "code-even-2": "def is_even(n):\n    return n % 2 == 0\n",
    "code-rev-3": "def reverse_string(s):\n    return s[::-1]\n",
    "stdio-double-4": "print(2 * int(input()))\n",
    "stdio-sum-5": "a, b = map(int, input().split())\nprint(a + b)\n",
    "abc390_a": "a, b = map(int, input().split())\nprint(a + b)\n",
    "2063A": "input()\nprint(max(map(int, input().split())))\n",
    # The study's prompt shows the method's signature without `self`: a top-level function.
    "3781": (
        "def twoSum(nums: List[int], target: int) -> List[int]:\n"
        "    seen = {}\n    for i, x in enumerate(nums):\n"
        "        if target - x in seen:\n            return [seen[target - x], i]\n"
        "        seen[x] = i\n    return []\n"
    ),
}


def fixture(name: str) -> str:
    return str(FIXTURES / EXPECTED[name][0])


# The GPQA fixture is a CSV (its original release format), read through `datasets`: its Arrow
# cache goes to a per-session temporary folder.
HF_CACHE: dict[str, str] = {}


@pytest.fixture(scope="session", autouse=True)
def _hf_cache(tmp_path_factory) -> None:
    HF_CACHE["dir"] = str(tmp_path_factory.mktemp("hf_cache"))


def load(name: str, **options) -> list[dict]:
    if name == "gpqa_diamond":
        options.setdefault("cache_dir", HF_CACHE["dir"])
    return load_benchmark(name, path=options.pop("path", fixture(name)), **options)


def user_text(row: dict) -> str:
    return next(m["content"] for m in row["prompt"] if m["role"] == "user")


def system_text(row: dict) -> str | None:
    return next((m["content"] for m in row["prompt"] if m["role"] == "system"), None)


def raw_id(row: dict) -> str:
    return row["id"].split("-", 1)[1]


# ----- constructed completions ------------------------------------------------------------------


def react(calls: list[dict]) -> str:
    parts = [
        f"Thought: I should call {c['name']}.\nAction: {c['name']}\n"
        f"Action Input: {json.dumps(c['arguments'])}\n"
        for c in calls
    ]
    return "".join(parts) + "Thought: I have what I need.\nFinal Answer: Done."


def bfcl_calls(expected: list[dict], break_first: bool = False) -> str:
    calls = []
    for k, call in enumerate(expected):
        ((func, arguments),) = call.items()
        parts = []
        for j, (arg, values) in enumerate(arguments.items()):
            value = next(v for v in values if v != "")
            if break_first and k == 0 and j == 0:
                value = "certainly not this"
            parts.append(f"{arg}={value!r}")
        calls.append(f"{func}({', '.join(parts)})")
    return "[" + ", ".join(calls) + "]"


def other_letter(row: dict) -> str:
    n = len(row["metadata"]["options"])
    return next(letter for letter in "ABCD"[:n] if letter != row["answer"])


def correct_completion(row: dict) -> str:
    name = row["benchmark"]
    if name in ("dapo_math", "aime", "math500"):
        return f"Some working.\nSo the final answer is \\boxed{{{row['answer']}}}."
    if name.startswith("sciknoweval"):
        return f"<reasoning>\nBy elimination.\n</reasoning>\n<answer>\n{row['answer']}\n</answer>"
    if name == "gpqa_diamond":
        return f"Thinking it over, the option is \\boxed{{{row['answer']}}}"
    if name == "mmlu_redux":
        return f"Step by step, the other options fail.\nThe answer is {row['answer']}."
    if name.startswith("toolalpaca"):
        return react(json.loads(row["answer"]))
    if name == "bfcl_multiple":
        return bfcl_calls(json.loads(row["answer"]))
    if name == "zebralogic":
        return json.dumps({"reasoning": "Clue by clue.", "solution": json.loads(row["answer"])})
    if name in CODE:
        return f"Here is my program.\n```python\n{SOLUTIONS[raw_id(row)]}```\n"
    raise AssertionError(name)


def wrong_completion(row: dict) -> str:
    name = row["benchmark"]
    if name in ("dapo_math", "aime", "math500"):
        return "So the final answer is \\boxed{-987654}."
    if name.startswith("sciknoweval"):
        return f"<reasoning>Guess.</reasoning><answer>{other_letter(row)}</answer>"
    if name == "gpqa_diamond":
        return f"\\boxed{{{other_letter(row)}}}"
    if name == "mmlu_redux":
        return f"The answer is {other_letter(row)}."
    if name.startswith("toolalpaca"):
        calls = json.loads(row["answer"])
        calls[0] = {"name": calls[0]["name"], "arguments": {"unrelated": "value"}}
        return react(calls)
    if name == "bfcl_multiple":
        return bfcl_calls(json.loads(row["answer"]), break_first=True)
    if name == "zebralogic":
        grid = json.loads(row["answer"])
        wrong = {h: {a: "nobody" for a in attrs} for h, attrs in grid.items()}
        return json.dumps({"reasoning": "Guess.", "solution": wrong})
    if name in CODE:
        return "```python\nprint('not a solution')\n\n\ndef unrelated():\n    return None\n```"
    raise AssertionError(name)


# ----- the registry entries ---------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_registered_with_domain_split_verifier(name: str) -> None:
    benchmark = get_benchmark(name)
    assert (benchmark.domain, benchmark.split, benchmark.verifier) == EXPECTED[name][1:]
    assert benchmark in paper.PAPER_BENCHMARKS


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_rows_valid_unique_and_stable(name: str) -> None:
    rows = load(name)
    assert rows, f"{name}: no rows from the fixture"
    for row in rows:
        validate_row(row)
        assert row["benchmark"] == name
        assert row["domain"] == EXPECTED[name][1]
        json.dumps(row)  # rows must round-trip through JSONL
    ids = [row["id"] for row in rows]
    assert len(set(ids)) == len(ids)
    assert all(i.startswith(f"{name}-") for i in ids)
    assert load(name) == rows  # same ids, same content on every call


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_reference_scores_one_and_wrong_scores_zero(name: str) -> None:
    for row in load(name):
        verifier = verifier_for(row)  # LiveCodeBench's functional rows carry their own
        good = score(verifier, correct_completion(row), row)
        assert good.reward == 1.0, (row["id"], good)
        bad = score(verifier, wrong_completion(row), row)
        assert bad.reward == 0.0, (row["id"], bad)


@pytest.mark.parametrize("name", ["math500", "zebralogic", "dolci_code_train"])
def test_subsample_is_deterministic_subset(name: str) -> None:
    everything = {row["id"] for row in load(name)}
    first = load(name, n=2, seed=3)
    assert len(first) == 2 and {r["id"] for r in first} <= everything
    assert load(name, n=2, seed=3) == first
    assert load(name, n=0) == []
    assert len(load(name, n=100)) == len(everything)


# ----- prompt formats ---------------------------------------------------------------------------


def test_math_prompts_ask_for_boxed_answers() -> None:
    for name in ("dapo_math", "aime", "math500"):
        for row in load(name):
            assert system_text(row) is None
            assert user_text(row).endswith(paper.MATH_INSTRUCTION)
            assert "\\boxed{}" in user_text(row)
    dapo = load("dapo_math")
    # DAPO's own "Answer: $Answer" instructions are stripped; only the problem remains.
    assert all("Answer:" not in user_text(r) and "Solve the following" not in user_text(r)
               for r in dapo)  # fmt: skip
    assert user_text(dapo[0]).startswith("What is the sum of the first 10 positive integers?")


def test_dapo_duplicates_are_counted_and_logged(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="cptlab.domains.paper"):
        rows = load("dapo_math")
    assert len(rows) == 4
    assert paper.exclusions("dapo_math") == {"duplicate problem": 1}
    assert any(
        "dapo_math: excluded 1 raw rows, returned 4" in r.getMessage() for r in caplog.records
    )
    assert rows[0]["metadata"]["source_id"] == "9a9b6eb4-a1cb-49d1-8c1e-62eaf2f74079"


def test_aime_two_years_integer_answers() -> None:
    rows = load("aime")
    assert [r["id"] for r in rows][:1] == ["aime-aime24-60"]
    assert {r["metadata"]["year"] for r in rows} == {"2024", "2025"}
    by_id = {r["id"]: r["answer"] for r in rows}
    assert by_id["aime-aime24-60"] == "16"  # from math-ai/aime24's boxed `solution`
    assert by_id["aime-aime25-2"] == "10"  # "010" normalised


def test_sciknoweval_prompt_and_filters() -> None:
    rows = load("sciknoweval_train") + load("sciknoweval_test")
    assert len(rows) == 3  # Chemistry only: the Biology, L2 and true_or_false rows excluded
    assert paper.exclusions("sciknoweval_test") == {
        "domain 'Biology' not in ['Chemistry']": 1,
        "level 'L2' not in ['L3']": 1,
        "type 'true_or_false' not in ['mcq-4-choices', 'mcq-2-choices']": 1,
    }
    pooled = load("sciknoweval_train", domains=None) + load("sciknoweval_test", domains=None)
    assert len(pooled) == 4
    for row in pooled:
        assert system_text(row) == paper.SCIKNOWEVAL_SYSTEM
        assert "\nA: " in user_text(row) and user_text(row).endswith(
            "\nPlease reason step by step."
        )
    two = next(r for r in pooled if len(r["metadata"]["options"]) == 2)
    assert "\nB: " in user_text(two) and "\nC: " not in user_text(two)


def test_sciknoweval_keeps_every_row_and_splits_each_domain_alone(tmp_path: Path) -> None:
    raws = [{**_ske_raw(k), "domain": "Chemistry" if k < 30 else "Physics"} for k in range(50)]
    raws += [dict(raws[0])]  # an exact duplicate stays, as in the study
    path = _lines(tmp_path / "s.jsonl", raws)
    options = {"path": path, "domains": ["Chemistry", "Physics"]}
    test = load("sciknoweval_test", **options)
    train = load("sciknoweval_train", **options)
    assert len(test) + len(train) == 51
    by_domain: dict[str, list[int]] = {"Chemistry": [], "Physics": []}
    for row in test:
        by_domain[row["metadata"]["science_domain"]].append(row["metadata"]["study_index"])
    import datasets

    for domain, size in (("Chemistry", 31), ("Physics", 20)):
        table = datasets.Dataset.from_list([{"k": k} for k in range(size)])
        assert by_domain[domain] == sorted(
            table.train_test_split(test_size=0.1, seed=42)["test"]["k"]
        )


def test_sciknoweval_all_rows_excluded_is_an_error(tmp_path: Path) -> None:
    path = _lines(tmp_path / "s.jsonl", [{**_ske_raw(k), "type": None} for k in range(3)])
    with pytest.raises(RowError, match=r"all 3 raw rows were excluded \(type None not in"):
        load("sciknoweval_test", path=path)


def _ske_raw(k: int) -> dict:
    return {
        "question": f"Question number {k}: which option is right?",
        "choices": {"text": [f"w{k}", f"x{k}", f"y{k}", f"z{k}"], "label": ["A", "B", "C", "D"]},
        "answerKey": "ABCD"[k % 4],
        "type": "mcq-4-choices" if k % 5 else "mcq-2-choices",
        "domain": "Chemistry",
        "details": {"level": "L3", "task": "t", "subtask": "s"},
    }


def test_sciknoweval_split_is_deterministic_90_10(tmp_path: Path) -> None:
    raws = [_ske_raw(k) for k in range(200)]
    for raw in raws:
        if raw["type"] == "mcq-2-choices":
            raw["choices"] = {"text": raw["choices"]["text"][:2], "label": ["A", "B"]}
            raw["answerKey"] = "A"
    path = tmp_path / "ske.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in raws))
    train = load("sciknoweval_train", path=str(path))
    test = load("sciknoweval_test", path=str(path))
    assert (len(train), len(test)) == (180, 20)
    train_keys = {r["id"].split("-", 1)[1] for r in train}
    test_keys = {r["id"].split("-", 1)[1] for r in test}
    assert not train_keys & test_keys and len(train_keys | test_keys) == 200
    assert load("sciknoweval_test", path=str(path)) == test
    # The same permutation as datasets' train_test_split(test_size=0.1, seed=42), as used by the
    # public SDPO data preparation.
    import datasets

    indexed = datasets.Dataset.from_list([{"k": k} for k in range(200)])
    expected = indexed.train_test_split(test_size=0.1, seed=42)["test"]["k"]
    got = sorted(r["metadata"]["source_index"] for r in test)
    assert got == sorted(expected)
    other = load("sciknoweval_test", path=str(path), split_seed=7)
    assert {r["id"] for r in other} != {r["id"] for r in test}


def test_gpqa_shuffle_deterministic_and_answer_follows(tmp_path: Path) -> None:
    import csv

    with open(fixture("gpqa_diamond"), newline="") as handle:
        raw = {r["Record ID"]: r for r in csv.DictReader(handle)}
    first = load("gpqa_diamond", seed=0)
    assert load("gpqa_diamond", seed=0) == first
    for row in first:
        source = raw[raw_id(row)]
        options = row["metadata"]["options"]
        assert options[ord(row["answer"]) - ord("A")] == source["Correct Answer"]
        assert sorted(options) == sorted(
            [source["Correct Answer"]] + [source[f"Incorrect Answer {k}"] for k in (1, 2, 3)]
        )
        assert user_text(row).startswith("Return your final response within \\boxed{}")
        assert "\nOptions: A) " in user_text(row) and user_text(row).endswith("\nAnswer:")
        order = paper.gpqa_option_order(raw_id(row), 0)
        assert row["answer"] == "ABCD"[order.index(0)]
    reshuffled = load("gpqa_diamond", seed=0, option_seed=5)
    assert [r["metadata"]["options"] for r in reshuffled] != [
        r["metadata"]["options"] for r in first
    ]
    assert load("gpqa_diamond", seed=5) == reshuffled  # option_seed defaults to `seed`


def test_toolalpaca_study_prompt_files_as_splits_and_golden_answers() -> None:
    train = load("toolalpaca_train")
    assert len(train) == 4  # every usable instance: the file is the split
    assert paper.exclusions("toolalpaca_train") == {
        "instance without reference calls (failed generation)": 1
    }
    row = next(r for r in train if r["id"].endswith("Open_Brewery_DB-1"))
    assert json.loads(row["answer"]) == [
        {"name": "getBreweryById", "arguments": {"id": "madtree-brewing-cincinnati"}},
        {"name": "searchBreweries", "arguments": {"query": "madtree", "per_page": 5}},
    ]
    assert system_text(row) is None  # the study puts everything in the user message
    text = user_text(row)
    assert text.startswith(paper.tool.TOOLALPACA_HEADER + "Name: Open Brewery DB\nDescription: ")
    assert "Documentation:\nsearchBreweries: " in text and "getDetails" not in text
    assert text.endswith("\nBegin!\nQuestion: Look up brewery 'madtree-brewing-cincinnati' "
                         "and then search for 'madtree'.")  # fmt: skip
    assert row["metadata"]["tools"] == ["searchBreweries", "getBreweryById"]
    golden = load("toolalpaca_test")
    assert [json.loads(r["answer"])[0]["arguments"] for r in golden] == [
        {"city": "Paris", "units": "metric"},
        {"city": "Oslo", "days": 3},
    ]
    # holdout= splits one file instead (10% held out, split seed 42).
    held = load("toolalpaca_test", path=fixture("toolalpaca_train"), holdout=0.1)
    kept = load("toolalpaca_train", path=fixture("toolalpaca_train"), holdout=0.1)
    assert (len(kept), len(held)) == (3, 1) and not {r["id"] for r in kept} & {
        r["id"] for r in held
    }


def test_toolalpaca_needs_a_path() -> None:
    with pytest.raises(ValueError, match="no canonical hub copy"):
        load_benchmark("toolalpaca_train")


def test_bfcl_schemas_and_possible_answers() -> None:
    rows = load("bfcl_multiple")
    raw_q = [json.loads(line) for line in open(fixture("bfcl_multiple") + "/BFCL_v4_multiple.json")]
    raw_a = [
        json.loads(line)
        for line in open(fixture("bfcl_multiple") + "/possible_answer/BFCL_v4_multiple.json")
    ]
    for row, q, a in zip(rows, raw_q, raw_a, strict=True):
        assert row["metadata"]["functions"] == q["function"]
        assert json.loads(row["answer"]) == a["ground_truth"]
        assert q["function"][0]["name"] in system_text(row)
        assert user_text(row) == q["question"][0][0]["content"]
    # The optional argument ("" among the allowed values) may be left out.
    assert score("bfcl_ast", "[calc_area_triangle(base=10, height=5)]", rows[0]).reward == 1


def test_dolci_subsets_tests_and_prompt() -> None:
    rows = load("dolci_code_train") + load("dolci_code_test")
    assert sorted(raw_id(r) for r in rows) == ["code-add-1", "code-even-2", "code-rev-3"]
    even = next(r for r in rows if raw_id(r) == "code-even-2")
    assert even["metadata"]["tests"][0] == "assert is_even(2) is True"  # from a JSON string
    assert all(not user_text(r).lower().startswith("user:") for r in rows)
    assert user_text(even).startswith(paper.CODE_PROMPT.split("{problem}")[0])
    assert all(user_text(r).startswith("You are a coding expert.") for r in rows)
    stdio = load("dolci_code_stdio_train") + load("dolci_code_stdio_test")
    packed = next(r for r in stdio if raw_id(r) == "stdio-sum-5")
    assert packed["metadata"]["tests"][0] == {"input": "1 2\n", "output": "3\n"}  # base64/zlib
    assert all(r["metadata"]["test_format"] == "stdio" for r in stdio)


DRIVER_3781 = (
    "import json\nimport sys\nfrom typing import List\n\n\nclass Solution:\n"
    "    def twoSum(self, nums: List[int], target: int) -> List[int]:\n"
    "        seen = {}\n        for i, x in enumerate(nums):\n"
    "            if target - x in seen:\n                return [seen[target - x], i]\n"
    "            seen[x] = i\n        return []\n\n\n"
    "args = [json.loads(line) for line in sys.stdin.read().splitlines() if line.strip()]\n"
    "print(json.dumps(Solution().twoSum(*args)))\n"
)


def test_livecodebench_study_prompt_private_tests_and_date_window() -> None:
    rows = {raw_id(r): r for r in load("livecodebench")}
    stdin = rows["abc390_a"]
    assert stdin["metadata"]["tests"][0] == {"input": "10 20\n", "output": "30\n"}  # private
    assert system_text(stdin) is None
    assert user_text(stdin) == paper.code.CODE_PROMPT.format(
        problem="You are given two integers A and B. Print A + B.\n\nInput\n\nA B\n\nOutput\n\n"
        "Print the answer."
    )
    functional = rows["3781"]
    assert user_text(functional).endswith(
        "\n\nYour solution should have the following signature: ```python\n"
        "def twoSum(nums: List[int], target: int) -> List[int]:\n```"
    )
    assert "(self, " not in user_text(functional)
    assert functional["metadata"]["tests"] == ["assert twoSum([3, 2, 4], 6) == [1, 2]"]
    assert verifier_for(functional) == "python_unit_tests"
    everything = {raw_id(r): r for r in load("livecodebench", tests="all")}
    assert everything["abc390_a"]["metadata"]["tests"][0] == {"input": "1 2\n", "output": "3\n"}
    window = load("livecodebench", start_date="2025-02-01", end_date="2025-02-28")
    assert [raw_id(r) for r in window] == ["abc390_a"]
    assert paper.exclusions("livecodebench") == {
        "contest_date after 2025-02-28": 1,
        "contest_date before 2025-02-01": 1,
    }
    assert "3781" not in {raw_id(r) for r in load("livecodebench", functional="skip")}


def test_livecodebench_driver_prompt_scores_on_stdio() -> None:
    rows = {raw_id(r): r for r in load("livecodebench", prompt="driver")}
    assert system_text(rows["abc390_a"]) == paper.LCB_SYSTEM
    assert "standard input" in user_text(rows["abc390_a"])
    functional = rows["3781"]
    assert functional["metadata"]["func_name"] == "twoSum"
    assert "Solution().twoSum" in user_text(functional) and "json.dumps" in user_text(functional)
    assert verifier_for(functional) == "stdio_tests"
    completion = f"```python\n{DRIVER_3781}```"
    assert score("stdio_tests", completion, functional).reward == 1.0


def test_zebralogic_grid_and_prompt() -> None:
    row = load("zebralogic")[0]
    assert json.loads(row["answer"]) == {
        "House 1": {"Name": "Alice", "Pet": "dog"},
        "House 2": {"Name": "Bob", "Pet": "cat"},
    }
    assert '"solution"' in user_text(row) and "___" in user_text(row)
    half = json.loads(row["answer"])
    half["House 1"]["Pet"] = "cat"
    half["House 2"]["Pet"] = "dog"
    assert score("zebra_grid", json.dumps({"solution": half}), row).reward == 0.5


def test_mmlu_redux_exclusions_are_recorded(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="cptlab.domains.paper"):
        rows = load("mmlu_redux")
    assert [raw_id(r) for r in rows] == ["anatomy-0", "anatomy-1", "astronomy-0"]
    assert paper.exclusions("mmlu_redux") == {
        "error_type='wrong_groundtruth'": 1,
        "error_type='no_correct_answer'": 1,
        "error_type='expert'": 1,
    }
    assert any("mmlu_redux: excluded 3" in r.getMessage() for r in caplog.records)
    assert "about anatomy" in user_text(rows[0]) and "The answer is" in user_text(rows[0])
    fixed = {raw_id(r): r for r in load("mmlu_redux", fix_wrong_groundtruth=True)}
    assert fixed["anatomy-2"]["answer"] == "A"  # the annotators' correct_answer
    only = load("mmlu_redux", subjects=["astronomy"])
    assert [raw_id(r) for r in only] == ["astronomy-0"]


# ----- malformed raw rows -----------------------------------------------------------------------


def _lines(path: Path, rows: list) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return str(path)


def _bad_math500(tmp: Path) -> str:
    good = json.loads(open(fixture("math500") + "/test.jsonl").readline())
    return _lines(
        tmp / "m.jsonl", [good, {**good, "answer": None, "solution": None, "unique_id": "x"}]
    )


def _bad_json_line(tmp: Path) -> str:
    good = json.loads(open(fixture("math500") + "/test.jsonl").readline())
    return _lines(tmp / "m.jsonl", [good, '{"problem": "unterminated'])


def _bad_aime(tmp: Path) -> str:
    return _lines(tmp / "a.jsonl", [{"id": 1, "problem": "P?", "answer": "x+1"}])


def _bad_dapo(tmp: Path) -> str:
    row = json.loads(open(fixture("dapo_math") + "/dapo_math.jsonl").readline())
    return _lines(tmp / "d.jsonl", [row, {**row, "prompt": [{"role": "user", "content": "  "}]}])


def _bad_sciknoweval(tmp: Path) -> str:
    return _lines(tmp / "s.jsonl", [{**_ske_raw(0), "answerKey": "E"}])


def _bad_gpqa(tmp: Path) -> str:
    return _lines(tmp / "g.jsonl", [{"Question": "Q?", "Correct Answer": "a",
        "Incorrect Answer 1": "b", "Incorrect Answer 2": "", "Incorrect Answer 3": "d",
        "Record ID": "recX"}])  # fmt: skip


def _bad_toolalpaca(tmp: Path) -> str:
    apis = json.loads(open(fixture("toolalpaca_train")).read())
    steps = apis[0]["Instances"][0]["intermediate_steps"]
    steps[0][0][1] = '{"query": "dog"'  # truncated JSON
    path = tmp / "t.json"
    path.write_text(json.dumps(apis))
    return str(path)


def _bad_bfcl(tmp: Path) -> str:
    root = Path(fixture("bfcl_multiple"))
    questions = (root / "BFCL_v4_multiple.json").read_text().splitlines()
    answers = (root / "possible_answer/BFCL_v4_multiple.json").read_text().splitlines()
    _lines(tmp / "b/BFCL_v4_multiple.json", questions)
    _lines(tmp / "b/possible_answer/BFCL_v4_multiple.json", answers[:1] + answers[2:])
    return str(tmp / "b")


def _bad_dolci(tmp: Path) -> str:
    # base64 of a zlib header, then no zlib stream: packed tests that do not decode.
    row = {"id": "c1", "prompt": "user: f", "ground_truth": ["eJxLTEoGAAJN"],
           "dataset": ["code"]}  # fmt: skip
    return _lines(tmp / "dolci.jsonl", [row])


def _bad_livecodebench(tmp: Path) -> str:
    row = json.loads(open(fixture("livecodebench") + "/test6.jsonl").readline())
    return _lines(tmp / "l.jsonl", [{**row, "public_test_cases": "[]", "private_test_cases": ""}])


def _bad_zebralogic(tmp: Path) -> str:
    row = json.loads(open(fixture("zebralogic") + "/grid_mode.jsonl").readline())
    masked = {
        "header": ["House", "Name", "Pet"],
        "rows": [["1", "___", "___"], ["2", "___", "___"]],
    }
    return _lines(tmp / "z.jsonl", [{**row, "solution": masked}])


def _bad_mmlu(tmp: Path) -> str:
    row = json.loads(open(fixture("mmlu_redux") + "/anatomy.jsonl").readline())
    return _lines(tmp / "anatomy.jsonl", [row, {**row, "answer": 7}])


HOLDOUT = {"toolalpaca_train", "dolci_code_train"}  # loaders with a `holdout` option
MALFORMED = [
    ("math500", _bad_math500, r"raw row 1 \(.*m\.jsonl:2\): missing answer"),
    ("math500", _bad_json_line, r"raw row 1 \(.*m\.jsonl:2\): invalid JSON"),
    ("aime", _bad_aime, r"raw row 0 \(.*a\.jsonl:1\): AIME answer 'x\+1' is not an integer"),
    ("dapo_math", _bad_dapo, r"raw row 1 \(.*d\.jsonl:2\): empty problem"),
    ("sciknoweval_train", _bad_sciknoweval, r"raw row 0 .*answerKey 'E' is not one of"),
    ("gpqa_diamond", _bad_gpqa, r"raw row 0 \(.*g\.jsonl:1\): empty Incorrect Answer 2"),
    ("toolalpaca_train", _bad_toolalpaca, r"raw row 0 \(.*t\.json\[0\] instance 0\): .*not JSON"),
    ("bfcl_multiple", _bad_bfcl, r"raw row 1 .*no possible answer for id 'multiple_1'"),
    ("dolci_code_train", _bad_dolci, r"raw row 0 .*neither JSON nor base64"),
    ("livecodebench", _bad_livecodebench, r"raw row 0 .*no test cases"),
    ("zebralogic", _bad_zebralogic, r"raw row 0 .*solution is masked"),
    ("mmlu_redux", _bad_mmlu, r"raw row 1 \(.*anatomy\.jsonl:2\): answer index 7 out of range"),
]


@pytest.mark.parametrize(
    ("name", "make", "message"), MALFORMED, ids=[m[1].__name__ for m in MALFORMED]
)
def test_malformed_raw_row_names_dataset_row_and_problem(tmp_path, name, make, message) -> None:
    path = make(tmp_path)
    with pytest.raises(RowError, match=rf"^{name}: {message}"):
        # holdout=None: the one-row file is the whole split (a 90/10 split would hold it out).
        load_benchmark(name, path=path, **({"holdout": None} if name in HOLDOUT else {}))


def test_non_strict_counts_unconvertible_rows(tmp_path: Path) -> None:
    rows = load_benchmark("math500", path=_bad_math500(tmp_path), strict=False)
    assert len(rows) == 1
    ((reason, count),) = paper.exclusions("math500").items()
    assert reason.startswith("unconvertible raw row (missing answer") and count == 1


# ----- reading: formats, hub fallback, options -------------------------------------------------


def test_parquet_copy_gives_the_same_rows(tmp_path: Path) -> None:
    import pandas as pd

    raws = [json.loads(line) for line in open(fixture("math500") + "/test.jsonl")]
    pd.DataFrame(raws).to_parquet(tmp_path / "test-00000-of-00001.parquet")
    rows = load_benchmark("math500", path=str(tmp_path), cache_dir=str(tmp_path / "cache"))
    assert rows == load("math500")


def test_bfcl_needs_gorillas_files() -> None:
    """BFCL v4 is on GitHub only (the hub repository holds v3's files)."""
    with pytest.raises(ValueError, match="BFCL v4 has no hub copy; pass path="):
        load_benchmark("bfcl_multiple")


def test_path_list_reads_every_source() -> None:
    files = [fixture("aime") + "/aime24.jsonl", fixture("aime") + "/aime25.jsonl"]
    assert load_benchmark("aime", path=files) == load("aime")


def test_missing_local_path_and_unknown_option() -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_benchmark("math500", path="/nonexistent/math500.jsonl")
    with pytest.raises(ValueError, match="unknown option"):  # the CLI's one-line error path
        load_benchmark("math500", path=fixture("math500"), no_such_option=1)


def test_packed_tests_are_decoded_without_importing_anything() -> None:
    tests = [{"input": "1\n", "output": "2\n"}]
    packed = base64.b64encode(zlib.compress(pickle.dumps(json.dumps(tests)))).decode()
    assert paper.decode_packed(packed, "x") == tests

    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    evil = base64.b64encode(zlib.compress(pickle.dumps(Evil()))).decode()
    with pytest.raises(ValueError):
        paper.decode_packed(evil, "x")


def test_import_does_not_load_datasets() -> None:
    src = str(Path(paper.__file__).parents[3])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    code = (
        "import sys, cptlab.domains, cptlab.verifiers\n"
        "before = 'datasets' in sys.modules\n"
        "import cptlab.domains.paper\n"
        "print(before or 'datasets' not in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "True", out.stderr


def test_prompts_pin_the_studys_text() -> None:
    """The study's prompt strings, whole (data/format/prompts.py, data/format/gpqa.py), on a
    fixture row each of the hub-only datasets it formats."""
    aime = load("aime")[0]
    assert user_text(aime) == (
        "Find the number of positive divisors of $2024$.\n\n"
        "Please reason step by step, and put your final answer within \\boxed{}."
    )
    gpqa = next(r for r in load("gpqa_diamond") if r["id"] == "gpqa_diamond-rec0AbCdEfGh1")
    options = ", ".join(f"{'ABCD'[k]}) {o}" for k, o in enumerate(gpqa["metadata"]["options"]))
    assert user_text(gpqa) == (
        "Return your final response within \\boxed{} and only include the letter choice "
        "(A, B, C, or D) as your final response.\n"
        "Problem: A spin-1/2 particle is in the state (|up> + |down>)/sqrt(2). What is the "
        f"expectation value of S_z?\nOptions: {options}\nAnswer:"
    )
    assert system_text(aime) is None and system_text(gpqa) is None
    for name in ("math500", "dapo_math"):
        row = load(name)[0]
        problem = user_text(row).removesuffix(
            "\n\nPlease reason step by step, and put your final answer within \\boxed{}."
        )
        assert problem != user_text(row) and problem.strip() == problem


# ----- the declarative entries ------------------------------------------------------------------


def test_every_real_benchmark_is_a_recipe_with_a_source_and_a_prompt() -> None:
    from cptlab.domains.paper.pipeline import Recipe

    for benchmark in paper.PAPER_BENCHMARKS:
        recipe = benchmark.loader
        assert isinstance(recipe, Recipe), benchmark.name
        assert (recipe.name, recipe.domain) == (benchmark.name, benchmark.domain)
        assert recipe.source.hub or recipe.needs_path, benchmark.name
        assert recipe.prompt is not None, benchmark.name
    known = r"math500: unknown option\(s\) \['no_such'\] \(data.options.math500\); known: \["
    with pytest.raises(ValueError, match=known):
        load_benchmark("math500", path=fixture("math500"), no_such=1)


def test_adding_a_dataset_is_adding_an_entry(monkeypatch, tmp_path: Path) -> None:
    """A new entry: a Source pinned to a hub commit, a Prompt, a row converter and a filter
    rule; the one pipeline reads its snapshot from the HF cache, and the registry validates its
    rows."""
    from hub_layout import HubCache, json_lines, offline

    from cptlab.domains.paper.common import canonical_row
    from cptlab.domains.paper.pipeline import Recipe
    from cptlab.domains.registry import BENCHMARKS, Benchmark, Prompt, Source

    commit = "f" * 40
    raws = [{"q": f"What is {k} + {k}?", "a": str(2 * k), "hard": k > 2} for k in range(5)]
    cache = HubCache(tmp_path / "hub")
    cache.add("someone/sums", commit, {"README.md": "# sums\n", "test.jsonl": json_lines(raws)})
    offline(monkeypatch, cache)
    prompt = Prompt("{q}\n\nPut the answer in \\boxed{{}}.")

    def convert(raw, ctx, load):
        messages = prompt.messages(q=raw["q"])
        return canonical_row("sums", "math", str(ctx.index), messages, raw["a"], {})

    def keep(raw, load):
        return "hard" if raw["hard"] else None

    source = Source("someone/sums", split="test", revision=commit)
    recipe = Recipe("sums", "math", source, prompt, convert, keep=keep)
    monkeypatch.setitem(BENCHMARKS, "sums", Benchmark("sums", "math", "ood", "math_boxed", recipe))
    rows = load_benchmark("sums", cache_dir=str(tmp_path / "datasets"))
    assert [r["answer"] for r in rows] == ["0", "2", "4"]
    assert paper.exclusions("sums") == {"hard": 2}
    assert user_text(rows[1]) == "What is 1 + 1?\n\nPut the answer in \\boxed{}."
