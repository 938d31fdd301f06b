"""Helpers for tests that drive the gate through the real litellm against FakeUpstream.

``kwargs`` builds litellm's arguments for the loopback server (``ask_multiply`` for a
``model`` and ``tools`` of the caller's choice), ``run`` takes one request
through the gate (sync or async) and returns the chunks it yielded with the quarantine, if
any; ``released`` lists the tool calls among the chunks. ``call`` does what ``run`` does for
any of the gate's entry points (completion, messages, responses), or plain litellm's, streamed
or not, returning the error of the type(s) it is told to catch;
``tool_calls`` are the chat chunks' tool calls; ``multiply_whole_body`` is a whole chat
answer of one call. ``plain_outcome`` is what plain litellm, no
gate, hands its caller for one recording. The ``upstream`` fixture (a running FakeUpstream)
is in conftest.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

import litellm

from litellm_toolgate import ToolCallQuarantined, ToolGate
from litellm_toolgate.loopback.upstream import FakeUpstream


def kwargs(upstream: FakeUpstream, **extra: Any) -> dict[str, Any]:
    return {
        "model": "cometapi/gpt-4o-mini",
        "messages": [{"role": "user", "content": "go"}],
        "api_base": upstream.base_url,
        "api_key": "sk-test",
        "stream": True,
        "num_retries": 0,
        **extra,
    }


def ask_multiply(
    upstream: FakeUpstream, model: str, tools: list[dict[str, Any]], **extra: Any
) -> dict[str, Any]:
    """litellm's arguments for a chat completion asking ``model`` at the loopback server's root
    (``api_base``) to multiply 7 by 8 with the given ``tools``."""
    return {
        "model": model,
        "messages": [{"role": "user", "content": "What is 7 times 8? Use multiply."}],
        "tools": tools,
        "api_base": upstream.root_url,
        "num_retries": 0,
        **extra,
    }


def multiply_whole_body(arguments: str) -> bytes:
    """A whole chat answer of one ``multiply`` call (``call_1``) with ``arguments`` as sent."""
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "multiply", "arguments": arguments},
    }
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return json.dumps(
        {
            "id": "chatcmpl-whole",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-4o-mini",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
    ).encode()


def run(gate: ToolGate, upstream: FakeUpstream, asynchronous: bool) -> tuple[list[Any], Any]:
    """One streamed request; a quarantine is returned, any other error propagates."""
    return call(gate.completion, gate.acompletion, kwargs(upstream), asynchronous=asynchronous)


E = TypeVar("E", bound=BaseException)


@overload
def call(
    sync: Callable[..., Any],
    asynchronous_call: Callable[..., Awaitable[Any]],
    args: dict[str, Any],
    *,
    asynchronous: bool,
    stream: bool = True,
) -> tuple[list[Any], ToolCallQuarantined | None]: ...


@overload
def call(
    sync: Callable[..., Any],
    asynchronous_call: Callable[..., Awaitable[Any]],
    args: dict[str, Any],
    *,
    asynchronous: bool,
    stream: bool = True,
    catch: type[E] | tuple[type[E], ...],
) -> tuple[list[Any], E | None]: ...


def call(
    sync: Callable[..., Any],
    asynchronous_call: Callable[..., Awaitable[Any]],
    args: dict[str, Any],
    *,
    asynchronous: bool,
    stream: bool = True,
    catch: type[BaseException] | tuple[type[BaseException], ...] = ToolCallQuarantined,
) -> tuple[list[Any], BaseException | None]:
    """One request through an entry point, ``sync`` or its ``asynchronous_call`` (a gate's, or
    plain litellm's): what it handed out (each chunk, event or piece of a stream; a whole
    response) and the error of the type(s) ``catch`` names (a quarantine unless told), if any.
    Any other error propagates."""
    out: list[Any] = []

    async def go() -> None:
        result = await asynchronous_call(**args)
        if stream:
            async for piece in result:
                out.append(piece)
        else:
            out.append(result)

    try:
        if asynchronous:
            asyncio.run(go())
        elif stream:
            out.extend(sync(**args))
        else:
            out.append(sync(**args))
    except catch as exc:
        return out, exc
    return out, None


def released(chunks: list[Any]) -> list[tuple[str, str]]:
    """(name, arguments) of every tool call the chunks hand over."""
    return [
        (tc.function.name, tc.function.arguments)
        for c in chunks
        for ch in c.choices
        for tc in (ch.delta.tool_calls or [])
    ]


def tool_calls(chunks: list[Any]) -> list[Any]:
    """Every tool call the chat chunks hand over, as litellm gives it."""
    return [tc for c in chunks for ch in c.choices for tc in (ch.delta.tool_calls or [])]


PLAIN_OUTCOMES = ("raised", "tool_calls", "other_finish", "no_call")


def plain_outcome(args: dict[str, Any]) -> str:
    """What plain ``litellm.completion(**args, stream=True)``, no gate, hands its caller:
    ``raised``; ``no_call`` (no call, or one whose arguments are not a JSON object); or calls
    that all parse as objects, under ``finish_reason`` ``tool_calls`` or ``other_finish``.
    The last two are a broken recording handed over as finished, parseable calls."""
    calls: dict[int, str] = {}
    finish = None
    try:
        for chunk in litellm.completion(**{**args, "stream": True}):
            for choice in chunk.choices:
                finish = choice.finish_reason or finish
                for tc in choice.delta.tool_calls or []:
                    calls[tc.index] = calls.get(tc.index, "") + (tc.function.arguments or "")
    except Exception:
        return "raised"

    def an_object(text: str) -> bool:
        try:
            return isinstance(json.loads(text), dict)
        except ValueError:
            return False

    if not calls or not all(an_object(a) for a in calls.values()):
        return "no_call"
    return "tool_calls" if finish == "tool_calls" else "other_finish"
