"""An independent reading of Bedrock Converse streams, for the property tests and the fuzz
harness: it shares no code with the gate.

``frames(body)`` reads a whole AWS event-stream body at once (not incrementally, as the gate
does): a list of ``(event type, payload text)``, or the reason the body is refused. It
follows the format as AWS documents it ("Event stream encoding", Amazon Lex V2 developer
guide), written afresh: slice by the prelude's lengths, compare both CRC32s, walk the
headers by their value types.

``judge(events, tools)`` decides from docs/bedrock.md's rules which calls a stream of decoded
events releases (``[(toolUseId, name, arguments)]``), or None when it must be refused: one
``messageStart`` first; blocks keyed by index, a tool block opened by its start and closed by
its stop, text blocks opened by their first delta; ``messageStop`` with every block closed,
then ``metadata``, then nothing; calls only under ``tool_use`` and ``tool_use`` only with
calls; every id unique; each call's arguments (its fragments joined, ``{}`` when there are
none) one JSON object with no duplicate key that its tool's checker accepts.

``judge_body(body, schemas, policy)`` is the two together over a whole body, each tool
checked by its JSON schema and the policy, for the core fuzzer (``tests/fuzz/fuzz_core.py``);
``modelled(events)`` says whether the judge models every event of a body (it refuses the
reasoning and citation deltas the gate reads, which the generator never writes).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Mapping
from typing import Any

from jsonschema import Draft202012Validator

Checker = Callable[[Any], bool]
Frames = list[tuple[str, str]]
_SIZES = {0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16}


def _u32(data: bytes, at: int) -> int:
    return int.from_bytes(data[at : at + 4], "big")


def frames(body: bytes, limit: int = 1 << 20) -> Frames | str:
    """The body's event frames, or the reason it is refused (see the module docstring)."""
    out: Frames = []
    at = 0
    while at < len(body):
        if len(body) - at < 12:
            return "malformed_event"
        total, headers_len, prelude_crc = _u32(body, at), _u32(body, at + 4), _u32(body, at + 8)
        if zlib.crc32(body[at : at + 8]) != prelude_crc:
            return "malformed_event"
        if total < 16 or headers_len + 16 > total:
            return "malformed_event"
        if total > limit:
            return "event_too_large"
        if len(body) - at < total:
            return "malformed_event"
        frame = body[at : at + total]
        at += total
        if zlib.crc32(frame[:-4]) != _u32(frame, total - 4):
            return "malformed_event"
        headers = _headers(frame[12 : 12 + headers_len])
        if headers is None:
            return "malformed_event"
        kind = headers.get(":message-type")
        if kind in ("exception", "error"):
            return "error_event"
        name = headers.get(":event-type")
        if (
            kind != "event"
            or not name
            or headers.get(":content-type", "application/json") != ("application/json")
        ):
            return "malformed_event"
        try:
            out.append((name, frame[12 + headers_len : -4].decode("utf-8")))
        except UnicodeDecodeError:
            return "invalid_utf8"
    return out


def _headers(section: bytes) -> dict[str, str] | None:
    found: dict[str, object] = {}
    at = 0
    while at < len(section):
        size = section[at]
        name_bytes = section[at + 1 : at + 1 + size]
        at += 1 + size
        if size == 0 or len(name_bytes) != size or at >= len(section):
            return None
        try:
            name = name_bytes.decode("utf-8")
        except UnicodeDecodeError:
            return None
        kind = section[at]
        at += 1
        value: object
        if kind in _SIZES:
            value = section[at : at + _SIZES[kind]]
            if len(value) != _SIZES[kind]:
                return None
            at += _SIZES[kind]
        elif kind in (6, 7):
            if at + 2 > len(section):
                return None
            length = int.from_bytes(section[at : at + 2], "big")
            raw = section[at + 2 : at + 2 + length]
            if len(raw) != length:
                return None
            at += 2 + length
            if kind == 7:
                try:
                    value = raw.decode("utf-8")
                except UnicodeDecodeError:
                    return None
            else:
                value = raw
        else:
            return None
        if name in found:
            return None
        found[name] = (kind, value)
    typed: dict[str, str] = {}
    for name in (":message-type", ":event-type", ":content-type"):
        if name in found:
            kind, value = found[name]  # type: ignore[misc]
            if kind != 7:
                return None
            typed[name] = str(value)
    return typed


def _strict_object(text: str) -> dict[str, Any] | None:
    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [k for k, _ in items]
        if len(set(keys)) != len(keys):
            raise ValueError("duplicate")
        return dict(items)

    def no_constant(name: str) -> Any:
        raise ValueError(name)

    try:
        value = json.loads(text, object_pairs_hook=pairs, parse_constant=no_constant)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def judge(events: Frames, tools: Mapping[str, Checker]) -> list[tuple[str, str, str]] | None:
    """The calls released, or None for a refused stream (see the module docstring)."""
    try:
        objs = [(name, json.loads(data)) for name, data in events]
    except ValueError:
        return None
    if not objs or objs[0] != ("messageStart", objs[0][1]) or objs[0][1].get("role") != "assistant":
        return None
    blocks: dict[int, str] = {}  # index -> "tool" | "text"
    closed: set[int] = set()
    calls: dict[int, list[str]] = {}
    identity: dict[int, tuple[str, str]] = {}
    stop: str | None = None
    ended = False
    for name, obj in objs[1:]:
        if not isinstance(obj, dict) or ended:
            return None
        if name == "metadata":
            if stop is None:
                return None
            ended = True
            continue
        if name == "messageStop":
            if stop is not None or set(blocks) != closed:
                return None
            stop = obj.get("stopReason")
            if not isinstance(stop, str) or not stop:
                return None
            continue
        if stop is not None:
            return None
        index = obj.get("contentBlockIndex")
        if type(index) is not int or index < 0:
            return None
        if name == "contentBlockStart":
            start = obj.get("start")
            use = start.get("toolUse") if isinstance(start, dict) and len(start) == 1 else None
            if index in blocks or not isinstance(use, dict) or use.get("type") is not None:
                return None
            tool_id, tool = use.get("toolUseId"), use.get("name")
            if not isinstance(tool_id, str) or not tool_id or not isinstance(tool, str) or not tool:
                return None
            if tool_id in {i for i, _ in identity.values()}:
                return None
            blocks[index] = "tool"
            identity[index] = (tool_id, tool)
            calls[index] = []
        elif name == "contentBlockDelta":
            delta = obj.get("delta")
            if not isinstance(delta, dict) or len(delta) != 1 or index in closed:
                return None
            if "toolUse" in delta:
                fragment = (
                    delta["toolUse"].get("input") if isinstance(delta["toolUse"], dict) else None
                )
                if blocks.get(index) != "tool" or not isinstance(fragment, str):
                    return None
                calls[index].append(fragment)
            elif "text" in delta:
                if blocks.setdefault(index, "text") != "text" or not isinstance(delta["text"], str):
                    return None
            else:
                return None  # the generator writes no other delta
        elif name == "contentBlockStop":
            if index not in blocks or index in closed:
                return None
            closed.add(index)
        else:
            return None  # the generator writes no other event
    if not ended or (stop == "tool_use") != bool(calls):
        return None
    released = []
    for index in sorted(calls):
        tool_id, tool = identity[index]
        text = "".join(calls[index]) or "{}"
        value = _strict_object(text)
        checker = tools.get(tool)
        if value is None or checker is None or not checker(value):
            return None
        released.append((tool_id, tool, text))
    return released


EVENTS = frozenset(
    {
        "messageStart",
        "contentBlockStart",
        "contentBlockDelta",
        "contentBlockStop",
        "messageStop",
        "metadata",
    }
)
"""The events :func:`judge` models (the generator of ``test_core_bedrock_properties.py``
writes no other)."""


def modelled(events: Frames) -> bool:
    """Whether :func:`judge` models every event of these: known event names, and deltas of
    text or tool input only (the gate also reads reasoning and citation deltas, which the
    judge refuses). Payloads that are not JSON objects are modelled: both refuse them."""
    for name, data in events:
        if name not in EVENTS:
            return False
        if name != "contentBlockDelta":
            continue
        try:
            obj = json.loads(data)
        except ValueError:
            continue
        delta = obj.get("delta") if isinstance(obj, dict) else None
        if isinstance(delta, dict) and len(delta) == 1 and not {"text", "toolUse"} & set(delta):
            return False
    return True


def judge_body(
    body: bytes,
    schemas: Mapping[str, Mapping[str, Any]],
    policy: Callable[[str, dict[str, Any]], bool] = lambda name, value: True,
) -> list[tuple[str, str, str]] | None:
    """:func:`judge` of a whole body, each tool checked by its JSON schema and the policy: the
    calls released (``[(toolUseId, name, arguments)]``), or None for a refused body. Every
    payload must be a JSON object. Only meaningful where :func:`modelled` says so."""
    events = frames(body)
    if isinstance(events, str):
        return None
    for _name, data in events:
        try:
            if not isinstance(json.loads(data), dict):
                return None
        except (ValueError, RecursionError):
            return None
    tools: dict[str, Checker] = {
        name: (
            lambda value, schema=schema, name=name: (
                Draft202012Validator(schema).is_valid(value) and policy(name, value)
            )
        )
        for name, schema in schemas.items()
    }
    return judge(events, tools)
