"""An independent reference for Ollama's ``/api/chat`` stream: its lines, and what the gate
may release from a whole body.

Written from the rules in the docstrings of ``litellm_toolgate/core/framing/ndjson.py`` and
``litellm_toolgate/core/wires/ollama.py`` and from ``docs/ollama.md``, sharing no code with
the gate: it reuses only :mod:`oracle`'s strict JSON parser, and checks schemas with
jsonschema directly. It reads the whole body at once, never incrementally.

:func:`lines` cuts a whole body into its lines, or names the reason it is refused:

* lines end at LF, one CR before the LF is dropped, empty lines are skipped;
* a line longer than the limit (its CR not counted) is ``event_too_large``; a line that is
  not UTF-8 is ``invalid_utf8``; the first fault in the body wins;
* bytes after the last LF are a cut line: ``event_too_large`` if they are over the limit
  (a last CR not counted), else ``malformed_event``.

:func:`judge` answers for one body: the calls that must be released, in arrival order, as
``(position, id, name, arguments, value)``, or ``None`` for a quarantine. The rules:

* every line is a JSON object (read with duplicate keys refused when its ``message`` holds a
  non-empty ``tool_calls``); one with an ``error`` member is refused;
* ``done`` is a boolean and ``message`` an object; ``message.content`` and
  ``message.thinking``, when not null, are strings; ``message.tool_calls``, when not null,
  is a list of calls;
* a call is an object whose ``function`` is an object; ``function.index``, when not null,
  is a non-negative integer (not a boolean); ``function.name`` is a non-empty string;
  ``function.arguments`` is an object; the call's ``id``, when not null, is a non-empty
  string; either every call of the body has an id, all different, or none has (then the
  n-th call is ``ollama-call-<n>``);
* the line with ``done: true`` needs a non-empty string ``done_reason`` and is the last
  line: anything after it is refused, and so is a body without one;
* calls are released only under ``done_reason: "stop"``; at most 64 calls;
* a call's arguments are its ``arguments`` object serialized again (``json.dumps``,
  non-ASCII kept), one strict JSON object, valid against its tool's schema, approved by
  the policy.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from jsonschema import Draft202012Validator
from oracle import Reject, Released, strict_object

MAX_CALLS = 64
LIMIT = 1 << 20
PREFIX = "ollama-call-"


def lines(body: bytes, limit: int = LIMIT) -> list[str] | str:
    """The body's non-empty lines as text, or the reason it is refused."""
    *complete, tail = body.split(b"\n")
    out: list[str] = []
    for raw in complete:
        line = raw[:-1] if raw.endswith(b"\r") else raw
        if len(line) > limit:
            return "event_too_large"
        if not line:
            continue
        try:
            out.append(line.decode("utf-8"))
        except UnicodeDecodeError:
            return "invalid_utf8"
    if tail:
        size = len(tail) - (1 if tail.endswith(b"\r") else 0)
        return "event_too_large" if size > limit else "malformed_event"
    return out


def judge(
    body: bytes,
    schemas: Mapping[str, Mapping[str, Any]],
    policy: Callable[[str, dict[str, Any]], bool] = lambda name, value: True,
) -> list[Released] | None:
    """The calls the gate must release for this Ollama body, or None for a quarantine."""
    try:
        return _run(body, schemas, policy)
    except Reject:
        return None


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise Reject("duplicate key")
    return out


def _load(data: str) -> dict[str, Any]:
    try:
        obj = json.loads(data)
        if not isinstance(obj, dict):
            raise Reject("not an object")
        message = obj.get("message")
        if isinstance(message, dict) and message.get("tool_calls"):
            obj = json.loads(data, object_pairs_hook=_no_duplicates)
    except (ValueError, RecursionError):
        raise Reject("not JSON") from None
    return obj


def _run(
    body: bytes,
    schemas: Mapping[str, Mapping[str, Any]],
    policy: Callable[[str, dict[str, Any]], bool],
) -> list[Released]:
    decoded = lines(body)
    if isinstance(decoded, str):
        raise Reject(decoded)
    finish: str | None = None
    calls: list[tuple[str | None, str, dict[str, Any]]] = []
    for data in decoded:
        if finish is not None:
            raise Reject("a line after the done line")
        obj = _load(data)
        if "error" in obj:
            raise Reject("error")
        done, message = obj.get("done"), obj.get("message")
        if not isinstance(done, bool) or not isinstance(message, dict):
            raise Reject("not a chat line")
        for key in ("thinking", "content"):
            if message.get(key) is not None and not isinstance(message[key], str):
                raise Reject("text")
        found = message.get("tool_calls")
        if found is not None:
            if not isinstance(found, list):
                raise Reject("tool_calls")
            calls += [_call(call) for call in found]
        if done:
            reason = obj.get("done_reason")
            if not isinstance(reason, str) or not reason:
                raise Reject("done without a reason")
            finish = reason
    if finish is None:
        raise Reject("no done line")
    if calls and finish != "stop":
        raise Reject("calls not under stop")
    ids = [c[0] for c in calls]
    if any(i is None for i in ids) and any(i is not None for i in ids):
        raise Reject("mixed identity")
    if len(set(ids)) != len(ids) and ids[0] is not None:
        raise Reject("id reused")
    if len(calls) > MAX_CALLS:
        raise Reject("too many calls")
    out: list[Released] = []
    for position, (call_id, name, args) in enumerate(calls):
        text = json.dumps(args, ensure_ascii=False)
        value = strict_object(text)
        if name not in schemas:
            raise Reject("unknown tool")
        if not Draft202012Validator(schemas[name]).is_valid(value):
            raise Reject("schema")
        if not policy(name, value):
            raise Reject("policy")
        out.append((position, call_id or f"{PREFIX}{position}", name, text, value))
    return out


def _call(call: Any) -> tuple[str | None, str, dict[str, Any]]:
    if not isinstance(call, dict):
        raise Reject("call")
    function = call.get("function")
    if not isinstance(function, dict):
        raise Reject("function")
    index = function.get("index")
    if index is not None and (type(index) is not int or index < 0):
        raise Reject("index")
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise Reject("name")
    args = function.get("arguments")
    if not isinstance(args, dict):
        raise Reject("arguments")
    call_id = call.get("id")
    if call_id is not None and (not isinstance(call_id, str) or not call_id):
        raise Reject("id")
    return call_id, name, args
