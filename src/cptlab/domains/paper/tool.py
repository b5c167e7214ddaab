"""Tool-use benchmarks: ToolAlpaca (train / id, held-out split), BFCL "multiple" (ood)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from cptlab.domains.paper.common import (
    BadRawRow,
    LoadRun,
    PathSpec,
    RawSegment,
    RawSource,
    RowContext,
    canonical_row,
    chat_prompt,
    check_hub_options,
    drop_none,
    json_value,
    open_source,
    required_text,
    slug,
)
from cptlab.domains.paper.pipeline import Holdout, Load, Recipe
from cptlab.domains.registry import Benchmark, Prompt, Published, Source
from cptlab.errors import InputError

# ToolAlpaca (github.com/tangqiaoyu/ToolAlpaca: data/train_data.json, data/eval_simulated.json,
# data/eval_real.json; no canonical hub copy): a JSON list of API entries
#   Name, Description, Category, Introduction, Documentation (OpenAPI JSON string),
#   NLDocumentation, Function_Description {function name: description incl. parameters},
#   Instructions [str], Instances [{input, output, Final Thought,
#       intermediate_steps: [[[action, action_input (JSON string), log], observation], ...]}]
#   Golden_Answers [[{"Action", "Action_Input"}], ...] (eval files, one list per instruction).
# An instance without intermediate steps is a failed generation ({"error": ...}): excluded.
TOOLALPACA_NAME = "Name"
TOOLALPACA_DESCRIPTION = "Description"
TOOLALPACA_FUNCTIONS = "Function_Description"
TOOLALPACA_NLDOC = "NLDocumentation"
TOOLALPACA_INSTRUCTIONS = "Instructions"
TOOLALPACA_INSTANCES = "Instances"
TOOLALPACA_GOLDEN = "Golden_Answers"
TOOLALPACA_STEPS = "intermediate_steps"
# The study's prompt: one user message, no system prompt (Moenupa/SDPO-CL,
# datasets/tooluse/test.json: no script in its repository builds it; each of its 68 rows is
# this template filled with the API's Name, Description and NLDocumentation, verbatim).
TOOLALPACA_HEADER = (
    "Your task is to answer the user's question using available tools. \n"
    "You have access to the following tools:\n"
)
TOOLALPACA_FORMAT = (
    "\nUse the following format:\n"
    "Thought: you should always think about what to do\n"
    "Action: the action to take, should be one of the tool names.\n"
    "Action Input: the input to the action, must be in JSON format. All of the action input "
    "must be realistic and from the user.\n\n"
    "Begin!\n"
    "Question: "
)
# The study's test set keeps an instance only if its golden answer has no `$`: that drops the
# `${id from searchX}` placeholders (32 of eval_simulated.json's 100 instances).
TOOLALPACA_PLACEHOLDER = "$"
# The study's prepared files (datasets/tooluse/{train,test}.json), JSON lines:
#   prompt (the user message above), description, idx, dataset "tooluse", system null,
#   answer (json.dumps of the golden [{"Action", "Action_Input" (a JSON string)}]), kind, elo.
STUDY_KIND = "kind"
STUDY_PROMPT = "prompt"
STUDY_ANSWER = "answer"
STUDY_INDEX = "idx"
_STUDY_API_NAME = re.compile(r"\nName: (.*)\n")


TOOLALPACA_PROMPT = Prompt(
    TOOLALPACA_HEADER
    + "Name: {name}\nDescription: {description}\nDocumentation:\n{documentation}"
    + TOOLALPACA_FORMAT
    + "{instruction}"
)


def toolalpaca_prompt(api: dict, instruction: str) -> str:
    """The study's user message for one instruction of one API."""
    (user,) = TOOLALPACA_PROMPT.messages(
        name=api[TOOLALPACA_NAME],
        description=api.get(TOOLALPACA_DESCRIPTION, ""),
        documentation=api.get(TOOLALPACA_NLDOC, ""),
        instruction=instruction,
    )
    return user["content"]


# BFCL v4 (github.com/ShishirPatil/gorilla, berkeley-function-call-leaderboard/bfcl_eval/data,
# the file the study names in its docs/DATA.md; the hub repo
# gorilla-llm/Berkeley-Function-Calling-Leaderboard holds v3's files, not v4's). Two JSONL
# files (named .json): BFCL_v4_multiple.json with
#   id "multiple_0", question [[{"role": "user", "content": ...}]] (turns of messages),
#   function [{"name", "description", "parameters": {"type": "dict", "properties", "required"}}]
# and possible_answer/BFCL_v4_multiple.json with
#   id, ground_truth [{function name: {argument: [allowed values]}}] ("" marks optional).
BFCL_FILE = re.compile(r"BFCL_v\d+_multiple\.json$")
BFCL_ANSWER_DIR = "possible_answer"
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


BFCL_PROMPT = Prompt("{question}", BFCL_SYSTEM)


def is_study_file_row(raw: dict) -> bool:
    """A row of the study's prepared files (its prompt format), not a raw API entry."""
    return isinstance(raw.get(STUDY_PROMPT), str) and TOOLALPACA_NAME not in raw


def _toolalpaca_items(dataset: str, source: RawSource, run: LoadRun) -> RawSource:
    """One item per (API, instance) with its reference calls: the study's prepared rows as
    they are; in raw files, failed instances and `$` placeholders excluded (counted)."""
    items: list[dict] = []
    wheres: list[str] = []
    for i, api in source.iter_rows():
        if isinstance(api, BadRawRow):
            run.fail(i, str(api))
            continue
        where = source.where(i)
        if is_study_file_row(api):
            found = _STUDY_API_NAME.search(api[STUDY_PROMPT])
            index = api.get(STUDY_INDEX, i)
            items.append({"study": api, "api_name": found.group(1) if found else "study",
                          "instance_index": index, "api_index": i})  # fmt: skip
            wheres.append(where)
            continue
        try:
            api_name = required_text(api.get(TOOLALPACA_NAME), "API Name")
            instances = api.get(TOOLALPACA_INSTANCES) or []
            instructions = api.get(TOOLALPACA_INSTRUCTIONS) or []
            golden = api.get(TOOLALPACA_GOLDEN) or []
            if not isinstance(instances, list) or not isinstance(golden, list):
                raise BadRawRow("Instances and Golden_Answers must be lists")
        except BadRawRow as err:
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
            if TOOLALPACA_PLACEHOLDER in json.dumps(reference):
                run.excluded["reference calls with a `$` placeholder (the study's rule)"] += 1
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
    return RawSource(dataset, [RawSegment("toolalpaca", "toolalpaca", items, wheres=wheres)])


def _toolalpaca_calls(reference: Any) -> list[dict]:
    calls = []
    for s, step in enumerate(reference):
        if isinstance(step, dict):  # Golden_Answers: {"Action", "Action_Input"}
            action, action_input = step.get("Action"), step.get("Action_Input")
        elif isinstance(step, list | tuple) and step and isinstance(step[0], list | tuple):
            action, action_input = step[0][0], step[0][1] if len(step[0]) > 1 else None
        else:
            raise BadRawRow(f"reference step {s} is neither {{Action, Action_Input}} nor a step")
        action = required_text(action, f"reference step {s} action")
        if action_input is None or (isinstance(action_input, str) and not action_input.strip()):
            arguments: Any = {}
        elif isinstance(action_input, str):
            try:
                arguments = json.loads(action_input)
            except json.JSONDecodeError as err:
                raise BadRawRow(
                    f"reference step {s} Action Input is not JSON ({err.msg})"
                ) from None
        else:
            arguments = action_input
        if not isinstance(arguments, dict):
            raise BadRawRow(f"reference step {s} Action Input must be a JSON object")
        calls.append({"name": action, "arguments": arguments})
    return calls


def _documented_tools(api: dict) -> list[str]:
    """The tool names of an API's Function_Description (its `components` entry is schema
    text, not a tool)."""
    functions = api.get(TOOLALPACA_FUNCTIONS)
    if isinstance(functions, str):
        functions = json_value(functions, TOOLALPACA_FUNCTIONS)
    if not isinstance(functions, dict):
        return []
    return [str(k) for k, v in functions.items() if v is not None and k != "components"]


def _expand_toolalpaca(load: Load, source: RawSource) -> RawSource:
    load.state["arrow"] = bool(source.segments) and source.segments[0].arrow
    return _toolalpaca_items(load.recipe.name, source, load.run)


def _convert_toolalpaca(item: dict, ctx: RowContext, load: Load) -> dict:
    if "study" in item:
        study = item["study"]
        calls = _toolalpaca_calls(json_value(study.get(STUDY_ANSWER), "answer"))
        required_text(study[STUDY_PROMPT], "prompt")
        prompt, tools = study[STUDY_PROMPT], None  # as published, unstripped
        key = f"study-{item['instance_index']}"
    else:
        api = drop_none(item["api"]) if load.state["arrow"] else item["api"]
        required_text(item["instruction"], "instruction (instance input)")
        calls = _toolalpaca_calls(item["reference"])
        # The instruction goes in as published: some carry a leading space.
        prompt = toolalpaca_prompt(api, str(item["instruction"]))
        tools = _documented_tools(api)
        key = f"{slug(item['api_name'])}-{item['instance_index']}"
    meta = {
        "api": item["api_name"],
        "source_index": item["api_index"],
        "instance_index": item["instance_index"],
    }
    if tools is not None:
        meta["tools"] = tools
        # The study keeps references that call a tool the prompt does not show (getDetails).
        meta["undocumented_calls"] = sorted({c["name"] for c in calls} - set(tools))
    answer = json.dumps(calls, ensure_ascii=False, sort_keys=True)
    return canonical_row(load.recipe.name, "tool", key, chat_prompt(None, prompt), answer, meta)


def _toolalpaca(name: str, part: str) -> Recipe:
    """ToolAlpaca as the study uses it: each file is a split (train_data.json for training,
    eval_simulated.json for the test set; ``holdout=0.1`` splits one file instead), in the
    study's prompt; `path` may also be the study's prepared files."""
    return Recipe(
        name, "tool",
        Source(also="ToolAlpaca's data/train_data.json or data/eval_simulated.json (no hub "
               "copy); the study's datasets/tooluse/{train,test}.json"),
        TOOLALPACA_PROMPT, _convert_toolalpaca, holdout=Holdout(part, fraction=None),
        expand=_expand_toolalpaca,
        needs_path=f"{name}: ToolAlpaca has no canonical hub copy; pass path= (the ToolAlpaca "
        "repo's data/train_data.json or data/eval_simulated.json)",
        published=(Published(68, 68, "the study's ToolAlpaca test set (its tooluse/test.json)",
                             rows=68, options={"holdout": None}),) if part == "test" else (),
    )  # fmt: skip


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


def _open_bfcl(load: Load, path: PathSpec) -> RawSource:
    """The questions; their possible answers, read alongside, go to `load.state["truth"]`.

    `path`: gorilla's BFCL data folder (with possible_answer/), or the question file (its
    answers beside it in possible_answer/, or `answer_path`).
    """
    name, hub = load.recipe.name, load.hub
    check_hub_options(name, hub)
    if path is None:
        raise InputError(load.recipe.needs_path)
    if not isinstance(path, str | Path) or not Path(path).expanduser().exists():
        raise FileNotFoundError(f"{name}: {path} does not exist")
    questions_file, answers_file = _bfcl_files(name, Path(path).expanduser(), load["answer_path"])
    questions = open_source(name, [questions_file])
    answers = open_source(name, [answers_file])
    truth = load.state["truth"] = {}
    for i, raw in answers.iter_rows():
        if isinstance(raw, BadRawRow) or raw.get(BFCL_ID) is None:
            problem = str(raw) if isinstance(raw, BadRawRow) else "possible answer without an id"
            raise answers.error(i, problem)
        value = raw.get(BFCL_GROUND_TRUTH)
        truth[str(raw[BFCL_ID])] = drop_none(value) if answers.segments[0].arrow else value
    return questions


def _convert_bfcl(raw: dict, ctx: RowContext, load: Load) -> dict:
    truth = load.state["truth"]
    if ctx.arrow:
        raw = drop_none(raw)
    raw_id = required_text(raw.get(BFCL_ID), "id")
    functions = json_value(raw.get(BFCL_FUNCTION), "function")
    if not isinstance(functions, list) or not functions:
        raise BadRawRow("'function' must be a non-empty list of schemas")
    for f in functions:
        if not isinstance(f, dict) or not f.get("name"):
            raise BadRawRow("every function schema needs a 'name'")
    turns = json_value(raw.get(BFCL_QUESTION), "question")
    if not isinstance(turns, list) or not turns:
        raise BadRawRow("'question' must be a non-empty list of turns")
    if len(turns) != 1:
        raise BadRawRow(f"{len(turns)} turns; the multiple category is single-turn")
    messages = turns[0] if isinstance(turns[0], list) else turns
    listed = json.dumps(functions, ensure_ascii=False, indent=1)
    system = BFCL_PROMPT.system.format(functions=listed)
    prompt = [{"role": "system", "content": system}]
    for m in messages:
        role, content = m.get("role"), required_text(m.get("content"), "message content")
        if role == "system":
            prompt[0]["content"] = f"{content}\n\n{prompt[0]['content']}"
        elif role in ("user", "assistant"):
            prompt.append({"role": role, "content": content})
        else:
            raise BadRawRow(f"unknown message role {role!r}")
    if raw_id not in truth:
        raise BadRawRow(f"no possible answer for id {raw_id!r}")
    expected = truth[raw_id]
    if (
        not isinstance(expected, list)
        or not expected
        or not all(isinstance(e, dict) and len(e) == 1 for e in expected)
    ):
        raise BadRawRow("ground_truth must be a non-empty list of {function: {arg: [values]}}")
    for call in expected:
        ((func, arguments),) = call.items()
        if not isinstance(arguments, dict) or not all(
            isinstance(v, list) for v in arguments.values()
        ):
            raise BadRawRow(f"ground_truth for {func!r} must map each argument to a value list")
    answer = json.dumps(expected, ensure_ascii=False)
    meta = {"functions": functions, "source_id": raw_id, "source_index": ctx.index}
    return canonical_row("bfcl_multiple", "tool", slug(raw_id), prompt, answer, meta)


ENTRIES = (
    Benchmark("toolalpaca_train", "tool", "train", "react_tool",
              _toolalpaca("toolalpaca_train", "train"),
              "ToolAlpaca, train", study_verifier="study_react_tool"),
    Benchmark("toolalpaca_test", "tool", "id", "react_tool",
              _toolalpaca("toolalpaca_test", "test"),
              "ToolAlpaca, held out", study_verifier="study_react_tool"),
    Benchmark("bfcl_multiple", "tool", "ood", "bfcl_ast",
              Recipe("bfcl_multiple", "tool",
                     Source(also="gorilla's bfcl_eval/data folder or its files (no hub copy "
                            "of v4)"),
                     BFCL_PROMPT, _convert_bfcl, open=_open_bfcl,
                     options={"answer_path": None},
                     needs_path="bfcl_multiple: BFCL v4 has no hub copy; pass path= (gorilla's "
                     "berkeley-function-call-leaderboard/bfcl_eval/data folder)",
                     published=(Published(200, 200, "BFCL v4's multiple category", rows=200),)),
              "BFCL v4 'multiple' category, the official AST checker"),
)  # fmt: skip
