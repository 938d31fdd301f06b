"""An independent reference for what the gate may release from a native Responses stream.

Written from the README's "The Responses API" rules and the Responses module docstrings,
sharing no code with ``litellm_toolgate``: it reuses only :mod:`oracle`'s own event-stream
reader and strict JSON parser, and checks schemas with jsonschema directly. It reads the
whole decoded body and keeps its own record of every output item.

:func:`judge` answers for one body: the calls that must be released, in ``output_index``
order, as ``(index, call_id, name, arguments, value)``, or ``None`` for a quarantine. The
rules:

* every message is ``data: [DONE]`` or a JSON object whose string ``type`` names the event,
  equal to the SSE ``event`` name when one is given (or that name is ``message``); any
  message named ``error`` is an error, whatever its data;
* ``error``, ``response.failed``, ``response.incomplete`` and refusal events quarantine;
  so does a message item carrying a refusal part, and any item type other than
  ``function_call`` and the items that are no tool (``message``, ``reasoning``,
  ``compaction``, ``program``, ``program_output``). (The other known tool items, custom,
  shell, patch, computer calls and hosted-tool reports, are judged by their fixtures: this
  reference's generator never builds a well-formed one, so it refuses them all);
* a lifecycle event (created, in progress, queued) whose response lists anything but items
  that are no tool, or an event it does not know that carries an ``item`` of another kind or
  a ``response`` listing one, quarantines: a call may not hide there;
* the response id, once named, never changes;
* ``output_item.added`` opens an ``output_index`` (a non-negative integer) once; a function
  call needs a non-empty ``id``, ``call_id`` and ``name``, none of them taken by another
  item; its arguments so far are the added item's ``arguments``;
* argument deltas and ``.done`` name an opened function-call index with its item id; deltas
  come before ``.done``, which comes once and repeats the accumulated arguments exactly;
  then ``output_item.done`` once, same type, same ``id``/``call_id``/``name``/``arguments``,
  status ``completed`` or none;
* ``response.completed`` with status ``completed`` finds every call past its
  ``output_item.done`` and lists in ``output`` exactly those calls, in index order, with the
  same four fields; after it, at most one ``[DONE]``, then the end of the body;
* at most 64 function calls (the default ``max_calls``);
* a ``web_search_call`` is the server's report of a search it ran: opened once with a
  non-empty ``id`` no other item holds (it counts towards the 64), done once with the same
  ``id`` (any status), listed by the completion among the calls, in index order, with every
  field but ``status`` as it was done; it is never released, but the policy sees it (name
  ``web_search``, value: the done item without ``status``) and may refuse the response;
* then each call's arguments are one strict JSON object, valid against its tool's schema,
  approved by the policy.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from jsonschema import Draft202012Validator
from oracle import Reject, Released, sse_messages, strict_object

GATED = {"message", "reasoning", "function_call", "compaction", "program", "program_output"}
NO_TOOL = GATED - {"function_call"}
GATED |= {"web_search_call"}  # a report of a search the server ran
KNOWN = {
    "response.output_text.delta", "response.output_text.done", "response.content_part.added",
    "response.content_part.done", "response.output_text.annotation.added",
    "response.reasoning_summary_part.added", "response.reasoning_summary_part.done",
    "response.reasoning_summary_text.delta", "response.reasoning_summary_text.done",
    "response.reasoning_text.delta", "response.reasoning_text.done",
}  # fmt: skip


def _hides(obj: dict[str, Any]) -> bool:
    """Whether an event carries an item that is a tool outside the places items are read."""
    places: list[Any] = []
    if "item" in obj and obj["item"] is not None:
        places.append(obj["item"])
    resp = obj.get("response")
    if isinstance(resp, dict) and isinstance(resp.get("output"), list):
        places.extend(resp["output"])
    return any(not (isinstance(i, dict) and i.get("type") in NO_TOOL) for i in places)


MAX_CALLS = 64  # the README's default ``max_calls``: a fuzzer's 8 KiB input can open more
FAILURES = {"error", "response.failed", "response.incomplete"}
REFUSALS = {"response.refusal.delta", "response.refusal.done"}


def judge(
    body: bytes,
    schemas: Mapping[str, Mapping[str, Any]],
    policy: Callable[[str, dict[str, Any]], bool] = lambda name, value: True,
) -> list[Released] | None:
    """The calls the gate must release for this Responses body, or None for a quarantine."""
    try:
        return _Judge().run(body, schemas, policy)
    except Reject:
        return None


def _string(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise Reject("not a string")


def _item_type(item: Any) -> str:
    if not isinstance(item, dict) or not isinstance(item.get("type"), str):
        raise Reject("item")
    kind: str = item["type"]
    if kind not in GATED:
        raise Reject("an item the gate cannot gate")
    if kind == "message":
        content = item.get("content")
        if content and not isinstance(content, list):
            raise Reject("message content")
        for part in content or []:
            if isinstance(part, dict) and part.get("type") == "refusal":
                raise Reject("refusal part")
    return kind


def _index(data: dict[str, Any]) -> int:
    index = data.get("output_index")
    if type(index) is not int or index < 0:
        raise Reject("output_index")
    return index


class _Call:
    def __init__(self, item_id: str, call_id: str, name: str, arguments: str) -> None:
        self.item_id, self.call_id, self.name = item_id, call_id, name
        self.arguments = arguments
        self.stage = "open"  # then "args_done", then "item_done"


class _Judge:
    def __init__(self) -> None:
        self.response_id: str | None = None
        self.items: dict[int, str] = {}  # output_index -> item type
        self.calls: dict[int, _Call] = {}
        self.reports: dict[int, dict[str, Any]] = {}  # output_index -> {"id", "done"}
        self.taken: set[str] = set()

    def run(
        self,
        body: bytes,
        schemas: Mapping[str, Mapping[str, Any]],
        policy: Callable[[str, dict[str, Any]], bool],
    ) -> list[Released]:
        messages = sse_messages(body)
        if messages is None:
            raise Reject("utf-8")
        stage = "streaming"  # then "completed", then "done"
        for name, data in messages:
            if stage == "done" or (stage == "completed" and data != "[DONE]"):
                raise Reject("a message after the completion")
            if name == "error":
                raise Reject("error event")
            if data == "[DONE]":
                if stage != "completed":
                    raise Reject("[DONE] before the completion")
                stage = "done"
                continue
            try:
                obj = json.loads(data)
            except (ValueError, RecursionError):
                raise Reject("not JSON") from None
            if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
                raise Reject("not an event")
            if name not in ("", "message", obj["type"]):
                raise Reject("event name disagrees")
            if self.event(obj["type"], obj):
                stage = "completed"
        if stage == "streaming":
            raise Reject("no completion")
        out: list[Released] = []
        for index in sorted(self.calls):
            call = self.calls[index]
            value = strict_object(call.arguments)
            if call.name not in schemas:
                raise Reject("unknown tool")
            if not Draft202012Validator(schemas[call.name]).is_valid(value):
                raise Reject("schema")
        # Every call's parse and schema come before any policy answer, reports included.
        for index in sorted({*self.calls, *self.reports}):
            if index in self.reports:
                if not policy("web_search", dict(self.reports[index]["done"])):
                    raise Reject("policy")
                continue
            call = self.calls[index]
            if not policy(call.name, strict_object(call.arguments)):
                raise Reject("policy")
            out.append(
                (index, call.call_id, call.name, call.arguments, strict_object(call.arguments))
            )
        return out

    def response(self, resp: Any) -> None:
        if not isinstance(resp, dict):
            raise Reject("response")
        rid = _string(resp.get("id"))
        if rid:
            if self.response_id is None:
                self.response_id = rid
            elif rid != self.response_id:
                raise Reject("another response")

    def event(self, kind: str, obj: dict[str, Any]) -> bool:
        """Take one event; True when it completed the response."""
        if kind in FAILURES or kind in REFUSALS:
            raise Reject(kind)
        if kind in ("response.created", "response.in_progress", "response.queued"):
            if _hides(obj):
                raise Reject("a call hidden in a snapshot")
            self.response(obj.get("response"))
        elif kind == "response.output_item.added":
            self.added(_index(obj), obj.get("item"))
        elif kind == "response.function_call_arguments.delta":
            call = self.call_for(obj)
            if call.stage != "open":
                raise Reject("delta after .done")
            call.arguments += _string(obj.get("delta")) or ""
        elif kind == "response.function_call_arguments.done":
            call = self.call_for(obj)
            if call.stage != "open" or (_string(obj.get("arguments")) or "") != call.arguments:
                raise Reject(".done")
            call.stage = "args_done"
        elif kind == "response.output_item.done":
            self.item_done(_index(obj), obj.get("item"))
        elif kind == "response.output_text.delta":
            _string(obj.get("delta"))
        elif kind == "response.completed":
            self.completed(obj.get("response"))
            return True
        elif (
            kind not in KNOWN
            and not kind.startswith("response.function_call_arguments")
            and _hides(obj)
        ):
            raise Reject("a call hidden in an unknown event")
        return False

    def added(self, index: int, item: Any) -> None:
        kind = _item_type(item)
        if index in self.items:
            raise Reject("index reused")
        self.items[index] = kind
        if kind == "web_search_call":
            report_id = _string(item.get("id"))
            if not report_id or report_id in self.taken:
                raise Reject("report identity")
            if len(self.calls) + len(self.reports) >= MAX_CALLS:
                raise Reject("too many calls")
            self.taken.add(report_id)
            self.reports[index] = {"id": report_id, "done": None}
            return
        if kind != "function_call":
            return
        item_id, call_id, name = (_string(item.get(k)) for k in ("id", "call_id", "name"))
        arguments = _string(item.get("arguments")) or ""
        if not item_id or not call_id or not name:
            raise Reject("identity")
        if item_id in self.taken or call_id in self.taken:
            raise Reject("identity taken")
        if len(self.calls) + len(self.reports) >= MAX_CALLS:
            raise Reject("too many calls")
        self.taken |= {item_id, call_id}
        self.calls[index] = _Call(item_id, call_id, name, arguments)

    def call_for(self, obj: dict[str, Any]) -> _Call:
        call = self.calls.get(_index(obj))
        if call is None or obj.get("item_id") != call.item_id:
            raise Reject("unknown item")
        return call

    def item_done(self, index: int, item: Any) -> None:
        kind = _item_type(item)
        if self.items.get(index) != kind:
            raise Reject("item type changed or never opened")
        if kind == "web_search_call":
            report = self.reports[index]
            if report["done"] is not None or _string(item.get("id")) != report["id"]:
                raise Reject("report done out of turn or changed")
            report["done"] = {k: v for k, v in item.items() if k != "status"}
            return
        if kind != "function_call":
            return
        call = self.calls[index]
        if call.stage != "args_done" or item.get("status") not in (None, "completed"):
            raise Reject("item done out of turn")
        mine = (call.item_id, call.call_id, call.name, call.arguments)
        if tuple(_string(item.get(k)) for k in ("id", "call_id", "name", "arguments")) != mine:
            raise Reject("item done disagrees")
        call.stage = "item_done"

    def completed(self, resp: Any) -> None:
        self.response(resp)
        assert isinstance(resp, dict)
        if resp.get("status") != "completed" or not isinstance(resp.get("output"), list):
            raise Reject("not completed")
        listed: list[Any] = []
        for item in resp["output"]:
            kind = _item_type(item)
            if kind == "function_call":
                if item.get("status") not in (None, "completed"):
                    raise Reject("the completion lists a call that did not complete")
                listed.append(
                    tuple(_string(item.get(k)) for k in ("id", "call_id", "name", "arguments"))
                )
            elif kind == "web_search_call":
                _string(item.get("id"))
                rest = {k: v for k, v in item.items() if k != "status"}
                listed.append(json.dumps(rest, sort_keys=True))
        streamed: list[Any] = []
        for index in sorted({*self.calls, *self.reports}):
            if index in self.reports:
                done = self.reports[index]["done"]
                if done is None:
                    raise Reject("a report short of its stages")
                streamed.append(json.dumps(done, sort_keys=True))
                continue
            call = self.calls[index]
            if call.stage != "item_done":
                raise Reject("a call short of its stages")
            streamed.append((call.item_id, call.call_id, call.name, call.arguments))
        if listed != streamed:
            raise Reject("the completion lists other calls")
