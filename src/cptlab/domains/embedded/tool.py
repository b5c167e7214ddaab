"""Synthetic tool use.

id form (ToolAlpaca-like): a list of available tools and a request; the answer is a ReAct
trace (Thought / Action / Action Input JSON), scored on action names and merged inputs.
ood form (BFCL-like): JSON function schemas and a request; the answer is one JSON call,
scored AST-style (function name, required arguments, types, allowed values).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from cptlab.domains.embedded.common import Item, number_word, register_domain

CITIES = ("Lima", "Oslo", "Cairo", "Quito", "Perth", "Kyiv", "Hanoi", "Dakar", "Riga", "Bern")
CURRENCIES = ("USD", "EUR", "GBP", "JPY", "CHF", "INR")
LANGUAGES = ("French", "German", "Spanish", "Italian", "Dutch")
WORDS = ("hello", "thanks", "water", "friend", "bread", "night", "green")
SYMBOLS = ("ACME", "GLOB", "ZENT", "NOVA", "QUIX")
ARTISTS = ("Adele", "Queen", "Bjork", "Prince", "Shakira")


@dataclass(frozen=True)
class Tool:
    name: str
    params: dict[str, str]  # argument -> JSON type
    description: str
    requests: tuple[str, ...]  # templates over the argument names

    def sample_arguments(self, rng: random.Random) -> dict:
        values = {
            "city": lambda: rng.choice(CITIES),
            "origin": lambda: rng.choice(CITIES),
            "destination": lambda: rng.choice(CITIES),
            "amount": lambda: rng.randint(2, 12),
            "source": lambda: rng.choice(CURRENCIES),
            "target": lambda: rng.choice(CURRENCIES),
            "text": lambda: rng.choice(WORDS),
            "language": lambda: rng.choice(LANGUAGES),
            "symbol": lambda: rng.choice(SYMBOLS),
            "artist": lambda: rng.choice(ARTISTS),
            "hour": lambda: rng.randint(5, 11),
        }
        while True:
            arguments = {p: values[p]() for p in self.params}
            if len(set(map(str, arguments.values()))) == len(arguments):
                return arguments

    def schema(self) -> dict:
        return {
            "name": self.name,
            "description": self.description,
            "parameters": {
                "type": "object",
                "properties": {p: {"type": t} for p, t in self.params.items()},
                "required": list(self.params),
            },
        }


THOUGHTS = ("use {tool}.", "I should call {tool}.", "{tool} fits the request.")

TOOLS = (
    Tool(
        "get_weather",
        {"city": "string"},
        "current weather of a city",
        ("What is the weather in {city}?", "Is it raining in {city} now?"),
    ),
    Tool(
        "convert_currency",
        {"amount": "integer", "source": "string", "target": "string"},
        "convert money",
        ("Convert {amount} {source} to {target}.", "How much is {amount} {source} in {target}?"),
    ),
    Tool(
        "search_flights",
        {"origin": "string", "destination": "string"},
        "find flights",
        (
            "Find flights from {origin} to {destination}.",
            "I need to fly to {destination} from {origin}.",
        ),
    ),
    Tool(
        "translate",
        {"text": "string", "language": "string"},
        "translate a word",
        ("Translate '{text}' into {language}.", "How do you say '{text}' in {language}?"),
    ),
    Tool(
        "get_stock_price",
        {"symbol": "string"},
        "latest stock price",
        ("What is the price of {symbol} stock?", "How is {symbol} trading today?"),
    ),
    Tool(
        "play_music",
        {"artist": "string"},
        "play songs by an artist",
        ("Play some songs by {artist}.", "I want to hear {artist}."),
    ),
    Tool(
        "set_alarm",
        {"hour": "integer"},
        "set an alarm for an hour of the morning",
        ("Wake me up at {hour} am.", "Set an alarm for {hour} in the morning."),
    ),
)


def make_item(rng: random.Random, form: str) -> Item:
    offered = rng.sample(TOOLS, 3)
    tool = offered[0]
    rng.shuffle(offered)
    arguments = tool.sample_arguments(rng)
    spelled = {k: number_word(v) if isinstance(v, int) else v for k, v in arguments.items()}
    template = rng.choice(tool.requests)
    request = template.format(**spelled)
    key = f"{request}/{','.join(t.name for t in offered)}"
    if form == "id":
        listed = "; ".join(f"{t.name}({', '.join(t.params)})" for t in offered)
        action_input = json.dumps(arguments)
        return Item(
            key=key,
            user=(f"Tools: {listed}\nRequest: {request}\nAnswer in ReAct format."),
            answer=json.dumps([{"name": tool.name, "arguments": arguments}]),
            solution=(
                f"Thought: {rng.choice(THOUGHTS).format(tool=tool.name)}\nAction: {tool.name}\n"
                f"Action Input: {action_input}"
            ),
            metadata={
                "off_format": json.dumps({"name": tool.name, "arguments": arguments}),
                "off_format_cue": tool.requests.index(template) == 1,  # the second phrasing
            },
        )
    schemas = [t.schema() for t in offered]
    compact = "\n".join(json.dumps({"name": t.name, "parameters": t.params}) for t in offered)
    return Item(
        key=key,
        user=(
            f"Functions:\n{compact}\nUser: {request}\n"
            'Reply with one JSON call {"name": ..., "arguments": {...}}.'
        ),
        answer=json.dumps([{tool.name: {k: [v] for k, v in arguments.items()}}]),
        solution=rng.choice(("", "Call: "))
        + json.dumps({"name": tool.name, "arguments": arguments}),
        metadata={"functions": schemas},
    )


register_domain(
    "tool",
    make_item,
    verifiers={"id": "react_tool", "ood": "function_call_ast"},
    reasoning=r"Thought:[^\n]*\n?",  # ReAct's thought line before the action
    descriptions={
        "id": "ReAct tool call among 3 offered tools (ToolAlpaca-like)",
        "ood": "one JSON function call among 3 schemas, AST match (BFCL-like)",
    },
)
