"""Responses SSE streams for the property tests and fuzzers, well-formed and then damaged.

:func:`stream` writes a well-formed native Responses stream: ``response.created`` (and maybe
``in_progress``), then output items interleaved event by event: a reasoning item with
``encrypted_content``, message items with text deltas, and 1-4 function-call items (now and
then none) whose arguments start in ``output_item.added`` and/or arrive in deltas, each
closed by ``function_call_arguments.done`` and ``output_item.done``; then
``response.completed`` listing every item in ``output_index`` order, and maybe ``[DONE]``.
The argument text comes from :mod:`chatgen` (a JSON object, sometimes a hostile one: NaN,
huge numbers, deep nesting, duplicate keys, lone surrogates, trailing data, garbage).

:func:`wire` then damages it at the level of events (:data:`MUTATIONS`: dropped, duplicated,
reordered; ``.done`` or ``output_item.done`` disagreeing with what was streamed; the
completion dropping, adding or changing a call or not completed; errors, failures, refusal
events and refusal parts; events after the completion; reused or unopened indexes; changed
item ids; another response id; item types the gate cannot gate; events that are not what
their SSE name says) and of bytes (:func:`chatgen.damage`), and encodes it with
:func:`chatgen.encode`. What the gate must do is decided by :mod:`oracle_responses`, not
here.

The knobs, batching and cut points are chatgen's: a failure names its seed and knobs, and
``wire(knobs)`` replays it exactly.
"""

from __future__ import annotations

import json
import random
from typing import Any

from chatgen import (
    NAMES,
    Call,
    Knobs,
    Msg,
    Stream,
    argument_text,
    cut_points,
    cut_text,
    damage,
    encode,
    mutate,
    siblings,
    text,
)

RESPONSE_ID = "resp_prop"
# Tool item types other than function calls. The generator only ever builds them broken
# (no stages, an identity of another item, a listing that names an item never streamed), so
# the oracle refuses them and so must the gate; well-formed ones are fixture cases.
UNGATED_ITEMS = [
    "custom_tool_call",
    "computer_call",
    "web_search_call",
    "mcp_call",
    "file_search_call",
]


REFUSING = {  # a message item whose content is a refusal part
    "id": "msg_8",
    "type": "message",
    "role": "assistant",
    "content": [{"type": "refusal", "refusal": "no"}],
}


def event(kind: str, **fields: Any) -> Msg:
    return Msg({"type": kind, **fields}, event=kind)


def response(status: str, output: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"id": RESPONSE_ID, "object": "response", "status": status, "output": output or []}


def call_item(call: Call, arguments: str, status: str = "in_progress") -> dict[str, Any]:
    return {
        "id": f"fc_{call.index}",
        "type": "function_call",
        "status": status,
        "arguments": arguments,
        "call_id": call.call_id,
        "name": call.name,
    }


def _call_events(call: Call, in_added: bool) -> list[Msg]:
    """One function-call item's events; the first fragment rides in the added item or not."""
    first = call.fragments[0] if in_added else ""
    deltas = call.fragments[1:] if in_added else call.fragments
    item_id = f"fc_{call.index}"
    out = [
        event("response.output_item.added", output_index=call.index, item=call_item(call, first))
    ]
    for piece in deltas:
        out.append(
            event(
                "response.function_call_arguments.delta",
                output_index=call.index,
                item_id=item_id,
                delta=piece,
            )
        )
    whole = call.arguments
    out.append(
        event(
            "response.function_call_arguments.done",
            output_index=call.index,
            item_id=item_id,
            arguments=whole,
        )
    )
    done = call_item(call, whole, "completed")
    out.append(event("response.output_item.done", output_index=call.index, item=done))
    return out


def _message_events(rng: random.Random, index: int) -> tuple[list[Msg], dict[str, Any]]:
    item_id = f"msg_{index}"
    pieces = [text(rng) or "." for _ in range(rng.randint(1, 3))]
    whole = "".join(pieces)
    part = {"type": "output_text", "text": whole, "annotations": []}
    item = {"id": item_id, "type": "message", "role": "assistant", "status": "completed"}
    out = [event("response.output_item.added", output_index=index, item={**item, "content": []})]
    where = {"item_id": item_id, "output_index": index, "content_index": 0}
    out.append(event("response.content_part.added", **where, part={**part, "text": ""}))
    out += [event("response.output_text.delta", **where, delta=p) for p in pieces]
    out.append(event("response.output_text.done", **where, text=whole))
    out.append(event("response.content_part.done", **where, part=part))
    final = {**item, "content": [part]}
    out.append(event("response.output_item.done", output_index=index, item=final))
    return out, final


def _reasoning_events(rng: random.Random, index: int) -> tuple[list[Msg], dict[str, Any]]:
    secret = "gAAAA" + rng.randbytes(rng.randint(8, 48)).hex()
    item = {"id": f"rs_{index}", "type": "reasoning", "summary": [], "encrypted_content": secret}
    out = [event("response.output_item.added", output_index=index, item=item)]
    if rng.random() < 0.5:
        where = {"item_id": f"rs_{index}", "output_index": index, "summary_index": 0}
        out.append(event("response.reasoning_summary_text.delta", **where, delta=text(rng)))
    out.append(event("response.output_item.done", output_index=index, item=item))
    return out, item


def _search_events(
    rng: random.Random, index: int, hostile: bool = False
) -> tuple[list[Msg], dict[str, Any]]:
    """A hosted web search the server ran: a report, seen by the policy, never released."""
    item = {"id": f"ws_{index}", "type": "web_search_call"}
    out = [
        event(
            "response.output_item.added", output_index=index, item={**item, "status": "in_progress"}
        )
    ]
    if rng.random() < 0.5:
        out.append(
            event("response.web_search_call.searching", output_index=index, item_id=item["id"])
        )
    final: dict[str, Any] = {
        **item,
        "status": "completed",
        "action": {"type": "search", "query": text(rng)},
    }
    if hostile and rng.random() < 0.2:
        final["deny"] = True  # the tests' policy refuses a value with a top-level "deny"
    out.append(event("response.output_item.done", output_index=index, item=final))
    return out, final


def stream(rng: random.Random, hostile: bool = True) -> Stream:
    """A well-formed Responses stream (its arguments hostile now and then when ``hostile``)."""
    kinds = ["call"] * rng.choice([0, 1, 1, 2, 2, 3, 4])
    if rng.random() < 0.3:
        kinds.append("reasoning")
    if rng.random() < 0.2:
        kinds.append("search")
    kinds += ["message"] * rng.choice([0, 1, 1, 2])
    rng.shuffle(kinds)  # output_index order
    # Hostile arguments in half the streams only, so that in the other half the event-level
    # damage is the only fault and its detection is what is tested.
    hostile = hostile and rng.random() < 0.5
    calls: list[Call] = []
    final: dict[int, dict[str, Any]] = {}
    sequences: list[list[Msg]] = []
    for index, kind in enumerate(kinds):
        if kind == "call":
            name = rng.choice(NAMES if hostile else NAMES[:3])
            fragments = cut_text(rng, argument_text(rng, name, hostile))
            call = Call(index, f"call_{index}", name, fragments)
            calls.append(call)
            sequences.append(_call_events(call, in_added=rng.random() < 0.5))
            final[index] = call_item(call, call.arguments, "completed")
        elif kind == "search":
            msgs, item = _search_events(rng, index, hostile)
        else:
            make = _message_events if kind == "message" else _reasoning_events
            msgs, item = make(rng, index)
            sequences.append(msgs)
            final[index] = item
    # Interleave: a shuffle of labels, the k-th label of an item taking its k-th event.
    labels = [n for n, seq in enumerate(sequences) for _ in seq]
    rng.shuffle(labels)
    cursors = [iter(seq) for seq in sequences]
    messages = [event("response.created", response=response("in_progress"))]
    if rng.random() < 0.5:
        messages.append(event("response.in_progress", response=response("in_progress")))
    messages += [next(cursors[n]) for n in labels]
    output = [final[i] for i in sorted(final)]
    messages.append(event("response.completed", response=response("completed", output)))
    if rng.random() < 0.5:
        messages.append(Msg("[DONE]"))
    for m in messages:  # a stream may or may not name its events on the ``event:`` line
        if rng.random() < 0.1:
            m.event = None
    return Stream(messages, calls, "completed")


# ---- damage --------------------------------------------------------------------------------

MUTATIONS = (
    "drop",
    "duplicate",
    "swap",
    "shuffle",
    "args_done",
    "item_done",
    "completed",
    "status",
    "error",
    "after_completed",
    "index",
    "item_id",
    "response_id",
    "ungated",
    "only_in_done",
    "event_name",
    "bad_data",
)


def _of(messages: list[Msg], kind: str) -> list[dict[str, Any]]:
    return [m.data for m in messages if isinstance(m.data, dict) and m.data.get("type") == kind]


def _completed(messages: list[Msg]) -> dict[str, Any] | None:
    for data in _of(messages, "response.completed"):
        resp = data.get("response")
        if isinstance(resp, dict) and isinstance(resp.get("output"), list):
            return resp
    return None


def _changed(rng: random.Random, item: dict[str, Any]) -> None:
    """Change one field of a function-call item (a copy the caller owns)."""
    field = rng.choice(["id", "call_id", "name", "arguments", "status", "type"])
    if field == "arguments":
        old = item.get("arguments")
        old = old if isinstance(old, str) else ""
        item["arguments"] = rng.choice([old + " ", old[:-1], '{"a": 1, "b": 2}', None, ""])
    elif field == "status":
        item["status"] = rng.choice(["incomplete", "in_progress", None, "completed"])
    elif field == "type":
        item["type"] = rng.choice(["message", "reasoning", *UNGATED_ITEMS])
    else:
        item[field] = rng.choice(["fc_0", "call_1", "multiply", "", None, 7, f"{item.get(field)}x"])


def respmutate(rng: random.Random, kind: str, messages: list[Msg]) -> None:
    """Damage ``messages`` in place (the event objects are fresh per stream)."""
    if kind in ("drop", "duplicate", "swap", "shuffle"):
        mutate(rng, kind, messages)  # chatgen's: the same damage on any list of messages
        return
    at = rng.randrange(len(messages))
    if kind == "args_done":
        dones = _of(messages, "response.function_call_arguments.done")
        if dones:
            data = rng.choice(dones)
            old = data.get("arguments") or ""
            data["arguments"] = rng.choice([old + "}", old[1:], "", None, old.replace("1", "2")])
    elif kind == "item_done":
        items = [
            d for d in _of(messages, "response.output_item.done") if isinstance(d.get("item"), dict)
        ]
        if items:
            _changed(rng, rng.choice(items)["item"])
    elif kind == "completed":
        resp = _completed(messages)
        if resp is not None:
            output = resp["output"]
            how = rng.choice(["drop", "add", "change", "reorder"])
            calls = [
                i
                for i, it in enumerate(output)
                if isinstance(it, dict) and it.get("type") == "function_call"
            ]
            if how == "drop" and calls:
                del output[rng.choice(calls)]
            elif how == "add":
                extra = {"id": "fc_99", "type": "function_call", "status": "completed"}
                extra |= {"arguments": "{}", "call_id": "call_99", "name": "anything"}
                output.insert(rng.randint(0, len(output)), extra)
            elif how == "change" and calls:
                pick = rng.choice(calls)
                output[pick] = changed = dict(output[pick])
                _changed(rng, changed)
            elif how == "reorder":
                rng.shuffle(output)
    elif kind == "status":
        resp = _completed(messages)
        if resp is not None:
            resp["status"] = rng.choice(["incomplete", "failed", "in_progress", None, 1])
    elif kind == "error":
        bad = rng.choice(
            [
                event("error", code="server_error", message="upstream failed"),
                event("response.failed", response={**response("failed"), "error": {"code": "x"}}),
                event("response.incomplete", response=response("incomplete")),
                event("response.refusal.delta", item_id="msg_0", output_index=0, delta="no"),
                event("response.refusal.done", item_id="msg_0", output_index=0, refusal="no"),
                Msg("{}", event="error"),
                Msg("[DONE]", event="error"),
                event("response.output_item.added", output_index=8, item=REFUSING),
                event("response.output_item.done", output_index=8, item=REFUSING),
            ]
        )
        messages.insert(at, bad)
    elif kind == "after_completed":
        late = [
            event("response.output_text.delta", item_id="msg_0", output_index=0, delta="late"),
            event("response.in_progress", response=response("in_progress")),
            event("response.unknown_thing"),
            Msg("[DONE]"),
            Msg("[DONE]", event="error"),
            event("error", message="late"),
        ]
        messages.append(rng.choice(late))
    elif kind == "index":
        targets = [
            m.data for m in messages if isinstance(m.data, dict) and "output_index" in m.data
        ]
        if targets:
            rng.choice(targets)["output_index"] = rng.choice([0, 1, 2, 7, -1, True, "0", None, 1.0])
    elif kind == "item_id":
        targets = _of(messages, "response.function_call_arguments.delta")
        targets += _of(messages, "response.function_call_arguments.done")
        if targets:
            rng.choice(targets)["item_id"] = rng.choice(["fc_0", "fc_1", "fc_x", "", None])
    elif kind == "response_id":
        how = rng.choice(["created", "completed", "insert"])
        if how == "insert":
            other = {**response("in_progress"), "id": "resp_other"}
            messages.insert(at, event("response.in_progress", response=other))
        else:
            for data in _of(messages, f"response.{how}")[:1]:
                if isinstance(data.get("response"), dict):
                    data["response"]["id"] = rng.choice(["resp_other", "", None])
    elif kind == "ungated":
        item = {"id": "ct_9", "type": rng.choice(UNGATED_ITEMS), "call_id": "call_9", "name": "x"}
        if rng.random() < 0.5:
            messages.insert(at, event("response.output_item.added", output_index=9, item=item))
        else:
            resp = _completed(messages)
            if resp is not None:
                resp["output"].append(item)
    elif kind == "only_in_done":
        # Arguments never streamed: no deltas, nothing in the added item, only in ``.done``.
        messages[:] = [
            m
            for m in messages
            if not (
                isinstance(m.data, dict)
                and m.data.get("type") == "response.function_call_arguments.delta"
            )
        ]
        for data in _of(messages, "response.output_item.added"):
            if isinstance(data.get("item"), dict) and data["item"].get("type") == "function_call":
                data["item"]["arguments"] = ""
    elif kind == "event_name":
        m = messages[at]
        m.event = rng.choice(["message", "response.output_text.delta", "ping", "", None])
    elif kind == "bad_data":
        bad = rng.choice(['{"no_type": 1}', '{"type": 5}', "[1]", "{not json", "null", "[DONE] "])
        messages.insert(at, Msg(bad, event=rng.choice([None, "message"])))


def wire(k: Knobs, hostile: bool = True) -> Stream:
    """The Responses stream for ``k``: written, damaged, encoded, with a set of cut points."""
    rng = random.Random(k.seed)
    base = stream(rng, hostile)
    messages = [Msg(json.loads(json.dumps(m.data)), m.event) for m in base.messages]
    for kind in k.mutations:
        respmutate(rng, kind, messages)
    body = encode(
        messages,
        ensure_ascii=rng.random() < 0.5,
        eol=k.eol,
        split_lines=k.split_lines,
        space=rng.random() < 0.9,
    )
    applied = list(k.mutations)
    if k.byte_mutation is not None and body:
        body = damage(rng, k.byte_mutation, body)
        applied.append(k.byte_mutation)
    base.messages, base.mutations, base.body = messages, applied, body
    base.cuts = cut_points(rng, body)
    if rng.random() < 0.007 and len(body) > 1:
        # chatgen feeds only bodies under 1.5 KB a byte at a time; few Responses streams are.
        base.cuts = list(range(1, len(body)))
    return base


def batch(k: Knobs, hostile: bool = True) -> list[tuple[Knobs, Stream]]:
    """``k``'s Responses stream and its siblings' (see :func:`chatgen.siblings`)."""
    return [(s, wire(s, hostile)) for s in siblings(k, hostile, MUTATIONS)]
