"""The recorded chat SSE fixtures: the manifest is well-formed, says what the bodies carry,
and ``fixtures/chat/generate.py`` reproduces every committed file byte for byte."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from litellm_toolgate.core.errors import QuarantineReason

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "chat"
RECORDINGS = ROOT / "litellm_toolgate" / "loopback" / "recordings"
CANARY = "CANARY-7f3a9c"
SMALL_LIMIT = 2500
# Reasons whose bodies may be built not to parse as SSE + JSON; the independent parse
# below skips those.
UNPARSEABLE = {"malformed_event", "invalid_utf8"}
# The reasons the brief asks the fixtures to cover, at least once each.
REQUIRED_REASONS = {
    "error_event", "missing_finish", "missing_done", "finish_reason_mismatch",
    "malformed_event", "invalid_json", "trailing_data", "not_an_object", "duplicate_key",
    "depth_exceeded", "schema_invalid", "unknown_tool", "identity_conflict",
    "missing_call_identity", "invalid_call_index", "refusal", "legacy_function_call",
    "unexpected_choice", "unsupported_tool_type", "event_after_terminal", "invalid_utf8",
    "disconnected", "stalled",
}  # fmt: skip


@cache
def manifest() -> dict[str, Any]:
    data = json.loads((FIXTURES / "manifest.json").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def cases() -> list[dict[str, Any]]:
    return list(manifest()["cases"])


def case_ids() -> list[str]:
    return [c["name"] for c in cases()]


def body_of(case: dict[str, Any]) -> bytes:
    return (FIXTURES / str(case["body"])).read_bytes()


def served(case: dict[str, Any]) -> bytes:
    """The bytes a client receives before the transport fault (all of them without one)."""
    body = body_of(case)
    transport = case.get("transport") or {}
    for key in ("disconnect_after", "stall_after"):
        if key in transport:
            return body[: int(transport[key])]
    return body


# An independent, minimal SSE reader: enough for these fixtures, nothing more.

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def sse_messages(raw: bytes) -> Iterator[tuple[str, str]]:
    """(event type, data) for every complete message; an unterminated tail is dropped."""
    text = raw.decode("utf-8")  # strict: raises on invalid UTF-8
    text = text.removeprefix("\ufeff")
    lines = _LINE_BREAK.split(text)
    lines.pop()  # what follows the last line break is not a complete line
    event, data = "", list[str]()
    for line in lines:
        if line == "":
            if data:
                yield event or "message", "\n".join(data)
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value


def wire_view(raw: bytes) -> dict[str, Any]:
    """Text, first finish reason and per-index tool calls of choice 0, from the raw bytes."""
    text = ""
    finish: str | None = None
    calls: dict[int, dict[str, Any]] = {}
    for _event, data in sse_messages(raw):
        if data == "[DONE]":
            continue
        obj = json.loads(data)
        if not isinstance(obj, dict):
            continue
        for choice in obj.get("choices") or []:
            if choice.get("index") != 0:
                continue
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                text += delta["content"]
            for frag in delta.get("tool_calls") or []:
                index = frag.get("index")
                function = frag.get("function") or {}
                call = calls.get(index)
                if call is None:
                    call = calls[index] = {
                        "index": index,
                        "id": frag.get("id"),
                        "name": function.get("name"),
                        "arguments": "",
                    }
                call["arguments"] += function.get("arguments") or ""
            if finish is None and choice.get("finish_reason") is not None:
                finish = choice["finish_reason"]
    ordered = [calls[k] for k in sorted(calls, key=lambda k: (not isinstance(k, int), str(k)))]
    return {"text": text, "finish_reason": finish, "calls": ordered}


def tool_schema(name: str) -> dict[str, Any] | None:
    for tool in manifest()["tools"]:
        if tool["function"]["name"] == name:
            return dict(tool["function"]["parameters"])
    return None


# The manifest itself


def test_tools_are_the_two_chat_tools() -> None:
    tools = manifest()["tools"]
    assert [t["type"] for t in tools] == ["function", "function"]
    assert [t["function"]["name"] for t in tools] == ["multiply", "write_file"]
    assert tool_schema("multiply") == {
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    }
    assert tool_schema("write_file") == {
        "type": "object",
        "properties": {
            "path": {"type": "string", "maxLength": 4096},
            "content": {"type": "string"},
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    }
    for tool in tools:
        jsonschema.Draft202012Validator.check_schema(tool["function"]["parameters"])


def test_case_names_are_unique_and_bodies_exist() -> None:
    names = case_ids()
    assert len(names) == len(set(names))
    for case in cases():
        assert case["body"] == f"{case['name']}.sse"
        assert (FIXTURES / case["body"]).is_file()
    on_disk = {p.name for p in FIXTURES.glob("*.sse")}
    assert on_disk == {c["body"] for c in cases()}


def test_every_required_reason_is_covered() -> None:
    reasons = {c["reason"] for c in cases() if c["expect"] == "quarantine"}
    assert reasons >= REQUIRED_REASONS


@pytest.mark.parametrize("case", cases(), ids=case_ids())
def test_case_fields(case: dict[str, Any]) -> None:
    allowed = {
        "name", "body", "description", "expect", "reason", "calls", "text", "finish_reason",
        "transport", "then", "small", "litellm_differs", "via_litellm",
    }  # fmt: skip
    assert set(case) <= allowed
    for prefix, outcome in case.get("via_litellm", {}).items():
        assert case.get("litellm_differs") is True
        assert re.fullmatch(r"\d+\.\d+(\.\d+)?", prefix)
        assert outcome["expect"] in {"release", "quarantine"}
        if outcome["expect"] == "quarantine":
            QuarantineReason(outcome["reason"])
    assert isinstance(case["description"], str) and case["description"]
    assert "\n" not in case["description"]
    assert isinstance(case["text"], str)
    assert case["finish_reason"] is None or isinstance(case["finish_reason"], str)
    body = body_of(case)
    if case["expect"] == "release":
        assert "reason" not in case
        assert isinstance(case["calls"], list)
        for call in case["calls"]:
            assert set(call) == {"index", "id", "name", "arguments"}
        assert "transport" not in case
    else:
        assert case["expect"] == "quarantine"
        assert "calls" not in case
        QuarantineReason(case["reason"])  # raises for an unknown reason
    transport = case.get("transport")
    if transport is not None:
        assert len(transport) == 1
        ((kind, offset),) = transport.items()
        assert kind in {"disconnect_after", "stall_after"}
        assert 0 < offset < len(body)
    if "then" in case:
        follow = {c["name"]: c for c in cases()}[case["then"]]
        assert follow["expect"] == "release"
    assert case.get("small", False) == (transport is None and len(body) < SMALL_LIMIT)
    if case.get("small"):
        assert case["small"] is True


@pytest.mark.parametrize("case", cases(), ids=case_ids())
def test_bodies_end_with_done_unless_that_is_the_point(case: dict[str, Any]) -> None:
    body = body_of(case)
    ends_done = body.endswith((b"data: [DONE]\n\n", b"data: [DONE]\r\n\r\n", b"data: [DONE]\r\r"))
    if case["name"] in {"eof_without_finish_or_done", "finish_without_done", "data_after_done"}:
        assert not ends_done
    else:
        assert ends_done


# What the bodies carry, recomputed from the bytes


@pytest.mark.parametrize("case", cases(), ids=case_ids())
def test_manifest_matches_the_wire(case: dict[str, Any]) -> None:
    try:
        view = wire_view(served(case))
    except ValueError:  # JSONDecodeError and UnicodeDecodeError alike
        assert case.get("reason") in UNPARSEABLE, "only a broken-on-purpose body may fail"
        return
    assert view["text"] == case["text"]
    assert view["finish_reason"] == case["finish_reason"]
    if case["expect"] == "release":
        assert view["calls"] == case["calls"]


@pytest.mark.parametrize(
    "case", [c for c in cases() if c["expect"] == "release"], ids=lambda c: c["name"]
)
def test_released_calls_are_strict_objects_that_validate(case: dict[str, Any]) -> None:
    expect_finish = "tool_calls" if case["calls"] else "stop"
    assert case["finish_reason"] == expect_finish
    for call in case["calls"]:
        schema = tool_schema(call["name"])
        assert schema is not None
        value = strict_loads(call["arguments"])
        assert isinstance(value, dict)
        jsonschema.validate(value, schema)
        assert call["id"].startswith("call_")
        if call["name"] == "write_file":
            assert CANARY in call["arguments"]


def strict_loads(text: str) -> Any:
    """json.loads without NaN/Infinity and without duplicate keys."""

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [k for k, _ in items]
        if len(keys) != len(set(keys)):
            raise ValueError("duplicate key")
        return dict(items)

    def constant(name: str) -> Any:
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(text, object_pairs_hook=pairs, parse_constant=constant)


def depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    return 0


ARGUMENT_REASONS = {
    "invalid_json", "trailing_data", "not_an_object", "duplicate_key", "depth_exceeded",
    "schema_invalid", "unknown_tool",
}  # fmt: skip


@pytest.mark.parametrize(
    "case",
    [c for c in cases() if c.get("reason") in ARGUMENT_REASONS],
    ids=lambda c: c["name"],
)
def test_argument_faults_are_what_they_claim(case: dict[str, Any]) -> None:
    view = wire_view(body_of(case))
    assert view["finish_reason"] == "tool_calls"
    (call,) = view["calls"]
    args = call["arguments"]
    reason = case["reason"]
    if reason == "invalid_json":
        with pytest.raises(ValueError):
            strict_loads(args)
        return
    if reason == "trailing_data":
        value, end = json.JSONDecoder().raw_decode(args)
        assert isinstance(value, dict) and args[end:].strip()
        return
    value = strict_loads(args) if reason != "duplicate_key" else None
    if reason == "duplicate_key":
        with pytest.raises(ValueError, match="duplicate key"):
            strict_loads(args)
    elif reason == "not_an_object":
        assert not isinstance(value, dict)
    elif reason == "depth_exceeded":
        assert depth(value) == 70
    elif reason == "unknown_tool":
        assert tool_schema(call["name"]) is None
    else:
        schema = tool_schema(call["name"])
        assert schema is not None
        assert not jsonschema.Draft202012Validator(schema).is_valid(value)


# Specific wire features the fixtures promise


def _by_name(name: str) -> bytes:
    return body_of({c["name"]: c for c in cases()}[name])


def test_wire_features_are_present() -> None:
    assert b"\n" not in _by_name("cr_line_endings")
    assert b"\r" in _by_name("cr_line_endings")
    crlf = _by_name("crlf_line_endings")
    assert crlf.count(b"\r\n") == crlf.count(b"\n") > 0
    assert _by_name("utf8_bom").startswith(b"\xef\xbb\xbf")
    assert b"\n: keep-alive\n" in _by_name("sse_comments")
    assert b"event: ping\ndata: {}\n\n" in _by_name("unknown_event_ping")
    assert b"\xe2\x80\xa8" in _by_name("raw_u2028_in_string")
    split = [m for m in sse_messages(_by_name("data_split_lines")) if "\n" in m[1]]
    assert len(split) == 1
    with pytest.raises(UnicodeDecodeError):
        _by_name("invalid_utf8").decode("utf-8")
    with pytest.raises(json.JSONDecodeError):
        wire_view(_by_name("malformed_data_line"))
    assert "[1]" in [data for _event, data in sse_messages(_by_name("data_not_object"))]
    for raw in (_by_name("write_file_unicode"),):
        for needle in ("\u00e9", "\U0001f600", "\u65e5"):
            assert needle.encode() in raw


@pytest.mark.parametrize("case", cases(), ids=case_ids())
def test_first_delta_is_the_assistant_role(case: dict[str, Any]) -> None:
    raw = body_of(case)
    first_line = raw.removeprefix(b"\xef\xbb\xbf").splitlines()[0]
    assert first_line.startswith((b"data: {", b": keep-alive"))
    if first_line.startswith(b": "):
        first_line = next(ln for ln in raw.splitlines() if ln.startswith(b"data: "))
    chunk = json.loads(first_line.removeprefix(b"data: "))
    assert chunk["object"] == "chat.completion.chunk"
    assert chunk["choices"][0]["delta"]["role"] == "assistant"


def test_interleaved_fragments_alternate() -> None:
    for name in ("two_calls_interleaved", "two_tools_interleaved"):
        order = []
        for _event, data in sse_messages(_by_name(name)):
            if data == "[DONE]":
                continue
            for choice in json.loads(data)["choices"]:
                for frag in choice["delta"].get("tool_calls") or []:
                    order.append(frag["index"])
        assert order[:6] == [0, 1, 0, 1, 0, 1]


def test_canary_is_in_every_non_multiply_call() -> None:
    for case in cases():
        if case.get("reason") in UNPARSEABLE:
            assert CANARY.encode() in body_of(case) or case["reason"] == "malformed_event"
            continue
        view = wire_view(body_of(case))
        for call in view["calls"]:
            if call["name"] != "multiply" and call["arguments"]:
                assert CANARY in call["arguments"], case["name"]
    write_file_cases = [c for c in cases() if b'"write_file"' in body_of(c)]
    assert len(write_file_cases) >= 10


def test_multiply_release_calls_hold_no_canary() -> None:
    for case in cases():
        for call in case.get("calls", []):
            if call["name"] == "multiply":
                assert CANARY not in call["arguments"]


def test_recordings() -> None:
    round1 = (RECORDINGS / "round1_multiply.sse").read_bytes()
    view = wire_view(round1)
    assert view["text"] == "Let me multiply those."
    assert view["finish_reason"] == "tool_calls"
    (call,) = view["calls"]
    assert call["name"] == "multiply"
    assert json.loads(call["arguments"]) == {"a": 7, "b": 8}
    assert round1.endswith(b"data: [DONE]\n\n")
    broken = (RECORDINGS / "broken_truncated.sse").read_bytes()
    view = wire_view(broken)
    assert view["finish_reason"] is None
    (call,) = view["calls"]
    assert call["name"] == "write_file"
    assert CANARY in call["arguments"]
    with pytest.raises(ValueError):
        json.loads(call["arguments"])
    assert broken.endswith(b"data: [DONE]\n\n")


# Reproducibility


def test_generate_reproduces_the_committed_files(tmp_path: Path) -> None:
    out, rec = tmp_path / "chat", tmp_path / "recordings"
    subprocess.run(
        [
            sys.executable,
            str(FIXTURES / "generate.py"),
            "--out",
            str(out),
            "--recordings",
            str(rec),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    generated = {p.name for p in out.iterdir()}
    committed = {p.name for p in FIXTURES.iterdir() if p.suffix in {".sse", ".json"}}
    assert generated == committed
    for name in sorted(generated):
        assert (out / name).read_bytes() == (FIXTURES / name).read_bytes(), name
    recorded = {p.name for p in rec.iterdir()}
    assert recorded == {"round1_multiply.sse", "broken_truncated.sse"}
    for name in recorded:
        assert (rec / name).read_bytes() == (RECORDINGS / name).read_bytes(), name
