"""``ToolGateGuardrail`` in ``litellm.callbacks``, against the real litellm on loopback.

The SDK routes: ``litellm.acompletion`` and ``litellm.completion`` streamed for every chat
fixture, and whole (the gate withholds on the wire itself; the outcome is the wire's, since
litellm is handed re-encoded messages it cannot mangle; the quarantine reaches the caller as
itself), the sync path's own edges in ``test_callback_sync.py``, decisions read back
from litellm's standard logging, the per-request table emptied
after success, quarantine and cancellation. The proxy's iterator hook is also driven in
process here (the hook the proxy calls, on a stream litellm made) to show its clean-up when
the client goes away; ``test_proxy_e2e.py`` drives a real proxy. And the YAML settings.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import litellm
import pytest
from conftest import CANARY, CASES, MANIFEST, body_of, no_leak
from litellm.integrations.custom_logger import CustomLogger

from litellm_toolgate import (
    GateConfigError,
    GuardrailConfigError,
    Limits,
    PolicyDecision,
    QuarantineReason,
    ToolCallQuarantined,
    ToolGateGuardrail,
    find_quarantine,
)
from litellm_toolgate.demo.serve import as_requested, json_body_of
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted

litellm.suppress_debug_info = True
EXAMPLES = Path(__file__).resolve().parent.parent / "config_examples"
R = QuarantineReason


class Standard(CustomLogger):
    """Reads what the gate put into litellm's standard logging."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, Any]] = []

    def _keep(self, kind: str, kwargs: Any) -> None:
        payload = kwargs.get("standard_logging_object") or {}
        self.seen.append((kind, payload.get("guardrail_information")))

    async def async_log_success_event(
        self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        self._keep("success", kwargs)

    async def async_log_failure_event(
        self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        self._keep("failure", kwargs)

    def log_success_event(
        self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        self._keep("success", kwargs)

    def log_failure_event(
        self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        self._keep("failure", kwargs)


def _scripted(request: dict[str, Any]) -> Scripted:
    name = str(request["messages"][-1]["content"])
    if name == "http-500":
        return Scripted(
            b'{"error": {"message": "down"}}', status=500, content_type="application/json"
        )
    case = CASES[name]
    transport = case.get("transport", {})
    return as_requested(
        request,
        body_of(case),
        disconnect_after=transport.get("disconnect_after"),
        stall_after=transport.get("stall_after"),
    )


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream(_scripted) as server:
        yield server


@pytest.fixture(autouse=True)
def _unregister() -> Iterator[None]:
    """litellm copies ``litellm.callbacks`` into lists of its own; take the gates out of all."""
    yield
    from litellm_toolgate.edge.sync import claiming as synccall

    assert len(synccall.CLAIMS) == 0, "a sync call's claim was left behind"
    for name in dir(litellm):
        value = getattr(litellm, name, None)
        if isinstance(value, list):
            value[:] = [cb for cb in value if not isinstance(cb, (ToolGateGuardrail, Standard))]
    # litellm keeps callbacks it saw in lists of its own (litellm.utils' callback_list):
    # close every gate this test built, so the next test finds the process as it was.
    for made in [o for o in gc.get_objects() if isinstance(o, ToolGateGuardrail)]:
        made.close()


@pytest.fixture
def gate() -> Iterator[ToolGateGuardrail]:
    gate = ToolGateGuardrail(MANIFEST["tools"], limits=Limits(idle_timeout=1))
    saved = litellm.callbacks
    litellm.callbacks = [gate]
    try:
        yield gate
    finally:
        litellm.callbacks = saved


# The routes the SDK tests run on: litellm's own HTTP handler, and two OpenAI SDK routes.
ROUTES = ["cometapi", "openai", "azure"]


def _kwargs(
    upstream: FakeUpstream, name: str, route: str = "cometapi", **extra: Any
) -> dict[str, Any]:
    where: dict[str, Any] = {"model": f"{route}/gpt-4o-mini", "api_base": upstream.base_url}
    if route == "azure":
        where.update(api_base=upstream.base_url.removesuffix("/v1"), api_version="2024-10-21")
    return {
        **where,
        "messages": [{"role": "user", "content": name}],
        "api_key": "sk-test",
        "num_retries": 0,
        **extra,
    }


async def _stream(
    upstream: FakeUpstream, name: str, route: str = "cometapi"
) -> tuple[list[Any], BaseException | None]:
    chunks: list[Any] = []
    try:
        async for chunk in await litellm.acompletion(**_kwargs(upstream, name, route, stream=True)):
            chunks.append(chunk)
    except Exception as exc:
        return chunks, exc
    return chunks, None


def _sync_stream(
    upstream: FakeUpstream, name: str, route: str = "cometapi"
) -> tuple[list[Any], BaseException | None]:
    chunks: list[Any] = []
    try:
        for chunk in litellm.completion(**_kwargs(upstream, name, route, stream=True)):
            chunks.append(chunk)
    except Exception as exc:
        return chunks, exc
    return chunks, None


def _calls(chunks: list[Any]) -> list[dict[str, Any]]:
    calls: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            for tc in choice.delta.tool_calls or []:
                call = calls.setdefault(
                    tc.index, {"index": tc.index, "id": None, "name": None, "arguments": ""}
                )
                call["id"] = call["id"] or tc.id
                call["name"] = call["name"] or tc.function.name
                call["arguments"] += tc.function.arguments or ""
    return [calls[i] for i in sorted(calls)]


# Sync calls are claimed on the wire: on litellm's own HTTP handler (litellm.sync_transport)
# and, for streams on the OpenAI SDK routes, on the SDK client's httpx client (sdkclaim).
MODES = [(mode, r) for mode in ("async", "sync") for r in ROUTES]
# Every fixture on every route, sync and async: 306 litellm calls, the slowest file of the
# suite. With TOOLGATE_MATRIX=rotate (CI's lane on litellm 1.110.2, whose other lane runs the
# whole matrix on 1.108.7) each fixture runs sync and async on one route, the routes taken in
# turn, so every fixture and every route is still met on that version.
MATRIX = os.environ.get("TOOLGATE_MATRIX", "full")
if MATRIX not in ("full", "rotate"):
    raise ValueError(f"TOOLGATE_MATRIX must be 'full' or 'rotate', not {MATRIX!r}")
ROTATE = MATRIX == "rotate"
FIXTURE_MODES = [
    pytest.param(name, mode, route, id=f"{name}-{mode}-{route}")
    for position, name in enumerate(sorted(CASES))
    for mode, route in MODES
    if not ROTATE or route == ROUTES[position % len(ROUTES)]
]


@pytest.mark.parametrize(("name", "mode", "route"), FIXTURE_MODES)
def test_completion_stream_gates_every_fixture(
    upstream: FakeUpstream, gate: ToolGateGuardrail, name: str, mode: str, route: str
) -> None:
    case = CASES[name]
    if mode == "async":
        chunks, error = asyncio.run(_stream(upstream, name, route))
    else:
        chunks, error = _sync_stream(upstream, name, route)
    text = "".join(c.delta.content or "" for chunk in chunks for c in chunk.choices)
    if case["expect"] == "release":
        assert error is None, f"{name}: {error!r}"
        assert _calls(chunks) == case["calls"]
        assert text == case["text"]
    else:
        # The quarantine itself reaches the caller, in its family, through litellm.
        assert isinstance(error, ToolCallQuarantined), f"{name}: {error!r}"
        assert isinstance(error, R(case["reason"]).family)
        assert error.reason is R(case["reason"])
        assert find_quarantine(error) is error
        assert _calls(chunks) == [], "a tool-call fragment reached the caller"
        assert case["text"].startswith(text)
        no_leak(error, records=False)
    assert gate.pending == 0


def test_acompletion_stream_closed_early_releases_nothing(
    upstream: FakeUpstream, gate: ToolGateGuardrail, caplog: pytest.LogCaptureFixture
) -> None:
    async def first_then_close() -> list[Any]:
        stream = await litellm.acompletion(
            **_kwargs(upstream, "two_tools_interleaved", stream=True)
        )
        chunks = []
        async for chunk in stream:
            chunks.append(chunk)
            break
        await stream.aclose()
        return chunks

    with caplog.at_level("INFO", logger="litellm_toolgate"):
        chunks = asyncio.run(first_then_close())
    assert _calls(chunks) == []
    outcomes = [getattr(r, "toolgate", {}).get("error_class") for r in caplog.records]
    assert outcomes and set(outcomes) == {"cancelled"}


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize(
    "name", ["multiply_basic", "two_tools_interleaved", "args_invalid_json", "unknown_tool"]
)
def test_acompletion_whole_response(
    upstream: FakeUpstream, gate: ToolGateGuardrail, name: str, route: str
) -> None:
    case = CASES[name]

    async def call() -> Any:
        return await litellm.acompletion(**_kwargs(upstream, name, route))

    if case["expect"] == "release":
        message = asyncio.run(call()).choices[0].message
        got = [
            {"index": i, "id": t.id, "name": t.function.name, "arguments": t.function.arguments}
            for i, t in enumerate(message.tool_calls or [])
        ]
        assert got == case["calls"]
    else:
        with pytest.raises(ToolCallQuarantined) as caught:
            asyncio.run(call())
        assert caught.value.reason is R(case["reason"])
        no_leak(caught.value, records=False)
    assert gate.pending == 0


@pytest.mark.parametrize("mode", ["async", "sync"])
def test_decisions_reach_litellm_standard_logging(
    upstream: FakeUpstream, gate: ToolGateGuardrail, mode: str
) -> None:
    reader = Standard()
    litellm.callbacks = [gate, reader]

    async def both() -> None:
        for name in ("two_tools_interleaved", "args_invalid_json"):
            if mode == "async":
                await _stream(upstream, name)
        for _ in range(100):  # litellm logs from background tasks
            if len(reader.seen) >= 2:
                break
            await asyncio.sleep(0.05)

    if mode == "sync":
        for name in ("two_tools_interleaved", "args_invalid_json"):
            _sync_stream(upstream, name)
    asyncio.run(both())
    # One success and one failure; a sync call's success is logged from litellm's worker
    # thread, so the second call's failure may be logged first.
    assert sorted(kind for kind, _ in reader.seen) == ["failure", "success"]
    by_kind = {kind: info[0] for kind, info in reader.seen}
    released, quarantined = by_kind["success"], by_kind["failure"]
    assert released["guardrail_name"] == "toolgate"
    assert released["guardrail_status"] == "success"
    records = released["guardrail_response"]["records"]
    assert [r["tool_name"] for r in records] == ["multiply", "write_file"]
    assert {r["execution_state"] for r in records} == {"released"}
    assert quarantined["guardrail_status"] == "guardrail_intervened"
    assert quarantined["guardrail_response"]["reason"] == "invalid_json"
    assert quarantined["guardrail_response"]["records"][0]["json_status"] == "invalid"
    assert CANARY not in json.dumps(reader.seen, default=str)


def test_a_subclass_stays_gated() -> None:
    class Mine(ToolGateGuardrail):
        pass

    hook = "async_post_call_streaming_iterator_hook"
    assert hook in Mine.__dict__  # what the proxy looks for
    assert Mine.__dict__[hook] is ToolGateGuardrail.__dict__[hook]
    with pytest.raises(GateConfigError, match=hook):

        class Ungated(ToolGateGuardrail):
            async def async_post_call_streaming_iterator_hook(  # type: ignore[override]
                self, user_api_key_dict: Any, response: Any, request_data: Any
            ) -> Any:
                async for chunk in response:
                    yield chunk


# ---- the proxy's iterator hook, driven in process --------------------------------------------
async def _proxy_stream(
    gate: ToolGateGuardrail, upstream: FakeUpstream, name: str, *, take: int | None = None
) -> tuple[list[Any], BaseException | None]:
    kwargs = _kwargs(upstream, name, stream=True)
    kwargs.update(litellm_call_id=f"call-{name}", proxy_server_request={"body": {}})
    kwargs = await gate.async_pre_call_deployment_hook(kwargs, "acompletion") or kwargs
    assert gate.pending == 1
    litellm.callbacks = []  # the hook already ran; litellm must not run it again
    response = await litellm.acompletion(**kwargs)
    # The proxy hands its later hooks the request's own metadata, where the gate left its key.
    request_data: dict[str, Any] = {
        "litellm_call_id": kwargs["litellm_call_id"],
        "metadata": kwargs["metadata"],
    }
    hook = gate.async_post_call_streaming_iterator_hook(None, response, request_data)
    chunks: list[Any] = []
    try:
        async for chunk in hook:
            chunks.append(chunk)
            if take is not None and len(chunks) >= take:
                await hook.aclose()  # what the proxy does when its client goes away
                break
    except ToolCallQuarantined as exc:
        return chunks, exc
    return chunks, None


@pytest.mark.parametrize(
    ("name", "take", "reason"),
    [
        ("two_tools_interleaved", None, None),
        ("args_invalid_json", None, R.INVALID_JSON),
        ("two_tools_interleaved", 2, None),
    ],
    ids=["released", "quarantined", "client-went-away"],
)
def test_proxy_hook_leaves_nothing_behind(
    upstream: FakeUpstream, name: str, take: int | None, reason: Any
) -> None:
    gate = ToolGateGuardrail(MANIFEST["tools"])
    chunks, error = asyncio.run(_proxy_stream(gate, upstream, name, take=take))
    assert gate.pending == 0
    if take is not None:
        assert _calls(chunks) == []
    elif reason is None:
        assert error is None and _calls(chunks) == CASES[name]["calls"]
    else:
        assert isinstance(error, ToolCallQuarantined) and error.reason is reason
        assert _calls(chunks) == []


@pytest.mark.parametrize(
    ("name", "take"),
    [("two_tools_interleaved", None), ("text_only", None), ("two_tools_interleaved", 2)],
    ids=["released", "text", "client-went-away"],
)
def test_proxy_hook_lets_a_decided_attempt_go_at_one_collection(
    upstream: FakeUpstream, name: str, take: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A proxy stream's attempt (and the argument bytes it holds) is gone after one
    collection once its stream is done. The tap and its body held each other, and the body's
    slicing generator, left suspended, was finalized through the event loop: the attempt
    outlived a full collection (on both litellm versions). A quarantined attempt is still
    held until a later collection, through its exception's traceback."""
    gate = ToolGateGuardrail(MANIFEST["tools"])
    made: list[weakref.ref[Any]] = []
    new_attempt = gate.gate.new_attempt

    def tracked(**kwargs: Any) -> Any:
        attempt = new_attempt(**kwargs)
        made.append(weakref.ref(attempt))
        return attempt

    monkeypatch.setattr(gate.gate, "new_attempt", tracked)
    chunks, error = asyncio.run(_proxy_stream(gate, upstream, name, take=take))
    assert error is None and chunks
    del chunks
    gc.collect()
    assert len(made) == 1 and made[0]() is None, "the decided attempt outlived a collection"


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_proxy_failure_hook_forgets_a_failed_request(upstream: FakeUpstream, stream: bool) -> None:
    gate = ToolGateGuardrail(MANIFEST["tools"])

    async def run() -> None:
        kwargs = _kwargs(upstream, "http-500", stream=stream)
        kwargs.update(litellm_call_id="call-fails", proxy_server_request={"body": {}})
        kwargs = await gate.async_pre_call_deployment_hook(kwargs, "acompletion") or kwargs
        assert gate.pending == 1
        saved = litellm.callbacks
        litellm.callbacks = []
        try:
            with pytest.raises(litellm.InternalServerError) as caught:
                await litellm.acompletion(**kwargs)
        finally:
            litellm.callbacks = saved
        # What the proxy calls for a request that failed before any later hook ran.
        await gate.async_post_call_failure_hook(
            {"litellm_call_id": "call-fails", "metadata": kwargs["metadata"]}, caught.value, None
        )

    asyncio.run(run())
    assert gate.pending == 0


def test_the_pending_table_is_bounded(
    upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    from litellm_toolgate.edge.guardrail import taps

    monkeypatch.setattr(taps, "MAX_PENDING", 3)
    gate = ToolGateGuardrail(MANIFEST["tools"])

    requests: list[dict[str, Any]] = []

    async def fill() -> None:
        for i in range(5):
            kwargs = _kwargs(upstream, "multiply_basic", stream=True)
            kwargs.update(litellm_call_id=f"call-{i}", proxy_server_request={"body": {}})
            await gate.async_pre_call_deployment_hook(kwargs, "acompletion")
            requests.append({"litellm_call_id": f"call-{i}", "metadata": kwargs["metadata"]})

    asyncio.run(fill())
    assert gate.pending == 3
    assert gate._taps.take(requests[0]) is None  # evicted: its stream is refused
    assert gate._taps.take(requests[4]) is not None


def test_proxy_hook_refuses_a_stream_it_did_not_observe(upstream: FakeUpstream) -> None:
    gate = ToolGateGuardrail(MANIFEST["tools"])

    async def run() -> None:
        saved = litellm.callbacks
        litellm.callbacks = []
        try:
            response = await litellm.acompletion(**_kwargs(upstream, "multiply_basic", stream=True))
        finally:
            litellm.callbacks = saved
        hook = gate.async_post_call_streaming_iterator_hook(
            None, response, {"litellm_call_id": "x"}
        )
        async for _ in hook:
            raise AssertionError("nothing may pass")

    with pytest.raises(ToolCallQuarantined) as caught:
        asyncio.run(run())
    assert caught.value.reason is R.WIRE_NOT_OBSERVED


# ---- settings --------------------------------------------------------------------------------
def test_settings_file_of_the_example() -> None:
    gate = ToolGateGuardrail.from_settings_file(EXAMPLES / "toolgate.yaml")
    assert gate.gate.registry is not None and len(gate.gate.registry) == 2
    assert gate.gate.limits.max_calls == 16 and gate.gate.limits.idle_timeout == 30
    assert gate.gate.policy is not None


def test_guardrail_kwargs_as_a_proxy_passes_them(tmp_path: Path) -> None:
    (tmp_path / "tools.json").write_text(json.dumps(MANIFEST["tools"]))
    gate = ToolGateGuardrail(
        guardrail_name="tg",
        event_hook="post_call",
        default_on=True,
        tools_file=str(tmp_path / "tools.json"),
        limits={"max_calls": 3},
        policy="litellm_toolgate.demo.serve:workspace_policy",
        presidio_language=None,  # one of the proxy's own keys, passed to every guardrail
        mask=None,
    )
    assert gate.guardrail_name == "tg" and gate.gate.limits.max_calls == 3


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"tools": MANIFEST["tools"], "limits": {"max_callz": 3}}, "max_callz"),
        ({"tools": MANIFEST["tools"], "limits": {"max_calls": 0}}, "max_calls"),
        ({"tools_file": "/nonexistent/tools.json"}, "tools_file"),
        ({"tools": MANIFEST["tools"], "tools_file": "x.json"}, "not both"),
        ({"tools": MANIFEST["tools"], "policy": "no_such_module:f"}, "cannot be imported"),
        ({"tools": MANIFEST["tools"], "policy": "not a path"}, "import path"),
        ({"tools": [{"type": "function", "function": {"parameters": {}}}]}, "name"),
        ({"tools": MANIFEST["tools"], "hmac_key_env": "TOOLGATE_TEST_UNSET"}, "not set"),
    ],
)
def test_a_bad_setting_is_a_clear_error(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(GuardrailConfigError, match=message) as caught:
        ToolGateGuardrail(guardrail_name="tg", **settings)
    # Not a ValueError: the proxy would start without the guardrail on one of those.
    assert not isinstance(caught.value, ValueError | TypeError)


def test_policy_objects_work_in_code(upstream: FakeUpstream) -> None:
    gate = ToolGateGuardrail(MANIFEST["tools"], policy=lambda call: PolicyDecision.deny("no"))
    saved = litellm.callbacks
    litellm.callbacks = [gate]
    try:
        chunks, error = asyncio.run(_stream(upstream, "multiply_basic"))
    finally:
        litellm.callbacks = saved
    quarantine = find_quarantine(error)
    assert quarantine is not None and quarantine.reason is R.POLICY_DENIED
    assert _calls(chunks) == []


def test_json_body_of_matches_the_recording() -> None:
    body = json.loads(json_body_of(body_of(CASES["two_tools_interleaved"])))
    calls = body["choices"][0]["message"]["tool_calls"]
    assert [c["function"]["arguments"] for c in calls] == [
        c["arguments"] for c in CASES["two_tools_interleaved"]["calls"]
    ]


def test_the_examples_share_the_fixture_tools() -> None:
    import yaml

    from litellm_toolgate.edge.config import GateSettings

    assert json.loads((EXAMPLES / "tools.json").read_text()) == MANIFEST["tools"]
    config = yaml.safe_load((EXAMPLES / "proxy_guardrails.yaml").read_text())
    params = config["guardrails"][0]["litellm_params"]
    assert GateSettings.from_guardrail_kwargs(params).tools == MANIFEST["tools"]


# ---- the proxy's per-request table: keyed by the gate, counted, emptied ------------------------
async def _proxy_flow(
    gate: ToolGateGuardrail, upstream: FakeUpstream, name: str, call_id: str, *, take: int | None
) -> tuple[str, list[Any], BaseException | None]:
    """One proxied stream through the gate's hooks, as the proxy drives them."""
    kwargs = _kwargs(upstream, name, stream=True)
    kwargs.update(litellm_call_id=call_id, proxy_server_request={"body": {}})
    kwargs = await gate.async_pre_call_deployment_hook(kwargs, "acompletion") or kwargs
    request_data = {"litellm_call_id": call_id, "metadata": kwargs["metadata"]}
    try:
        response = await litellm.acompletion(**kwargs)
    except Exception as exc:
        # What the proxy runs for a request that failed before any later hook.
        await gate.async_post_call_failure_hook(request_data, exc, None)
        raise
    hook = gate.async_post_call_streaming_iterator_hook(None, response, request_data)
    chunks: list[Any] = []
    try:
        async for chunk in hook:
            chunks.append(chunk)
            if take is not None and len(chunks) >= take:
                await hook.aclose()
                break
    except ToolCallQuarantined as exc:
        return name, chunks, exc
    return name, chunks, None


def test_requests_sharing_a_call_id_keep_their_own_wire(upstream: FakeUpstream) -> None:
    """``litellm_call_id`` is the client's (``x-litellm-call-id``): it must not pick the tap."""
    gate = ToolGateGuardrail(MANIFEST["tools"])
    litellm.callbacks = []
    names = ["multiply_basic", "args_invalid_json", "disconnect_mid_arguments"] * 10

    async def run() -> list[tuple[str, list[Any], BaseException | None]]:
        flows = [_proxy_flow(gate, upstream, n, "same-id", take=None) for n in names]
        return await asyncio.gather(*flows)

    for name, chunks, error in asyncio.run(run()):
        if CASES[name]["expect"] == "release":
            assert error is None, (name, error)
            assert _calls(chunks) == CASES[name]["calls"]
        else:
            assert isinstance(error, ToolCallQuarantined), name
            assert error.reason is R(CASES[name]["reason"])
            assert _calls(chunks) == []
    assert gate.in_flight == 0


def test_a_request_whose_key_is_ambiguous_is_refused(upstream: FakeUpstream) -> None:
    gate = ToolGateGuardrail(MANIFEST["tools"])

    async def run() -> None:
        kwargs = _kwargs(upstream, "multiply_basic", stream=True)
        kwargs.update(litellm_call_id="x", proxy_server_request={"body": {}})
        kwargs["metadata"], kwargs["litellm_metadata"] = {}, {}
        kwargs = await gate.async_pre_call_deployment_hook(kwargs, "acompletion") or kwargs
        # A client-made value in one of the two places: two different keys, never merged.
        request = {"metadata": kwargs["metadata"], "litellm_metadata": {"toolgate_request": "x"}}
        litellm.callbacks = []
        response = await litellm.acompletion(**kwargs)
        async for _ in gate.async_post_call_streaming_iterator_hook(None, response, request):
            raise AssertionError("nothing may pass")

    with pytest.raises(ToolCallQuarantined) as caught:
        asyncio.run(run())
    assert caught.value.reason is R.WIRE_NOT_OBSERVED
    assert gate.in_flight == 0


def test_in_flight_returns_to_zero_under_load(upstream: FakeUpstream) -> None:
    gate = ToolGateGuardrail(MANIFEST["tools"], limits=Limits(idle_timeout=30))
    litellm.callbacks = []
    peak: list[int] = []

    async def watch(done: asyncio.Event) -> None:
        while not done.is_set():
            peak.append(gate.in_flight)
            await asyncio.sleep(0.005)

    async def run() -> None:
        done = asyncio.Event()
        watcher = asyncio.create_task(watch(done))
        names = ["multiply_basic", "args_invalid_json", "two_tools_interleaved", "http-500"]
        flows = []
        for i in range(100):
            name = names[i % len(names)]
            flows.append(_proxy_flow(gate, upstream, name, f"c{i}", take=2 if i % 7 == 0 else None))
        results = await asyncio.gather(*flows, return_exceptions=True)
        done.set()
        await watcher
        failed = [r for r in results if isinstance(r, BaseException)]
        assert len(failed) == 25 and all(
            isinstance(r, litellm.InternalServerError) for r in failed
        ), [type(r).__name__ for r in failed]

    asyncio.run(run())
    # Released, quarantined, abandoned by the client, failed upstream: none is left behind.
    assert max(peak) > 0
    assert gate.in_flight == 0
