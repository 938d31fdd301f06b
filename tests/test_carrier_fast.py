"""The carrier's fast reading of litellm's chunks agrees with its general reading.

``CarrierChunks.admit`` reads the usual chunk (litellm's own types, one choice, nothing held
yet) straight from the models' dicts, and anything else through ``_admit_any``, which asks
every name through ``_attr``. Both must give the same answer for every chunk: the same
chunk passed on (the very object, or an equal copy), the same chunks held, the same calls
assembled for the cross-check, and litellm's own objects left unchanged. Checked on what the
real litellm yields for every chat fixture, and on odd chunks built with litellm's types.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import httpx
import litellm
import pytest
from conftest import CHAT, MANIFEST, ROOT
from litellm.llms.custom_httpx.http_handler import HTTPHandler
from litellm.types.utils import (
    ChatCompletionDeltaToolCall,
    Delta,
    Function,
    ModelResponseStream,
    StreamingChoices,
    Usage,
)
from loopback import kwargs

from litellm_toolgate.edge.carriers import chat as carrier_mod
from litellm_toolgate.edge.carriers.chat import CarrierChunks
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted

PROFILES = ROOT / "fixtures" / "profiles"


def dump(chunk: Any) -> Any:
    return chunk.model_dump() if hasattr(chunk, "model_dump") else repr(chunk)


def admit_all(chunks: list[Any], *, general: bool) -> tuple[list[Any], CarrierChunks]:
    carrier = CarrierChunks()
    admit = carrier._admit_any if general else carrier.admit
    return [admit(chunk) for chunk in chunks], carrier


def same_out(chunk: Any, fast: Any, general: Any) -> None:
    if general is None or general is chunk:
        assert fast is general
    else:
        assert fast is not None and fast is not chunk
        assert dump(fast) == dump(general)


def assert_agree(chunks: list[Any]) -> None:
    before = [dump(c) for c in chunks]
    fast_out, fast = admit_all(chunks, general=False)
    general_out, general = admit_all(chunks, general=True)
    for chunk, a, b in zip(chunks, fast_out, general_out, strict=True):
        same_out(chunk, a, b)
    assert len(fast.held) == len(general.held)
    for a, b in zip(fast.held, general.held, strict=True):
        assert dump(a) == dump(b)
    assert fast.carrier() == general.carrier()
    assert (fast.finish_reason, fast.foreign) == (general.finish_reason, general.foreign)
    assert [dump(c) for c in chunks] == before  # litellm's objects are never changed


def litellm_chunks(upstream: FakeUpstream, body: bytes) -> list[Any]:
    """What plain litellm yields for ``body`` (up to its error, if it raises one)."""
    upstream.enqueue(Scripted(body=body))
    client = HTTPHandler(client=httpx.Client())
    chunks: list[Any] = []
    try:
        for chunk in litellm.completion(**kwargs(upstream, client=client)):
            chunks.append(chunk)
    except Exception:  # a fixture litellm refuses: the chunks before it still count
        pass
    return chunks


def test_fast_reading_agrees_on_every_fixture_through_litellm(upstream: FakeUpstream) -> None:
    bodies = [CHAT / case["body"] for case in MANIFEST["cases"]]
    bodies += sorted(PROFILES.glob("*.sse"))
    seen = 0
    for path in bodies:
        chunks = litellm_chunks(upstream, path.read_bytes())
        seen += len(chunks)
        assert_agree(chunks)
    assert seen > 200  # the fixtures really went through litellm


def test_litellm_chunks_take_the_fast_reading(
    upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stream of text and a call is read without the general path but for the held tail
    (the finish chunk is the last one read fast; what follows it is held)."""
    chunks = litellm_chunks(upstream, (CHAT / "multiply_basic.sse").read_bytes())
    general: list[Any] = []
    original = CarrierChunks._admit_any

    def counted(self: CarrierChunks, chunk: Any) -> Any:
        general.append(chunk)
        return original(self, chunk)

    monkeypatch.setattr(CarrierChunks, "_admit_any", counted)
    carrier = CarrierChunks()
    for chunk in chunks:
        carrier.admit(chunk)
    finish = next(i for i, c in enumerate(chunks) if c.choices and c.choices[0].finish_reason)
    assert len(chunks) > 3
    assert general == chunks[finish + 1 :]
    assert carrier.carrier().calls[0].arguments  # the call was assembled


# ---- odd chunks built with litellm's own types ---------------------------------------------
def chunk(*choices: Any, **extra: Any) -> ModelResponseStream:
    return ModelResponseStream(
        id="chatcmpl-1", created=1, model="m", choices=list(choices), **extra
    )


def call(
    index: Any = 0, call_id: str | None = None, name: str | None = None, args: str = ""
) -> Any:
    return ChatCompletionDeltaToolCall(
        id=call_id, index=index, type="function", function=Function(name=name, arguments=args)
    )


def with_extra(model: Any, **values: Any) -> Any:
    """``model`` with extras set as litellm's own constructors set them."""
    assert model.__pydantic_extra__ is not None
    model.__pydantic_extra__.update(values)
    model.__pydantic_fields_set__.update(values)
    return model


def choice(delta: Delta | None = None, index: Any = 0, finish: str | None = None) -> Any:
    return StreamingChoices(index=index, delta=delta or Delta(), finish_reason=finish)


FACTORIES: list[Callable[[], Any]] = [
    lambda: chunk(choice(Delta(role="assistant", content=""))),
    lambda: chunk(choice(Delta(content="hello"))),
    lambda: chunk(choice(Delta(reasoning_content="thinking"))),
    lambda: chunk(choice(Delta(tool_calls=[call(0, "call_a", "multiply", "")]))),
    lambda: chunk(choice(Delta(tool_calls=[call(0, args='{"a": 6')]))),
    lambda: chunk(choice(Delta(tool_calls=[call(1, "call_b", "write_file", "{}")]))),
    lambda: chunk(choice(Delta(content="and", tool_calls=[call(0, args=", ")]))),
    lambda: chunk(choice(Delta(reasoning_content="hm", tool_calls=[call(0, args='"b": 7}')]))),
    lambda: chunk(choice(Delta(), finish="tool_calls")),
    lambda: chunk(choice(Delta(tool_calls=[call(0, args="}")]), finish="tool_calls")),
    lambda: chunk(choice(Delta(), finish="stop")),
    lambda: chunk(usage=Usage(prompt_tokens=1, completion_tokens=2, total_tokens=3)),
    lambda: chunk(
        choice(Delta(tool_calls=[call(0, args="x")])),
        usage=Usage(prompt_tokens=1, completion_tokens=2, total_tokens=3),
    ),
    chunk,
    lambda: chunk(choice(Delta(content="other"), index=1)),
    lambda: chunk(choice(Delta(content="a")), choice(Delta(content="b"), index=1)),
    lambda: chunk(choice(Delta(content="a")), choice(Delta(tool_calls=[call(0, args="1")]))),
    lambda: chunk(with_extra(choice(Delta(content="none")), index=None)),
    lambda: chunk(with_extra(choice(Delta(content="false")), index=False)),
    lambda: chunk(with_extra(choice(), delta=None)),
    lambda: chunk(choice(with_extra(Delta(), function_call={"name": "f", "arguments": "{}"}))),
    lambda: chunk(choice(Delta(tool_calls=[call("0", "call_c", "multiply")]))),
    lambda: chunk(
        choice(
            with_extra(
                Delta(),
                tool_calls=[
                    SimpleNamespace(
                        index=0, id="call_a", function=SimpleNamespace(name=None, arguments="7")
                    )
                ],
            )
        )
    ),
    lambda: chunk(choice(with_extra(Delta(), tool_calls=[]))),
    lambda: chunk(choice(with_extra(Delta(), audio={"id": "a"}))),
    lambda: chunk(choice(with_extra(Delta(tool_calls=[call(0, args="q")]), audio={"id": "a"}))),
    lambda: chunk(choice(with_extra(Delta(tool_calls=[call(0, args="r")]), images=[{"i": 1}]))),
    lambda: chunk(choice(Delta(role="assistant", tool_calls=[call(0, args="s")]))),
    lambda: SimpleNamespace(choices=[SimpleNamespace(index=0, delta=Delta(content="ns"))]),
]


@pytest.mark.parametrize("seed", range(6))
def test_fast_reading_agrees_on_odd_chunks(seed: int) -> None:
    rng = random.Random(seed)
    for factory in FACTORIES:
        assert_agree([factory()])
    for _ in range(150):
        assert_agree([rng.choice(FACTORIES)() for _ in range(rng.randint(1, 7))])


def test_a_changed_litellm_type_takes_the_general_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    """Were a name the carrier reads a property on litellm's type, the fast reading is off."""
    monkeypatch.setattr(carrier_mod, "_PLAIN_TYPES", False)
    general: list[Any] = []
    original = CarrierChunks._admit_any
    monkeypatch.setattr(
        CarrierChunks, "_admit_any", lambda self, c: general.append(c) or original(self, c)
    )
    one = chunk(choice(Delta(content="hello")))
    assert CarrierChunks().admit(one) is one
    assert general == [one]
