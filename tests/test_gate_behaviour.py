"""ToolGate's behaviour through the real litellm: policy, non-streamed bodies, guard, logs."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

import httpx
import litellm
import pytest
import respx
from conftest import CANARY, CASES, MANIFEST, Pieces, body_of
from litellm.llms.custom_httpx.http_handler import HTTPHandler

from litellm_toolgate import (
    GateConfigError,
    Limits,
    PolicyDecision,
    PolicyDenied,
    QuarantineReason,
    ToolCall,
    ToolCallQuarantined,
    ToolGate,
    WireNotObservable,
)

litellm.suppress_debug_info = True
# respx answers at httpx's edge: litellm's async handlers on httpx (conftest).
pytestmark = pytest.mark.usefixtures("litellm_on_httpx")
URL = "http://upstream.test/v1/chat/completions"
BASE: dict[str, Any] = {
    "model": "cometapi/gpt-4o-mini",
    "messages": [{"role": "user", "content": "go"}],
    "api_base": "http://upstream.test/v1",
    "api_key": "sk-test",
}
R = QuarantineReason


def sse_route(router: respx.MockRouter, body: bytes) -> respx.Route:
    return router.post(URL).mock(
        side_effect=lambda request: httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=Pieces([body])
        )
    )


def tool_chunks(chunks: list[Any]) -> list[Any]:
    return [tc for c in chunks for ch in c.choices for tc in (ch.delta.tool_calls or [])]


def stream_all(gate: ToolGate, case: str, **extra: Any) -> list[Any]:
    with respx.mock as router:
        sse_route(router, body_of(CASES[case]))
        return list(gate.completion(stream=True, **{**BASE, **extra}))


# ---- policy ---------------------------------------------------------------------------------
def test_policy_sees_parsed_arguments_and_can_deny() -> None:
    seen: list[ToolCall] = []

    def policy(call: ToolCall) -> PolicyDecision:
        seen.append(call)
        return PolicyDecision.deny("no multiplying today")

    gate = ToolGate(MANIFEST["tools"], policy=policy)
    with pytest.raises(PolicyDenied) as info:
        stream_all(gate, "multiply_basic")
    assert info.value.reason is R.POLICY_DENIED
    assert [(c.name, dict(c.arguments)) for c in seen] == [("multiply", {"a": 7, "b": 8})]
    assert "arguments" not in repr(seen[0])
    assert info.value.records[0].policy_status == "denied"
    assert info.value.records[0].policy_reason == "no multiplying today"


def test_policy_that_raises_is_a_policy_error_and_not_chained() -> None:
    def policy(call: ToolCall) -> bool:
        raise ValueError(f"bad path {call.arguments}")

    gate = ToolGate(MANIFEST["tools"], policy=policy)
    with pytest.raises(ToolCallQuarantined) as info:
        stream_all(gate, "multiply_basic")
    assert info.value.reason is R.POLICY_ERROR
    assert info.value.__context__ is None and info.value.__cause__ is None


def test_policy_answer_of_wrong_type_is_a_policy_error() -> None:
    gate = ToolGate(MANIFEST["tools"], policy=lambda call: "yes")  # type: ignore[arg-type,return-value]
    with pytest.raises(ToolCallQuarantined) as info:
        stream_all(gate, "multiply_basic")
    assert info.value.reason is R.POLICY_ERROR


def test_async_policy_runs_from_sync_completion() -> None:
    async def policy(call: ToolCall) -> bool:
        await asyncio.sleep(0)
        return call.arguments["a"] == 7

    released = tool_chunks(stream_all(ToolGate(MANIFEST["tools"], policy=policy), "multiply_basic"))
    assert [tc.function.name for tc in released] == ["multiply"]


def test_async_policy_in_acompletion_approves_each_call() -> None:
    names: list[str] = []

    async def policy(call: ToolCall) -> PolicyDecision:
        names.append(call.call_id)
        return PolicyDecision.approve()

    gate = ToolGate(MANIFEST["tools"], policy=policy)

    async def go() -> list[Any]:
        with respx.mock as router:
            sse_route(router, body_of(CASES["two_calls_interleaved"]))
            return [c async for c in await gate.acompletion(stream=True, **BASE)]

    chunks = asyncio.run(go())
    assert [tc.id for tc in tool_chunks(chunks)] == names
    assert len(names) == 2


# ---- registry from the request -----------------------------------------------------------------
def test_request_tools_are_the_registry_when_the_gate_says_so() -> None:
    gate = ToolGate("request")
    with pytest.raises(ToolCallQuarantined) as info:
        stream_all(gate, "multiply_basic")  # the request names no tools: multiply is unknown
    assert info.value.reason is R.UNKNOWN_TOOL
    assert info.value.records[0].tool_name is None
    released = tool_chunks(stream_all(gate, "multiply_basic", tools=MANIFEST["tools"]))
    assert [tc.function.name for tc in released] == ["multiply"]


def test_tool_categories_replace_names_in_records(caplog: pytest.LogCaptureFixture) -> None:
    gate = ToolGate(MANIFEST["tools"], tool_categories={"multiply": "arithmetic"})
    with caplog.at_level(logging.INFO, logger="litellm_toolgate"):
        stream_all(gate, "multiply_basic")
    records = [r.toolgate for r in caplog.records if hasattr(r, "toolgate")]
    assert [r["tool_name"] for r in records] == ["arithmetic"]
    assert records[0]["execution_state"] == "released"


# ---- released chunks are usable as litellm chunks ----------------------------------------------
def test_released_chunks_rebuild_with_stream_chunk_builder() -> None:
    chunks = stream_all(ToolGate(MANIFEST["tools"]), "two_calls_interleaved")
    rebuilt = litellm.stream_chunk_builder(chunks)
    calls = rebuilt.choices[0].message.tool_calls
    expected = CASES["two_calls_interleaved"]["calls"]
    assert [(c.id, c.function.name, c.function.arguments) for c in calls] == [
        (e["id"], e["name"], e["arguments"]) for e in expected
    ]
    assert rebuilt.choices[0].finish_reason == "tool_calls"


# ---- logs carry no argument text ---------------------------------------------------------------
@pytest.mark.parametrize("case", [c["name"] for c in MANIFEST["cases"] if "transport" not in c])
def test_no_argument_text_in_any_log_record(case: str, caplog: pytest.LogCaptureFixture) -> None:
    gate = ToolGate(MANIFEST["tools"])
    with caplog.at_level(logging.DEBUG), contextlib.suppress(ToolCallQuarantined):
        stream_all(gate, case)
    ours = [r for r in caplog.records if r.name == "litellm_toolgate"]
    assert ours, "the gate logs a decision for every attempt"
    # litellm's own DEBUG logging prints its deltas; that is litellm's, and the README says
    # so. Every other logger, the gate's included, must stay clean.
    for record in caplog.records:
        if record.name.lower().startswith("litellm") and record.name != "litellm_toolgate":
            continue
        assert CANARY not in record.getMessage()
        assert CANARY not in json.dumps(getattr(record, "toolgate", {}))


# ---- cancellation -----------------------------------------------------------------------------
def test_closing_a_stream_early_releases_nothing_and_records_cancelled(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gate = ToolGate(MANIFEST["tools"])
    with caplog.at_level(logging.INFO, logger="litellm_toolgate"), respx.mock as router:
        sse_route(router, body_of(CASES["multiply_basic"]))
        with gate.completion(stream=True, **BASE) as stream:
            first = next(stream)
        assert not tool_chunks([first])
        with pytest.raises(ToolCallQuarantined) as info:
            next(stream)
    assert info.value.reason is R.CANCELLED
    states = [r.toolgate.get("error_class") for r in caplog.records if hasattr(r, "toolgate")]
    assert states and set(states) == {"cancelled"}


class _Hangs(httpx.AsyncByteStream):
    """Serves the first ``n`` bytes, then hangs as a stalled upstream would."""

    def __init__(self, body: bytes, n: int) -> None:
        self.body, self.n = body, n

    async def __aiter__(self) -> Any:
        yield self.body[: self.n]
        await asyncio.sleep(30)


def test_cancelling_a_task_waiting_on_the_stream_releases_nothing() -> None:
    gate = ToolGate(MANIFEST["tools"])
    body = body_of(CASES["multiply_basic"])
    got: list[Any] = []

    async def go() -> Any:
        with respx.mock as router:
            router.post(URL).mock(
                side_effect=lambda request: httpx.Response(
                    200,
                    headers={"content-type": "text/event-stream"},
                    stream=_Hangs(body, len(body) - 40),
                )
            )
            stream = await gate.acompletion(stream=True, **BASE)

            async def consume() -> None:
                async for chunk in stream:
                    got.append(chunk)

            task = asyncio.create_task(consume())
            # Cancel once text has arrived and the stream waits on the stalled upstream.
            for _ in range(1000):
                if got:
                    break
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return stream

    stream = asyncio.run(go())
    assert got, "text before the stall was streamed live"
    assert stream.attempt.quarantined is not None
    assert stream.attempt.quarantined.reason is R.CANCELLED
    assert tool_chunks(got) == []


def test_leaving_async_with_early_records_cancelled() -> None:
    gate = ToolGate(MANIFEST["tools"])

    async def go() -> Any:
        with respx.mock as router:
            sse_route(router, body_of(CASES["multiply_basic"]))
            async with await gate.acompletion(stream=True, **BASE) as stream:
                await stream.__anext__()
            return stream

    stream = asyncio.run(go())
    assert stream.attempt.quarantined.reason is R.CANCELLED


# ---- non-streamed responses ---------------------------------------------------------------
def completion_body(tool_calls: list[dict[str, Any]] | None, finish: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None if tool_calls else "hi"}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def call(arguments: str, name: str = "write_file", cid: str = "call_1") -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}


GOOD_ARGS = json.dumps({"path": f"src/{CANARY}.py", "content": "print('hi')\n"})
NON_STREAM = [
    ("released", completion_body([call(GOOD_ARGS)], "tool_calls"), None),
    ("text only", completion_body(None, "stop"), None),
    ("trailing", completion_body([call(GOOD_ARGS + "{}")], "tool_calls"), R.TRAILING_DATA),
    (
        "schema",
        completion_body([call(json.dumps({"path": CANARY}))], "tool_calls"),
        R.SCHEMA_INVALID,
    ),
    ("finish stop", completion_body([call(GOOD_ARGS)], "stop"), R.FINISH_REASON_MISMATCH),
    ("unknown tool", completion_body([call(GOOD_ARGS, name="rm")], "tool_calls"), R.UNKNOWN_TOOL),
    (
        "same id twice",
        completion_body([call(GOOD_ARGS), call(GOOD_ARGS)], "tool_calls"),
        R.IDENTITY_CONFLICT,
    ),
    (
        "two choices",
        {
            **completion_body(None, "stop"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "a"},
                    "finish_reason": "stop",
                },
                {
                    "index": 1,
                    "message": {"role": "assistant", "content": "b"},
                    "finish_reason": "stop",
                },
            ],
        },
        R.UNEXPECTED_CHOICE,
    ),
]


@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize(("label", "payload", "reason"), NON_STREAM, ids=[n[0] for n in NON_STREAM])
def test_non_streamed_responses_are_checked_before_return(
    label: str, payload: dict[str, Any], reason: QuarantineReason | None, asynchronous: bool
) -> None:
    gate = ToolGate(MANIFEST["tools"])

    async def go() -> Any:
        with respx.mock as router:
            router.post(URL).mock(return_value=httpx.Response(200, json=payload))
            if asynchronous:
                return await gate.acompletion(**BASE)
            return gate.completion(**BASE)

    if reason is None:
        response = asyncio.run(go())
        calls = response.choices[0].message.tool_calls or []
        assert [c.function.arguments for c in calls] == [
            c["function"]["arguments"]
            for c in payload["choices"][0]["message"].get("tool_calls", [])
        ]
        return
    with pytest.raises(ToolCallQuarantined) as info:
        asyncio.run(go())
    assert info.value.reason is reason
    assert CANARY not in str(info.value) + repr(info.value.args)
    assert info.value.__context__ is None


def test_non_streamed_body_that_is_not_json_is_refused() -> None:
    gate = ToolGate(MANIFEST["tools"])
    with respx.mock as router:
        router.post(URL).mock(
            return_value=httpx.Response(
                200, text="<html>oops</html>", headers={"content-type": "text/html"}
            )
        )
        with pytest.raises(Exception) as info:
            gate.completion(**BASE)
    assert isinstance(info.value, ToolCallQuarantined)
    assert info.value.reason is R.UNSUPPORTED_WIRE


# ---- guard and clients -------------------------------------------------------------------------
def test_guard_gates_a_stream_made_with_the_gates_client() -> None:
    gate = ToolGate(MANIFEST["tools"])
    with respx.mock as router:
        sse_route(router, body_of(CASES["args_trailing_value"]))
        client = gate.http_client()
        stream = litellm.completion(stream=True, client=client, **BASE)
        with pytest.raises(ToolCallQuarantined) as info:
            for chunk in gate.guard(stream, client):
                assert not tool_chunks([chunk])
    assert info.value.reason is R.TRAILING_DATA


def test_guard_refuses_a_stream_it_cannot_observe() -> None:
    gate = ToolGate(MANIFEST["tools"])
    with respx.mock as router:
        sse_route(router, body_of(CASES["multiply_basic"]))
        stream = litellm.completion(stream=True, **BASE)
        with pytest.raises(WireNotObservable) as info:
            gate.guard(stream)
    assert "gate.completion" in str(info.value)


def test_guard_refuses_a_stream_already_partly_handed_out() -> None:
    gate = ToolGate(MANIFEST["tools"])
    with respx.mock as router:
        sse_route(router, body_of(CASES["multiply_basic"]))
        client = gate.http_client()
        stream = litellm.completion(stream=True, client=client, **BASE)
        next(iter(stream))
        with pytest.raises(WireNotObservable):
            gate.guard(stream, client)


def test_a_callers_own_http_handler_is_wrapped_not_bypassed() -> None:
    gate = ToolGate(MANIFEST["tools"])
    mine = HTTPHandler(client=httpx.Client())
    chunks = stream_all(gate, "multiply_basic", client=mine)
    assert [tc.function.name for tc in tool_chunks(chunks)] == ["multiply"]


def test_an_unobservable_client_is_refused_at_once() -> None:
    gate = ToolGate(MANIFEST["tools"])
    with pytest.raises(WireNotObservable):
        gate.completion(stream=True, client=object(), **BASE)


def test_repr_names_no_tools_or_policy_internals() -> None:
    assert repr(ToolGate(MANIFEST["tools"])) == "ToolGate(2 tools, policy=none)"


def test_a_stream_whose_wire_was_never_seen_is_refused_at_its_end() -> None:
    # The client handed to guard() is not the one litellm used: the gate saw no wire, so it
    # withholds the call and refuses the stream rather than trust litellm's chunks.
    gate = ToolGate(MANIFEST["tools"])
    with respx.mock as router:
        sse_route(router, body_of(CASES["multiply_basic"]))
        stream = litellm.completion(stream=True, **BASE)
        chunks: list[Any] = []
        with pytest.raises(ToolCallQuarantined) as info:
            for chunk in gate.guard(stream, gate.http_client()):
                chunks.append(chunk)
    assert info.value.reason is R.WIRE_NOT_OBSERVED
    assert chunks and tool_chunks(chunks) == []


# ---- the remaining edge paths ---------------------------------------------------------------
def test_a_callers_own_async_handler_is_wrapped_not_bypassed() -> None:
    from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler

    gate = ToolGate(MANIFEST["tools"])

    async def go() -> list[Any]:
        mine = AsyncHTTPHandler(transport=httpx.AsyncHTTPTransport())
        with respx.mock as router:
            sse_route(router, body_of(CASES["multiply_basic"]))
            stream = await gate.acompletion(stream=True, client=mine, **BASE)
            return [c async for c in stream]

    assert [tc.function.name for tc in tool_chunks(asyncio.run(go()))] == ["multiply"]


def test_guard_passes_a_gated_stream_through_and_gates_async_streams() -> None:
    gate = ToolGate(MANIFEST["tools"])
    with respx.mock as router:
        sse_route(router, body_of(CASES["multiply_basic"]))
        gated = gate.completion(stream=True, **BASE)
        assert gate.guard(gated) is gated
        gated.close()

    async def go() -> list[Any]:
        with respx.mock as router:
            sse_route(router, body_of(CASES["two_calls_interleaved"]))
            client = gate.async_http_client()
            stream = await litellm.acompletion(stream=True, client=client, **BASE)
            return [c async for c in gate.guard(stream, client)]

    released = tool_chunks(asyncio.run(go()))
    assert [tc.id for tc in released] == [c["id"] for c in CASES["two_calls_interleaved"]["calls"]]


def test_async_policy_that_raises_or_denies_in_acompletion() -> None:
    async def raises(call: ToolCall) -> bool:
        raise RuntimeError(str(call.arguments))

    async def denies(call: ToolCall) -> PolicyDecision:
        return PolicyDecision.deny("not now")

    for policy, reason in ((raises, R.POLICY_ERROR), (denies, R.POLICY_DENIED)):
        gate = ToolGate(MANIFEST["tools"], policy=policy)

        async def go(g: ToolGate = gate) -> list[Any]:
            with respx.mock as router:
                sse_route(router, body_of(CASES["multiply_basic"]))
                return [c async for c in await g.acompletion(stream=True, **BASE)]

        with pytest.raises(ToolCallQuarantined) as info:
            asyncio.run(go())
        assert info.value.reason is reason
        assert info.value.__context__ is None


def test_async_policy_behind_sync_completion_inside_a_running_loop_is_refused() -> None:
    async def policy(call: ToolCall) -> bool:
        return True

    gate = ToolGate(MANIFEST["tools"], policy=policy)

    async def go() -> None:
        # Sync code on an event loop cannot wait for the async policy: fail closed.
        stream_all(gate, "multiply_basic")

    with pytest.raises(ToolCallQuarantined) as info:
        asyncio.run(go())
    assert info.value.reason is R.POLICY_ERROR


@pytest.mark.parametrize("asynchronous", [False, True])
def test_non_streamed_http_error_is_litellms_and_oversized_body_is_refused(
    asynchronous: bool,
) -> None:
    gate = ToolGate(MANIFEST["tools"], limits=Limits(max_body_bytes=64))

    async def go(response: httpx.Response) -> Any:
        with respx.mock as router:
            router.post(URL).mock(return_value=response)
            if asynchronous:
                return await gate.acompletion(**BASE)
            return gate.completion(**BASE)

    with pytest.raises(litellm.InternalServerError):
        asyncio.run(go(httpx.Response(500, json={"error": {"message": "boom"}})))
    payload = completion_body([call(GOOD_ARGS)], "tool_calls")
    with pytest.raises(ToolCallQuarantined) as info:
        asyncio.run(go(httpx.Response(200, json=payload)))
    assert info.value.reason is R.BODY_TOO_LARGE
    assert info.value.__context__ is None


def test_stream_exposes_its_attempt_id_matching_the_records() -> None:
    gate = ToolGate(MANIFEST["tools"])
    with respx.mock as router:
        sse_route(router, body_of(CASES["args_invalid_json"]))
        stream = gate.completion(stream=True, **BASE)
        with pytest.raises(ToolCallQuarantined) as info:
            list(stream)
    assert info.value.attempt_id == stream.attempt_id
    assert {r.attempt_id for r in info.value.records} == {stream.attempt_id}


@pytest.mark.parametrize(
    "bad",
    [
        {"tools": "multiply"},
        {"tools": [1]},
        {"policy": 3},
        {"limits": 5},
        {"tool_categories": 5},
        {"tool_categories": {"multiply": 1}},
        {"hmac_key": "a str, not bytes"},
        {"hmac_key": b"short"},
    ],
    ids=lambda bad: ",".join(f"{k}={v!r}"[:30] for k, v in bad.items()),
)
def test_bad_configuration_is_a_config_error_at_construction(bad: dict[str, Any]) -> None:
    with pytest.raises(GateConfigError):
        ToolGate(**bad)


def test_hmac_key_adds_a_keyed_digest_to_released_records(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import hashlib
    import hmac as hmac_mod

    key = b"k" * 32
    gate = ToolGate(MANIFEST["tools"], hmac_key=key)
    with caplog.at_level(logging.INFO, logger="litellm_toolgate"):
        stream_all(gate, "multiply_basic")
    (record,) = [r.toolgate for r in caplog.records if hasattr(r, "toolgate")]
    arguments = CASES["multiply_basic"]["calls"][0]["arguments"]
    assert (
        record["content_hmac"] == hmac_mod.new(key, arguments.encode(), hashlib.sha256).hexdigest()
    )
