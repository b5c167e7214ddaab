"""BFCL's official AST decision (`bfcl_ast`) on constructed cases.

Each expected decision is the official checker's (gorilla @ 6ea5797, ast_checker.py and the
prompting decoder), as read from its code; on the 200 real "multiple" rows, with 9,502 altered
calls built from them, this implementation and the official code gave the same decision on
all 9,502 (docs/rewards.md).
"""

from __future__ import annotations

import json

import pytest

from cptlab.verifiers import score
from cptlab.verifiers.bfcl import decode_calls, standardize

SCHEMA = {
    "name": "geo.weather",
    "parameters": {
        "type": "dict",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer"},
            "coords": {"type": "tuple", "items": {"type": "float"}},
            "ids": {"type": "array", "items": {"type": "integer"}},
            "tags": {"type": "array", "items": {"type": "string"}},
            "budget": {"type": "dict"},
            "rows": {"type": "array", "items": {"type": "dict"}},
            "mode": {"type": "string"},
            "scale": {"type": "float"},
        },
        "required": ["city"],
    },
}
DISTRACTOR = {"name": "geo_weather", "parameters": {"type": "dict", "properties": {}}}


def row(**allowed: list) -> dict:
    answer = [{"geo.weather": {"city": ["Paris"], **allowed}}]
    return {"answer": json.dumps(answer), "metadata": {"functions": [SCHEMA, DISTRACTOR]}}


CASES = [  # (possible values besides city, completion, official decision)
    ({}, "[geo.weather(city='Paris')]", 1),
    ({}, "geo.weather(city='Paris')", 1),  # the outer brackets are optional
    ({}, "```\n[geo.weather(city='Paris')]\n```", 1),
    ({}, "Here you go: [geo.weather(city='Paris')]", 0),  # prose around the calls
    ({}, "```python\n[geo.weather(city='Paris')]\n```", 0),
    ({}, '[{"name": "geo.weather", "arguments": {"city": "Paris"}}]', 0),  # JSON calls
    ({}, "<think>Paris, surely.</think>\n[geo.weather(city='Paris')]", 1),
    ({}, "[geo_weather(city='Paris')]", 0),  # another offered function
    ({}, "[geo.weather(city=Paris)]", 1),  # a bare name is a string
    ({}, "[geo.weather(city='pa-r_i.s')]", 1),  # standardised strings
    ({}, "[geo.weather(city='Paris\\n')]", 0),  # a newline is kept
    ({}, "[geo.weather(city='Paris'), geo.weather(city='Paris')]", 0),  # one call expected
    ({"days": ["", 3]}, "[geo.weather(3, city='Paris')]", 1),  # positionals are ignored
    ({"days": [6]}, "[geo.weather(city='Paris', days=2*3)]", 1),
    ({"days": [5]}, "[geo.weather(city='Paris', days=+5)]", 0),  # any unary operator negates
    ({"days": [3]}, "[geo.weather(city='Paris', days=3.0)]", 0),  # no float for an integer
    ({"scale": [2.0]}, "[geo.weather(city='Paris', scale=2)]", 1),  # an int for a float
    ({"mode": ["transit"]}, "[geo.weather(city='Paris')]", 0),  # optional only with ""
    ({"mode": ["", "transit"]}, "[geo.weather(city='Paris')]", 1),
    ({"coords": [[46.6, 1.9]]}, "[geo.weather(city='Paris', coords=(46.6, 1.9))]", 1),
    ({"ids": [[1, 2]]}, "[geo.weather(city='Paris', ids=[1.0, 2.0])]", 0),  # item types
    ({"ids": [[1, 2]]}, "[geo.weather(city='Paris', ids=[2, 1])]", 0),  # list order
    ({"tags": [["Sea Food", "bar"]]}, "[geo.weather(city='Paris', tags=['seafood', 'BAR'])]", 1),
    ({"tags": ["", ["x"]]}, "[geo.weather(city='Paris', tags=[])]", 1),  # "" stands for []
    ({"budget": [{"min": [300000], "max": ["", 400000]}]},
     "[geo.weather(city='Paris', budget={'min': 300000})]", 1),  # an optional dict key
    ({"budget": [{"min": [300000]}]}, "[geo.weather(city='Paris', budget={'min': 1})]", 0),
    ({"rows": [[{"k": ["Age"]}, {"k": ["job"]}]]},
     "[geo.weather(city='Paris', rows=[{'k': 'age'}, {'k': 'Job'}])]", 1),
    ({}, "[geo.weather(city='Paris', color='red')]", 0),  # not in the schema
    ({}, "[geo.weather(city='Paris', days=3)]", 0),  # in the schema, not in the answer
]  # fmt: skip


@pytest.mark.parametrize(("allowed", "completion", "official"), CASES)
def test_bfcl_ast_decides_as_the_official_checker(
    allowed: dict, completion: str, official: int
) -> None:
    assert score("bfcl_ast", completion, row(**allowed)).reward == official


def test_required_parameter_is_required_even_when_optional_in_the_answer() -> None:
    assert score("bfcl_ast", "[geo.weather()]", row(city=["", "Paris"])).reward == 0


def test_decoding_and_standardize() -> None:
    assert decode_calls("[f(a=g(b=1)), h(c=k(1))]") == [
        ("f", {"a": {"g": {"b": 1}}}),
        ("h", {"c": "k(1)"}),
    ]
    assert standardize("New York, NY") == "newyorkny" and standardize("It's") == 'it"s'
    verdict = score("bfcl_ast", "[f(a=1e9**1e9)]", row())
    assert verdict.reward == 0 and "out of range" in verdict.reason
