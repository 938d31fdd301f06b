"""The probe's fixed set of tool-calling requests, and the tools they offer.

Each request asks for one shape of answer a route must stream in its own way: one call, two
parallel calls, a call of a tool without arguments, text then a call, a call with a 16 KB
argument, and a call with non-ASCII argument text. The same prompts let the loopback fake
upstream (:mod:`litellm_toolgate.demo.personalities`) tell which answer is asked for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "LARGE_CONTENT",
    "NON_ASCII_CONTENT",
    "PROBE_REQUESTS",
    "PROBE_TOOLS",
    "ProbeRequest",
    "by_prompt",
]


def _function(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


PROBE_TOOLS: list[dict[str, Any]] = [
    _function(
        "multiply",
        "Multiply two numbers and return the product.",
        {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
            "additionalProperties": False,
        },
    ),
    _function(
        "write_file",
        "Write text content to a file at the given path.",
        {
            "type": "object",
            "properties": {
                "path": {"type": "string", "maxLength": 4096},
                "content": {"type": "string"},
            },
            "required": ["path", "content"],
            "additionalProperties": False,
        },
    ),
    _function(
        "get_time",
        "The current time; takes no arguments.",
        {"type": "object", "properties": {}, "additionalProperties": False},
    ),
]

# 16 KiB of plain lines the model is asked to copy into one argument.
LARGE_CONTENT = "".join(f"line {n:05d} of the probe's sixteen KiB argument.\n" for n in range(328))[
    : 16 * 1024
]
NON_ASCII_CONTENT = "Grüße, naïve café ✓ 日本語 🎉"


@dataclass(frozen=True)
class ProbeRequest:
    """One request of the probe: ``name`` names its row in the table."""

    name: str
    prompt: str
    tool_choice: Any = "auto"
    expect_calls: int = 1

    def messages(self) -> list[dict[str, Any]]:
        return [{"role": "user", "content": self.prompt}]


PROBE_REQUESTS: tuple[ProbeRequest, ...] = (
    ProbeRequest(
        "one_call",
        "Call the multiply tool with a=7 and b=8. Do not answer in text.",
        {"type": "function", "function": {"name": "multiply"}},
    ),
    ProbeRequest(
        "parallel_calls",
        "Call the multiply tool twice in parallel, in one turn: a=7, b=8 and a=6, b=9.",
        expect_calls=2,
    ),
    ProbeRequest("no_arguments", "Call the get_time tool (it takes no arguments)."),
    ProbeRequest(
        "text_then_call",
        "First say in one short sentence what you will do, then call multiply with a=7, b=8.",
    ),
    ProbeRequest(
        "large_argument",
        "Call write_file with path probe/large.txt and, as content, exactly the text between "
        "the markers, unchanged.\n<<<\n" + LARGE_CONTENT + ">>>",
    ),
    ProbeRequest(
        "non_ascii",
        "Call write_file with path probe/unicode.txt and content exactly: " + NON_ASCII_CONTENT,
    ),
)


def by_prompt(prompt: str) -> ProbeRequest | None:
    """The probe request with this prompt, if it is one."""
    for request in PROBE_REQUESTS:
        if request.prompt == prompt:
            return request
    return None
