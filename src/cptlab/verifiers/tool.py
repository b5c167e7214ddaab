"""Tool calls: ReAct traces scored like ToolAlpaca, and single function calls scored like
BFCL's AST checker (name, required arguments, types, allowed values)."""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

from cptlab.verifiers.base import Verdict, canonical, correct, malformed, register, wrong

# `[^\S\n]` is whitespace other than a newline: with `\s` after `^` the MULTILINE patterns
# backtrack quadratically over long runs of blank lines.
_ACTION = re.compile(r"^[^\S\n]*Action[^\S\n]*:(.*)$", re.MULTILINE)
_INPUT = re.compile(r"^[^\S\n]*Action Input[^\S\n]*:", re.MULTILINE)


def parse_react_calls(text: str) -> list[tuple[str, Any]]:
    """[(action name, parsed JSON input), ...] in order. Raises ValueError on a malformed input.

    Each `Action:` line must be followed by an `Action Input:` whose value is one JSON object
    (it may span lines). Text after a `Final Answer:` is ignored.
    """
    text = text.split("Final Answer:")[0]
    calls = []
    actions = list(_ACTION.finditer(text))
    for i, action in enumerate(actions):
        end = actions[i + 1].start() if i + 1 < len(actions) else len(text)
        segment = text[action.end() : end]
        found = _INPUT.search(segment)
        name = action.group(1).strip()
        if not found:
            raise ValueError(f"Action {name[:40]!r} has no 'Action Input:'")
        raw = segment[found.end() :].strip()
        try:
            value, _ = json.JSONDecoder().raw_decode(raw)
        except json.JSONDecodeError as err:
            raise ValueError(f"Action Input is not JSON ({err.msg})") from err
        except RecursionError as err:
            raise ValueError("Action Input is nested too deeply") from err
        if not isinstance(value, dict):
            raise ValueError("Action Input must be a JSON object")
        calls.append((name, value))
    return calls


def merge_inputs(calls: list[tuple[str, Any]]) -> dict:
    merged: dict = {}
    for _, arguments in calls:
        merged.update(arguments)
    return merged


@register("react_tool")
def react_tool(completion: str, row: dict) -> Verdict:
    """ToolAlpaca rule: reward 1 iff the multiset of action names equals the reference and the
    merged JSON inputs are equal. `row["answer"]` is JSON: [{"name": ..., "arguments": {...}}]."""
    try:
        calls = parse_react_calls(completion)
    except ValueError as err:
        return malformed(f"malformed ReAct: {err}", f"Malformed tool call: {err}.")
    if not calls:
        return malformed("no 'Action:' line", "No tool call (Action / Action Input) was found.")
    reference = [(c["name"], c["arguments"]) for c in json.loads(row["answer"])]
    # what the rule compares: the multiset of names and the merged inputs
    answer = canonical({"actions": sorted(n for n, _ in calls), "inputs": merge_inputs(calls)})
    if Counter(n for n, _ in calls) != Counter(n for n, _ in reference):
        names = ", ".join(n for n, _ in calls)[:100]
        return wrong(f"Wrong tool(s): {names}.", answer)
    if merge_inputs(calls) != merge_inputs(reference):
        return wrong("Right tool, wrong arguments.", answer)
    return correct(answer=answer)


# ----- BFCL-style function calls ------------------------------------------------------------

_JSON_TYPES = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "float": (int, float),
    "boolean": bool,
    "array": list,
    "dict": dict,
    "object": dict,
}


def parse_function_calls(text: str) -> list[tuple[str, dict]]:
    """Function calls in the completion: the last Python-syntax call list `[f(a=1), g(b="x")]`
    (BFCL's prompt format), else the last JSON {"name", "arguments"} object or list of them.

    Python syntax goes first because its arguments may hold JSON-like dicts with a "name" key
    (`[f(user={"name": "Bob"})]`), which the JSON scan would take for a call.
    """
    calls = _python_calls(text)
    if calls:
        return calls
    items = _last_json_calls(text)
    if items is None:
        return []
    calls = []
    for v in items:
        arguments = v.get("arguments", v.get("parameters", {}))
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except RecursionError as err:
                raise ValueError("'arguments' nested too deeply") from err
        if not isinstance(arguments, dict):
            raise ValueError("'arguments' must be an object")
        calls.append((str(v["name"]), arguments))
    return calls


def _is_call_list(value: Any) -> bool:
    items = value if isinstance(value, list) else [value]
    return bool(items) and all(isinstance(v, dict) and "name" in v for v in items)


def _calls_within(value: Any) -> list | None:
    """The last (outermost) call or call list inside a decoded JSON value, as a list."""
    stack = [value]
    while stack:  # depth-first, last child first, so the first hit is the last in the text
        node = stack.pop()
        if _is_call_list(node):
            return node if isinstance(node, list) else [node]
        children = (
            node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        )
        stack.extend(children)
    return None


def _last_json_calls(text: str) -> list | None:
    """The last call (list) among the JSON values in the text, taking each top-level value
    whole, so that a list of calls is not mistaken for its last element."""
    found = None
    for value in json_values(text):
        inner = _calls_within(value)
        found = found if inner is None else inner
    return found


# Where a JSON object or array may start: `{` before a key or `}`, `[` before a value or `]`.
_JSON_START = re.compile(r"\{\s*[\"}]|\[\s*[-0-9\"\[{\]tfnNI]")


def json_values(text: str, openers: str = "[{") -> Iterator[Any]:
    """Every top-level JSON object/array in the text, left to right (one decoded at each
    opening bracket that is not inside a value already decoded).

    Raises ValueError when a value is nested too deeply to decode, or when the text makes the
    scan read it many times over (deeply nested unclosed values: each one fails only at the end
    of the text), so that no completion can make a verifier quadratic.
    """
    decoder, pos = json.JSONDecoder(), 0
    budget = 8 * len(text) + 100_000  # characters the decoder may read, all attempts together
    while (match := _JSON_START.search(text, pos)) is not None:
        start = match.start()
        if text[start] not in openers:
            pos = start + 1
            continue
        decoded, cost = _decode_at(decoder, text, start)
        budget -= cost
        if budget < 0:
            raise ValueError("too many JSON fragments to scan")
        if decoded is None:
            pos = start + 1
            continue
        value, pos = decoded
        yield value


def _decode_at(decoder: json.JSONDecoder, text: str, start: int) -> tuple[Any, int]:
    """((value, end) or None, characters read) for the JSON value starting at text[start].

    Decoding in a growing window keeps a failure's cost proportional to where it fails: a
    JSONDecodeError on the full text counts the lines before it, and copying the rest of the
    text for each attempt is quadratic too.
    """
    size, cost = 1024, 0
    while True:
        window = text[start : start + size]
        try:
            value, end = decoder.raw_decode(window)
            return (value, start + end), cost + end
        except json.JSONDecodeError as err:
            # A failure well inside the window is final; one at its end (or an unterminated
            # string) may only be the cut, so look again with more text.
            if start + size >= len(text) or (
                err.pos < len(window) - 64 and not err.msg.startswith("Unterminated string")
            ):
                return None, cost + err.pos + 1
            cost += len(window)
        except RecursionError as err:
            raise ValueError("JSON nested too deeply") from err
        size *= 4


# At most this many `[` (from the end) are tried as the start of a Python call list.
_MAX_LIST_STARTS = 32


def _python_calls(text: str) -> list[tuple[str, dict]]:
    # The whole text may be the call list or a bare call `f(a=1)`; else a call list runs from
    # one of the last `[` to the last `]` (prose may surround it, and array arguments put more
    # `[` inside it). The candidates parsed are capped to a few times the text's length.
    end, candidates = text.rfind("]") + 1, [text.strip()]
    start, budget = end, 4 * len(text) + 10_000
    while len(candidates) <= _MAX_LIST_STARTS and (start := text.rfind("[", 0, start)) >= 0:
        budget -= end - start
        if budget < 0:
            break
        candidates.append(text[start:end])
    for candidate in candidates:
        try:
            tree = ast.parse(candidate.strip(), mode="eval")
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            continue
        nodes = tree.body.elts if isinstance(tree.body, ast.List) else [tree.body]
        if not all(isinstance(n, ast.Call) for n in nodes):
            continue
        calls = []
        for node in nodes:
            if node.args:
                raise ValueError("positional arguments are not allowed")
            if any(kw.arg is None for kw in node.keywords):
                raise ValueError("**kwargs are not allowed")
            try:
                name = ast.unparse(node.func)
                arguments = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords}
            except (MemoryError, RecursionError) as err:
                raise ValueError("call nested too deeply") from err
            except TypeError as err:  # literal_eval of `{[1]: 2}`: an unhashable key
                raise ValueError(f"unreadable argument ({err})") from err
            calls.append((name, arguments))
        return calls
    return []


def _type_ok(value: Any, expected: str | None) -> bool:
    if expected is None or expected not in _JSON_TYPES:
        return True
    if isinstance(value, bool) and expected not in ("boolean",):
        return False
    return isinstance(value, _JSON_TYPES[expected])


def check_call(name: str, arguments: dict, possible: dict, schema: dict | None) -> str | None:
    """None if the call matches one possible answer {name: {arg: [allowed values]}}, else why.

    An allowed-values list containing "" marks an optional argument.
    """
    if name not in possible:
        return f"wrong function {name[:60]!r}"
    allowed = possible[name]
    properties = (schema or {}).get("parameters", {}).get("properties", {})
    required = (schema or {}).get("parameters", {}).get("required", [])
    for arg in arguments:
        if arg not in allowed:
            return f"unexpected argument {arg[:40]!r}"
    for arg, values in allowed.items():
        if arg not in arguments:
            if "" in values or (schema is not None and arg not in required):
                continue
            return f"missing argument {arg!r}"
        value = arguments[arg]
        if not _type_ok(value, properties.get(arg, {}).get("type")):
            return f"argument {arg!r} has the wrong type"
        normalized = value.strip().lower() if isinstance(value, str) else value
        options = [v.strip().lower() if isinstance(v, str) else v for v in values]
        if normalized not in options:
            return f"argument {arg!r} has a wrong value"
    return None


@register("function_call_ast")
def function_call_ast(completion: str, row: dict) -> Verdict:
    """BFCL AST rule. `row["answer"]` is JSON: a list of possible answers, one per expected call,
    each {function name: {argument: [allowed values]}}; metadata["functions"] holds the schemas."""
    try:
        calls = parse_function_calls(completion)
    except (ValueError, SyntaxError) as err:
        return malformed(f"malformed function call: {err}", "Malformed function call.")
    if not calls:
        return malformed("no function call found", "No function call was found.")
    expected = json.loads(row["answer"])
    answer = canonical(calls)
    if len(calls) != len(expected):
        return wrong(f"Expected {len(expected)} call(s), got {len(calls)}.", answer)
    schemas = {f["name"]: f for f in row.get("metadata", {}).get("functions", [])}
    for (name, arguments), possible in zip(calls, expected, strict=True):
        problem = check_call(name, arguments, possible, schemas.get(name))
        if problem:
            return wrong(f"Function call rejected: {problem}.", answer)
    return correct(answer=answer)
