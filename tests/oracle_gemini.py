"""An independent reference for what the gate may release from a Gemini
``streamGenerateContent`` body.

Written from ``docs/gemini.md``'s rules, sharing no code with ``litellm_toolgate``: it reuses
only :mod:`oracle`'s own event-stream reader and strict JSON parser, and checks schemas with
jsonschema directly. It reads the whole decoded body.

:func:`judge` answers for one body: the calls that must be released, in arrival order, as
``(position, id, name, arguments, value)``, or ``None`` for a quarantine. The rules:

* every dispatched message's data is a JSON object (read with duplicate keys refused when
  any part of it is a ``functionCall``); one with ``error``, or a ``promptFeedback`` with a
  ``blockReason``, is refused;
* ``candidates``, when present and not empty, is a list of one object whose ``index`` (an
  integer, 0 if absent) is 0; its ``content`` (if present) is an object whose ``parts`` (if
  present) is a list of objects; leaving aside ``thought``, ``thoughtSignature``,
  ``partMetadata`` and ``videoMetadata``, a part holds nothing, exactly a string ``text``, or
  exactly a ``functionCall``; anything else is refused;
* a ``functionCall`` is an object without ``partialArgs`` or ``willContinue``, with a
  non-empty string ``name`` and an object ``args`` (``{}`` when absent); either every call
  of the body has a non-empty string ``id``, all different, or none has one (then the n-th
  call is ``gemini-call-<n>``);
* a candidate's ``finishReason``, when present, is a non-empty string and ends the body: no
  message may follow it, and a body without one is refused;
* calls are released only under ``STOP``; without calls the finish is ``STOP``,
  ``MAX_TOKENS`` or one of the content stops (``SAFETY``, ``RECITATION``, ``LANGUAGE``,
  ``OTHER``, ``BLOCKLIST``, ``PROHIBITED_CONTENT``, ``SPII`` and the image ones), anything
  else is refused; at most 64 calls;
* a call's arguments are its ``args`` serialized again (``json.dumps``, non-ASCII kept),
  one strict JSON object, valid against its tool's schema, approved by the policy.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from jsonschema import Draft202012Validator
from oracle import Reject, Released, sse_messages, strict_object

MAX_CALLS = 64
META = {"thought", "thoughtSignature", "partMetadata", "videoMetadata"}
TEXT_FINISHES = {
    "STOP",
    "MAX_TOKENS",
    "SAFETY",
    "RECITATION",
    "LANGUAGE",
    "OTHER",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "IMAGE_SAFETY",
    "IMAGE_PROHIBITED_CONTENT",
    "IMAGE_RECITATION",
    "IMAGE_OTHER",
    "NO_IMAGE",
}


def judge(
    body: bytes,
    schemas: Mapping[str, Mapping[str, Any]],
    policy: Callable[[str, dict[str, Any]], bool] = lambda name, value: True,
) -> list[Released] | None:
    """The calls the gate must release for this Gemini body, or None for a quarantine."""
    try:
        return _run(body, schemas, policy)
    except Reject:
        return None


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise Reject("duplicate key")
    return out


def _has_call(obj: dict[str, Any]) -> bool:
    for cand in obj.get("candidates") or [] if isinstance(obj.get("candidates"), list) else []:
        content = cand.get("content") if isinstance(cand, dict) else None
        parts = content.get("parts") if isinstance(content, dict) else None
        for part in parts if isinstance(parts, list) else []:
            if isinstance(part, dict) and "functionCall" in part:
                return True
    return False


def _load(data: str) -> dict[str, Any]:
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError):
        raise Reject("not JSON") from None
    if not isinstance(obj, dict):
        raise Reject("not an object")
    if _has_call(obj):
        try:
            obj = json.loads(data, object_pairs_hook=_no_duplicates)
        except (ValueError, RecursionError):
            raise Reject("not JSON") from None
    return obj


def _run(
    body: bytes,
    schemas: Mapping[str, Mapping[str, Any]],
    policy: Callable[[str, dict[str, Any]], bool],
) -> list[Released]:
    messages = sse_messages(body)
    if messages is None:
        raise Reject("utf-8")
    finish: str | None = None
    calls: list[tuple[str | None, str, dict[str, Any]]] = []
    for _name, data in messages:
        if finish is not None:
            raise Reject("a message after the finish")
        obj = _load(data)
        if "error" in obj:
            raise Reject("error")
        feedback = obj.get("promptFeedback")
        if isinstance(feedback, dict) and feedback.get("blockReason") is not None:
            raise Reject("blocked")
        candidates = obj.get("candidates")
        if candidates is None or candidates == []:
            continue
        if not isinstance(candidates, list) or len(candidates) != 1:
            raise Reject("candidates")
        cand = candidates[0]
        if not isinstance(cand, dict):
            raise Reject("candidate")
        index = cand.get("index", 0)
        if type(index) is not int or index != 0:
            raise Reject("candidate index")
        content = cand.get("content")
        if content is not None:
            if not isinstance(content, dict):
                raise Reject("content")
            parts = content.get("parts")
            if parts is not None:
                if not isinstance(parts, list):
                    raise Reject("parts")
                for part in parts:
                    if not isinstance(part, dict):
                        raise Reject("part")
                    kinds = sorted(set(part) - META)
                    if kinds == ["text"]:
                        if not isinstance(part["text"], str):
                            raise Reject("text")
                    elif kinds == ["functionCall"]:
                        calls.append(_call(part["functionCall"]))
                    elif kinds:
                        raise Reject("a part the gate does not read")
        reason = cand.get("finishReason")
        if reason is not None:
            if not isinstance(reason, str) or not reason:
                raise Reject("finish reason")
            finish = reason
    if finish is None:
        raise Reject("no finish")
    if finish not in TEXT_FINISHES or (calls and finish != "STOP"):
        raise Reject("finish against the calls")
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
        out.append((position, call_id or f"gemini-call-{position}", name, text, value))
    return out


def _call(call: Any) -> tuple[str | None, str, dict[str, Any]]:
    if not isinstance(call, dict):
        raise Reject("call")
    if "partialArgs" in call or "willContinue" in call:
        raise Reject("partial call")
    name = call.get("name")
    if not isinstance(name, str) or not name:
        raise Reject("name")
    args = call.get("args", {})
    if not isinstance(args, dict):
        raise Reject("args")
    call_id = call.get("id")
    if call_id is not None and (not isinstance(call_id, str) or not call_id):
        raise Reject("id")
    return call_id, name, args
