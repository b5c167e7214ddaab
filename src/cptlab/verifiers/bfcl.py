"""BFCL's AST checker for the "simple" and "multiple" categories, as the official leaderboard
decides for a prompting model (gorilla, berkeley-function-call-leaderboard @ 6ea5797:
`eval_checker/ast_eval/ast_checker.py` and `model_handler/utils.py`), written from its
behaviour.

Decoding: the whole completion (after a `</think>`, as the Qwen handler cuts it) must be a
Python call list; backticks, newlines and spaces are stripped from its ends and the outer
brackets are optional. Positional arguments are ignored, a bare name is a string, a nested
call with keywords is a dict, one without is its source text, and `2*3` is computed.

Checking: the one call must name the expected function exactly; every required parameter is
present; every argument is in the schema and in the possible answer; types are exact (an int
is accepted for a float, a tuple for a "tuple", "any" means a string); strings compare after
`standardize`, lists in order, dicts key by key; a parameter may be left out only when `""` is
among its possible values.

The synthetic tool domain keeps its lenient rule (`function_call_ast` in `tool.py`), which
reads calls out of prose and accepts JSON calls.
"""

from __future__ import annotations

import ast
import json
import operator
import re
from typing import Any

from cptlab.verifiers.base import Verdict, canonical, correct, malformed, register, wrong

_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "float": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "any": str,
}
_IGNORED_CHARACTERS = re.compile(r"[ ,./\-_*^]")
_OPERATORS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_MAX_OPERAND = 10_000  # of `*` and `**`


class _Undecodable(ValueError):
    """The completion is not a call list the official decoder reads."""


def standardize(text: str) -> str:
    """The checker's string form: no spaces , . / - _ * ^, lower case, ' as "."""
    return _IGNORED_CHARACTERS.sub("", text).lower().replace("'", '"')


# ----- decoding ---------------------------------------------------------------------------------


def decode_calls(completion: str) -> list[tuple[str, dict]]:
    """[(function name, arguments), ...]; raises _Undecodable where the official decoder fails."""
    text = completion.split("</think>")[-1].strip("`\n ")
    if not text.startswith("["):
        text = "[" + text
    if not text.endswith("]"):
        text = text + "]"
    try:
        body = ast.parse(text.strip().strip("'"), mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError) as err:
        raise _Undecodable(f"not a Python call list ({type(err).__name__})") from None
    nodes = [body] if isinstance(body, ast.Call) else getattr(body, "elts", None)
    if nodes is None or not all(isinstance(node, ast.Call) for node in nodes):
        raise _Undecodable("the list holds something other than calls")
    try:
        return [(_call_name(node.func), _keywords(node)) for node in nodes]
    except (MemoryError, RecursionError):
        raise _Undecodable("a call nested too deeply") from None


def _call_name(node: ast.expr) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _keywords(node: ast.Call) -> dict:
    # `**d` has no name: it stays as the key None and fails as an unexpected argument.
    return {kw.arg: _value(kw.value) for kw in node.keywords}


def _value(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.UnaryOp):
        # The official decoder negates the constant whatever the operator (`+5` is -5).
        if not isinstance(node.operand, ast.Constant):
            raise _Undecodable("an operator on something other than a constant")
        try:
            return -node.operand.value
        except TypeError:
            raise _Undecodable("an operator on a non-number") from None
    if isinstance(node, ast.List):
        return [_value(item) for item in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_value(item) for item in node.elts)
    if isinstance(node, ast.Dict):
        if any(key is None for key in node.keys):
            raise _Undecodable("`**` inside a dict")
        try:
            return {_value(k): _value(v) for k, v in zip(node.keys, node.values, strict=True)}
        except TypeError:
            raise _Undecodable("an unhashable dict key") from None
    if isinstance(node, ast.BinOp):
        return _arithmetic(node)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call):
        return {_call_name(node.func): _keywords(node)} if node.keywords else ast.unparse(node)
    if isinstance(node, ast.Subscript):
        return ast.unparse(node)
    raise _Undecodable(f"an argument of kind {type(node).__name__}")


def _arithmetic(node: ast.BinOp) -> Any:
    """`2*3` as 6: the official decoder evaluates it; here only numbers and strings are
    combined, within bounds (no completion may make the verifier build a huge value)."""
    left, right = _value(node.left), _value(node.right)
    apply = _OPERATORS.get(type(node.op))
    if apply is None or not all(isinstance(x, int | float | str) for x in (left, right)):
        raise _Undecodable("arithmetic on something other than numbers and strings")
    numbers = [abs(x) for x in (left, right) if isinstance(x, int | float)]
    if isinstance(node.op, ast.Pow | ast.Mult) and max(numbers, default=0) > _MAX_OPERAND:
        raise _Undecodable("arithmetic out of range")
    try:
        return apply(left, right)
    except (TypeError, ZeroDivisionError, OverflowError, ValueError):
        raise _Undecodable("arithmetic that fails") from None


# ----- checking ---------------------------------------------------------------------------------


def _first_type(values: list) -> type | None:
    return next((type(v) for v in values if v != ""), None)


def _same(value: Any, allowed: Any) -> bool:
    if isinstance(value, str) and isinstance(allowed, str):
        return standardize(value) == standardize(allowed)
    return value == allowed


def _dict_matches(value: Any, alternatives: list) -> bool:
    """Some alternative {key: [allowed]} admits every key of `value`, and every key it lacks
    has "" among its values."""
    if not isinstance(value, dict):
        return False
    for alternative in alternatives:
        if alternative == "" or not isinstance(alternative, dict):
            continue
        if all(
            key in alternative and any(_same(item, a) for a in alternative[key])
            for key, item in value.items()
        ) and all("" in allowed for key, allowed in alternative.items() if key not in value):
            return True
    return False


def _list_matches(value: list, alternatives: list) -> bool:
    """Order matters; only the list's own strings are standardised ("" stands for [])."""

    def top(items: list) -> list:
        return [standardize(x) if isinstance(x, str) else x for x in items]

    lists = [
        [] if alt == "" else top(alt) if isinstance(alt, list) else alt for alt in alternatives
    ]
    return top(value) in lists


def _list_of_dicts_matches(value: list, alternatives: list) -> bool:
    for alternative in alternatives:
        alternative = [] if alternative == "" else alternative
        if (
            isinstance(alternative, list)
            and len(alternative) == len(value)
            and all(
                _dict_matches(item, [expected])
                for item, expected in zip(value, alternative, strict=True)
            )
        ):
            return True
    return False


def _items_typed(value: list, alternatives: list, item_type: type) -> bool:
    """Array items are type-checked one level deep against some list alternative."""
    for alternative in alternatives:
        if not isinstance(alternative, list):
            return True  # "" (optional): the official check lets every item type through
        own = _first_type(alternative)
        if all(type(x) is item_type or type(x) is own for x in value):
            return True
    return False


def check_argument(name: str, value: Any, schema: dict, allowed: list) -> str | None:
    """None if `value` is an admitted value of parameter `name`, else why not."""
    kind = schema.get("type")
    if kind not in _TYPES:
        raise ValueError(f"parameter {name!r} has type {kind!r}, which BFCL does not know")
    expected = _TYPES[kind]
    if kind == "tuple" and isinstance(value, tuple):
        value = list(value)
    if kind == "float" and type(value) is int:
        value = float(value)
    own = _first_type(allowed)
    variable = own is not None and own is not expected
    if type(value) is expected:
        if kind in ("array", "tuple"):
            item_type = _TYPES.get(schema.get("items", {}).get("type"), object)
            if not _items_typed(value, allowed, item_type):
                return f"argument {name!r} has items of the wrong type"
    elif type(value) is own:
        variable = True
    else:
        return f"argument {name!r} has the wrong type"
    if variable or expected not in (dict, list, str):
        admitted = value in allowed
    elif expected is dict:
        admitted = _dict_matches(value, allowed)
    elif expected is list and _TYPES.get(schema.get("items", {}).get("type")) is dict:
        admitted = _list_of_dicts_matches(value, allowed)
    elif expected is list:
        admitted = _list_matches(value, allowed)
    else:
        admitted = standardize(value) in [standardize(a) for a in allowed if isinstance(a, str)]
    return None if admitted else f"argument {name!r} has a wrong value"


def check_bfcl_call(name: str, arguments: dict, possible: dict, schema: dict) -> str | None:
    """None if the call matches the possible answer {function: {parameter: [allowed]}}."""
    ((expected_name, allowed),) = possible.items()
    if name != expected_name:
        return f"wrong function {name[:60]!r}"
    parameters = schema.get("parameters", {})
    properties = parameters.get("properties", {})
    for required in parameters.get("required", []):
        if required not in arguments:
            return f"missing required argument {required!r}"
    for argument in arguments:
        if argument not in properties or argument not in allowed:
            return f"unexpected argument {str(argument)[:40]!r}"
    for argument, value in arguments.items():
        problem = check_argument(argument, value, properties[argument], allowed[argument])
        if problem:
            return problem
    for argument, values in allowed.items():
        if argument not in arguments and "" not in values:
            return f"missing argument {argument!r}"
    return None


@register("bfcl_ast")
def bfcl_ast(completion: str, row: dict) -> Verdict:
    """BFCL's official AST decision. `row["answer"]` is JSON: one possible answer per expected
    call, each {function: {parameter: [allowed values]}}; metadata["functions"] the schemas."""
    try:
        calls = decode_calls(completion)
    except _Undecodable as err:
        return malformed(f"not a BFCL call list: {err}", "Reply with only the function calls.")
    expected = json.loads(row["answer"])
    answer = canonical(calls)
    if len(calls) != len(expected):
        return wrong(f"Expected {len(expected)} call(s), got {len(calls)}.", answer)
    schemas = {f["name"]: f for f in row.get("metadata", {}).get("functions", [])}
    for (name, arguments), possible in zip(calls, expected, strict=True):
        schema = schemas.get(next(iter(possible)))
        if schema is None:
            return malformed("the expected function has no schema in the row")
        problem = check_bfcl_call(name, arguments, possible, schema)
        if problem:
            return wrong(f"Function call rejected: {problem}.", answer)
    return correct(answer=answer)
