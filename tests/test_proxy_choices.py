"""Chat completions for several choices (``n > 1``) gated choice by choice behind a real
LiteLLM proxy, driven with the ``openai`` client, in both YAML styles of
``config_examples/`` (``litellm_settings.callbacks`` and a ``guardrails:`` entry).

The proxy hands the gate's stream hook litellm's own chat stream, whose chunks keep each
choice's index as ``litellm.acompletion`` hands them over, and serializes what the hook
yields: so the rules are the SDK's (``tests/test_gate_choices.py``). Each choice has its own
calls and its own terminal; every choice is decided before any call of any choice goes out,
one bad choice quarantines all, and every choice's text streams live. A whole answer of
several choices is checked choice by choice. On a deployment whose wire streams one answer
per response (``anthropic/``) ``n > 1`` is still refused before anything reaches the
upstream, and so is an ``n`` that is no count. Needs litellm's proxy extra, like
``tests/test_proxy_e2e.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest
import yaml
from conftest import CANARY
from proxyproc import Proxy, prepare, require_proxy, running_proxy
from test_gate_choices import (
    DONE,
    WANT_CALLS,
    args,
    calls_of,
    chunk,
    opened,
    text_of,
    text_only,
    two_choices_with_calls,
    whole,
    whole_choice,
)

from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted

pytestmark = pytest.mark.proxy
require_proxy()

MODEL = "gpt-4o-mini"
CLAUDE = "claude"  # an anthropic/ deployment: one answer per response


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream() as server:
        yield server


@pytest.fixture(scope="module", params=["callbacks", "guardrails"])
def proxy(
    request: pytest.FixtureRequest,
    upstream: FakeUpstream,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Proxy]:
    style = str(request.param)
    config = prepare(style, tmp_path_factory.mktemp(f"proxy-choices-{style}"))
    settings = yaml.safe_load(config.read_text())
    settings["model_list"].append(
        {
            "model_name": CLAUDE,
            "litellm_params": {
                "model": "anthropic/claude-sonnet-4-5",
                "api_base": upstream.root_url,
                "api_key": "sk-loopback-fake-upstream",
            },
        }
    )
    config.write_text(yaml.safe_dump(settings))
    with running_proxy(config, upstream.base_url) as running:
        yield running


def _ask(
    proxy: Proxy, n: int, *, stream: bool, model: str = MODEL, **extra: Any
) -> tuple[Any, BaseException | None]:
    """What the client got (the chunks that arrived, or the whole response) and its error."""
    proxy.ensure_running()
    client = openai.OpenAI(base_url=proxy.base_url, api_key=proxy.key, max_retries=0, timeout=60)
    messages = [{"role": "user", "content": "What is 7 times 8? Use multiply."}]
    chunks: list[Any] = []
    try:
        if not stream:
            return client.chat.completions.create(
                model=model, messages=messages, n=n, **extra
            ), None
        for item in client.chat.completions.create(
            model=model, messages=messages, n=n, stream=True, **extra
        ):
            chunks.append(item)
    except openai.APIError as exc:
        return chunks, exc
    return chunks, None


def _sent(upstream: FakeUpstream, body: bytes, **options: Any) -> int:
    """Queue ``body`` for the next request; the upstream's request count before it."""
    upstream.discard()
    upstream.enqueue(Scripted(body, **options))
    return len(upstream.requests)


def _refused(error: BaseException | None, reason: str, status: int | None = None) -> None:
    """The quarantine, typed by its reason: an HTTP error with its status before the first
    chunk, the proxy's error frame after it; never argument text."""
    assert isinstance(error, openai.APIError), repr(error)
    if isinstance(error, openai.APIStatusError):
        assert error.status_code == (status or error.status_code) and error.status_code >= 400
    elif status is not None:
        raise AssertionError(f"wanted an HTTP {status} before any chunk, got {error!r}")
    assert reason in str(error), (reason, str(error))
    assert CANARY not in f"{error} {error.body!r}"


# ---- streamed ----------------------------------------------------------------------------------
def test_calls_in_two_choices_are_released_apart(proxy: Proxy, upstream: FakeUpstream) -> None:
    before = _sent(upstream, two_choices_with_calls(), chunk_sizes=[7, 90])
    chunks, error = _ask(proxy, 2, stream=True)
    assert error is None, error
    assert len(upstream.requests) == before + 1 and upstream.requests[-1]["n"] == 2
    assert calls_of(chunks) == WANT_CALLS
    # Every call goes out after the wire's end was read, one chunk per choice, right before
    # the held finish (litellm shows one finish for the stream: choice 0's).
    positions = [p for p, i in enumerate(chunks) if any(c.delta.tool_calls for c in i.choices)]
    assert positions == [len(chunks) - 3, len(chunks) - 2]
    assert [c.finish_reason for i in chunks for c in i.choices if c.finish_reason] == ["tool_calls"]


def test_three_choices_of_text_are_released(proxy: Proxy, upstream: FakeUpstream) -> None:
    _sent(upstream, text_only(3), chunk_sizes=[5, 61])
    chunks, error = _ask(proxy, 3, stream=True)
    assert error is None, error
    assert text_of(chunks) == {c: f"Seven{c} times{c} eight{c}" for c in range(3)}
    assert calls_of(chunks) == []


def test_every_choices_text_streams_live(proxy: Proxy, upstream: FakeUpstream) -> None:
    """The upstream goes silent after every choice's text, before any finish: the text of
    each choice reached the client anyway, then the stall's refusal did."""
    body = text_only(3)
    _sent(upstream, body, stall_after=body.index(chunk(0, {}, "stop")))
    chunks, error = _ask(proxy, 3, stream=True)
    _refused(error, "stalled")
    assert text_of(chunks) == {c: f"Seven{c} times{c} eight{c}" for c in range(3)}


def test_every_choice_is_decided_before_any_call_goes_out(
    proxy: Proxy, upstream: FakeUpstream
) -> None:
    """Choice 0's call is whole and valid and its finish came; choice 1's call is still
    open when the upstream goes silent: nothing of choice 0 goes out either."""
    body = (
        chunk(0, {"role": "assistant", "content": "Calling."})
        + chunk(0, opened(0, "call_a"))
        + chunk(0, args(0, '{"a": 1, "b": 2}'))
        + chunk(0, {}, "tool_calls")
        + chunk(1, {"role": "assistant", "content": "Also calling."})
        + chunk(1, opened(0, "call_b"))
        + chunk(1, args(0, '{"a": 3,'))
    )
    _sent(upstream, body, stall_after=len(body))
    chunks, error = _ask(proxy, 2, stream=True)
    _refused(error, "stalled")
    assert calls_of(chunks) == []
    assert text_of(chunks) == {0: "Calling.", 1: "Also calling."}


def test_one_bad_choice_quarantines_every_choice(proxy: Proxy, upstream: FakeUpstream) -> None:
    # Choice 1's first call is not valid JSON; choice 0's call is fine and is not released.
    _sent(upstream, two_choices_with_calls(second_b=f'"{CANARY}"'))
    chunks, error = _ask(proxy, 2, stream=True)
    _refused(error, "invalid_json")
    assert calls_of(chunks) == []


def test_a_choice_without_its_finish_is_cut(proxy: Proxy, upstream: FakeUpstream) -> None:
    _sent(upstream, two_choices_with_calls().replace(chunk(1, {}, "tool_calls"), b""))
    chunks, error = _ask(proxy, 2, stream=True)
    _refused(error, "missing_finish")
    assert calls_of(chunks) == []


def test_a_choice_whose_finish_contradicts_its_calls_quarantines_all(
    proxy: Proxy, upstream: FakeUpstream
) -> None:
    body = two_choices_with_calls().replace(chunk(1, {}, "tool_calls"), chunk(1, {}, "stop"))
    _sent(upstream, body)
    chunks, error = _ask(proxy, 2, stream=True)
    _refused(error, "finish_reason_mismatch")
    assert calls_of(chunks) == []


def test_a_choice_past_n_is_unexpected(proxy: Proxy, upstream: FakeUpstream) -> None:
    _sent(upstream, text_only(3))
    chunks, error = _ask(proxy, 2, stream=True)
    _refused(error, "unexpected_choice")
    assert calls_of(chunks) == []


def test_another_choices_finish_shown_as_choice_0s_is_a_mismatch(
    proxy: Proxy, upstream: FakeUpstream
) -> None:
    """litellm hands on only the wire's first finish, under index 0: here choice 1's."""
    body = (
        chunk(1, opened(0, "call_b"))
        + chunk(1, args(0, '{"a": 3, "b": 4}'))
        + chunk(0, {"content": "No call."})
        + chunk(1, {}, "tool_calls")
        + chunk(0, {}, "stop")
        + DONE
    )
    _sent(upstream, body)
    chunks, error = _ask(proxy, 2, stream=True)
    _refused(error, "carrier_mismatch")
    assert calls_of(chunks) == []


# ---- whole -------------------------------------------------------------------------------------
def test_a_whole_answer_of_several_choices(proxy: Proxy, upstream: FakeUpstream) -> None:
    choices = [
        whole_choice(0, "Calling.", [("call_a", '{"a": 1, "b": 2}')]),
        whole_choice(1, None, [("call_b", '{"a": 3, "b": 4}'), ("call_c", f'{{"a": "{CANARY}"}}')]),
        whole_choice(2, "Fifty-six.", []),
    ]
    # Choice 1's second call is invalid: the whole answer is refused, every choice with it.
    _sent(upstream, whole(choices), content_type="application/json")
    result, error = _ask(proxy, 3, stream=False)
    _refused(error, "schema_invalid", 422)
    assert result == []
    choices[1] = whole_choice(
        1, None, [("call_b", '{"a": 3, "b": 4}'), ("call_c", '{"a": 5, "b": 6}')]
    )
    before = _sent(upstream, whole(choices), content_type="application/json")
    result, error = _ask(proxy, 3, stream=False)
    assert error is None, error
    assert upstream.requests[before]["n"] == 3
    got = [
        (
            c.index,
            c.finish_reason,
            [(t.id, t.function.arguments) for t in c.message.tool_calls or []],
        )
        for c in result.choices
    ]
    assert got == [
        (0, "tool_calls", [("call_a", '{"a": 1, "b": 2}')]),
        (1, "tool_calls", [("call_b", '{"a": 3, "b": 4}'), ("call_c", '{"a": 5, "b": 6}')]),
        (2, "stop", []),
    ]


# ---- refused before anything reaches the upstream ----------------------------------------------
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_n_greater_than_one_on_another_wire_is_refused_unsent(
    proxy: Proxy, upstream: FakeUpstream, stream: bool
) -> None:
    upstream.discard()
    before = len(upstream.requests)
    result, error = _ask(proxy, 2, stream=stream, model=CLAUDE, max_tokens=64)
    _refused(error, "unsupported_request", 501)
    assert len(upstream.requests) == before
    assert result == []


@pytest.mark.parametrize("n", [0, 129])
def test_an_n_that_is_no_count_is_refused_unsent(
    proxy: Proxy, upstream: FakeUpstream, n: int
) -> None:
    upstream.discard()
    before = len(upstream.requests)
    result, error = _ask(proxy, n, stream=True)
    _refused(error, "unsupported_request", 501)
    assert len(upstream.requests) == before and result == []
