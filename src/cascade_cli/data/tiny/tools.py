"""`tiny:tools`: synthetic tool-use SFT conversations in the paper's chat format (§3.1.2).

Each row lists its tools (OpenAI-style function definitions, rendered into the system prompt inside
`<tools>...</tools>`), a user request, an assistant turn that calls a tool (`<tool_call>{"name": ...,
"arguments": {...}}</tool_call>`), the tool's result as a `tool` turn, and the assistant's final answer. One
row in five needs no tool (the assistant answers directly), so a model also learns when not to call.
Deterministic for (n, seed, split); train and held-out problems come from disjoint pools.
"""

from __future__ import annotations

import random
from typing import Any

from cascade_cli.chat import format_response
from cascade_cli.data.formats import tool_call_text
from cascade_cli.data.tiny.pools import pool_of

NAME = "tools"
CITIES: dict[str, tuple[int, str]] = {
    "Paris": (18, "cloudy"),
    "Oslo": (4, "snow"),
    "Cairo": (31, "sunny"),
    "Lima": (22, "fog"),
    "Tokyo": (15, "rain"),
    "Quito": (12, "windy"),
}


def _function(name: str, description: str, **parameters: str) -> dict[str, Any]:
    """An OpenAI-style function definition; `parameters` maps each (required) argument to its JSON type."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {key: {"type": kind} for key, kind in parameters.items()},
                "required": list(parameters),
            },
        },
    }


TOOLS: list[dict[str, Any]] = [
    _function("add", "Add two integers.", a="integer", b="integer"),
    _function("multiply", "Multiply two integers.", a="integer", b="integer"),
    _function("get_weather", "Current temperature (Celsius) and sky for a city.", city="string"),
]
GREETINGS = ("Hello", "Good morning", "Hi there", "Hey", "Good evening")


def _problem(rng: random.Random) -> tuple[str, list[dict[str, Any]], str]:
    """(key, conversation without final answers' think blocks applied, final answer)."""
    kind = rng.choice(("add", "multiply", "get_weather", "get_weather", "none"))
    if kind == "none":
        greeting, name = rng.choice(GREETINGS), rng.choice(("Ada", "Bo", "Cy", "Di", "Ed", "Flo"))
        return (
            f"none:{greeting}:{name}",
            [{"role": "user", "content": f"{greeting}, I am {name}."}],
            (f"{greeting}, {name}! How can I help?"),
        )
    if kind == "get_weather":
        city = rng.choice(sorted(CITIES))
        temp, sky = CITIES[city]
        ask = rng.choice(
            ("What is the weather in {c}?", "Is it cold in {c} right now?", "Weather for {c}, please.")
        )
        result = f'{{"temp_c": {temp}, "sky": "{sky}"}}'
        return (
            f"weather:{city}:{ask}",
            [
                {"role": "user", "content": ask.format(c=city)},
                {"role": "assistant", "content": tool_call_text("get_weather", {"city": city})},
                {"role": "tool", "content": result},
            ],
            f"It is {temp} C and {sky} in {city}.",
        )
    a, b = rng.randint(2, 99), rng.randint(2, 99)
    value, word = (a + b, "plus") if kind == "add" else (a * b, "times")
    return (
        f"{kind}:{a}:{b}",
        [
            {"role": "user", "content": f"What is {a} {word} {b}? Use a tool."},
            {"role": "assistant", "content": tool_call_text(kind, {"a": a, "b": b})},
            {"role": "tool", "content": str(value)},
        ],
        f"{a} {word} {b} is {value}.",
    )


def _with_mode(messages: list[dict[str, Any]], answer: str, mode: str) -> list[dict[str, Any]]:
    """Thinking rows carry a short think block before each assistant turn; non-thinking rows none."""
    turns = []
    for message in messages:
        if message["role"] == "assistant" and mode == "think":
            message = {**message, "content": format_response(message["content"], "I should call a tool.")}
        turns.append(message)
    thinking = "The tool answered." if len(messages) > 1 else "No tool is needed."
    turns.append(
        {"role": "assistant", "content": format_response(answer, thinking if mode == "think" else None)}
    )
    return turns


def generate(n: int, seed: int = 0, split: str = "train", mode: str | None = None) -> list[dict[str, Any]]:
    """`n` canonical sft rows with `tools` (half thinking, half not, unless `mode` is given)."""
    pool = "heldout" if split == "heldout" else "sft"
    rng = random.Random(f"cascade-tiny:{NAME}:{split}:{seed}")
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    attempts = 0
    while len(rows) < n:
        attempts += 1
        if attempts > 200 * max(n, 1):
            raise ValueError(f"tiny:{NAME}: only {len(rows)} distinct {split} problems (asked for {n})")
        key, messages, answer = _problem(rng)
        if key in seen or pool_of(f"{NAME}:{key}") != pool:
            continue
        seen.add(key)
        row_mode = mode or ("think" if len(rows) % 2 == 0 else "no_think")
        rows.append(
            {
                "id": f"tiny-{NAME}-{split}-{len(rows)}",
                "domain": "sft",
                "messages": _with_mode(messages, answer, row_mode),
                "tools": TOOLS,
                "mode": row_mode,
                "source": f"tiny:{NAME}",
            }
        )
    return rows
