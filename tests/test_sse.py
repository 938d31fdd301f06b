"""Tests for the incremental SSE decoder (litellm_toolgate.core.framing.sse)."""

from __future__ import annotations

import dataclasses
import itertools
import pickle
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from litellm_toolgate.core.errors import (
    Fault,
    GateConfigError,
    QuarantineReason,
    ToolGateError,
)
from litellm_toolgate.core.framing.sse import SSEDecodeError, SSEDecoder, SSEMessage

BIG = 1 << 20


def M(data: str, event: str = "", id: str | None = None) -> SSEMessage:
    return SSEMessage(event=event, data=data, id=id)


def decode(pieces: list[bytes], limit: int = BIG) -> tuple[list[SSEMessage], SSEDecoder]:
    dec = SSEDecoder(max_event_bytes=limit)
    out: list[SSEMessage] = []
    for piece in pieces:
        out += dec.feed(piece)
    out += dec.flush()
    return out, dec


def whole(stream: bytes, limit: int = BIG) -> list[SSEMessage]:
    return decode([stream], limit)[0]


def bytewise(stream: bytes, limit: int = BIG) -> list[SSEMessage]:
    return decode([stream[i : i + 1] for i in range(len(stream))], limit)[0]


def split_at(stream: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *sorted(cuts), len(stream)]
    return [stream[a:b] for a, b in itertools.pairwise(bounds)]


def assert_split_invariant(stream: bytes, expected: list[SSEMessage]) -> None:
    assert whole(stream) == expected
    assert bytewise(stream) == expected
    for i in range(len(stream) + 1):
        assert decode(split_at(stream, [i]))[0] == expected, f"split at {i}"


# --- A literal, per-character reading of the WHATWG rules, used as an oracle. ------------


def reference(stream: bytes) -> tuple[list[SSEMessage], int, int]:
    """Return (messages, comments, peak) where peak is the most bytes the bound counts."""
    text = stream.decode("utf-8")
    if text.startswith("\ufeff"):
        text = text[1:]
    lines: list[str] = []
    cur = ""
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\r":
            lines.append(cur)
            cur = ""
            if i + 1 < len(text) and text[i + 1] == "\n":
                i += 1
        elif c == "\n":
            lines.append(cur)
            cur = ""
        else:
            cur += c
        i += 1
    out: list[SSEMessage] = []
    data, event, last_id, comments = "", "", None, 0
    peak = data_bytes = 0
    for line in lines:
        peak = max(peak, len(line.encode()) + data_bytes)
        if line == "":
            if data:
                out.append(SSEMessage(event, data[:-1] if data.endswith("\n") else data, last_id))
            data, event, last_id, data_bytes = "", "", None, 0
            continue
        if line.startswith(":"):
            comments += 1
            continue
        if ":" in line:
            name, value = line[: line.index(":")], line[line.index(":") + 1 :]
            if value.startswith(" "):
                value = value[1:]
        else:
            name, value = line, ""
        if name == "data":
            data += value + "\n"
            data_bytes += len(value.encode()) + 1
        elif name == "event":
            event = value
        elif name == "id" and "\x00" not in value:
            last_id = value
    peak = max(peak, len(cur.encode()) + data_bytes)
    return out, comments, peak


# --- The spec's examples. -----------------------------------------------------------------


def test_multiline_data() -> None:
    stream = b"data: YHOO\ndata: +2\ndata: 10\n\n"
    assert_split_invariant(stream, [M("YHOO\n+2\n10")])


def test_comments_ids_and_trailing_incomplete_event() -> None:
    stream = (
        b": test stream\n\n"
        b"data: first event\nid: 1\n\n"
        b"data:second event\nid\n\n"
        b"data:  third event\n"
    )
    expected = [M("first event", id="1"), M("second event", id="")]
    assert_split_invariant(stream, expected)
    out, dec = decode([stream])
    assert out == expected
    assert dec.comments == 1
    assert dec.pending  # the third event was discarded


def test_data_without_colon_and_empty_data() -> None:
    stream = b"data\n\ndata\ndata\n\ndata:"
    assert_split_invariant(stream, [M(""), M("\n")])
    _, dec = decode([stream])
    assert dec.pending


def test_one_leading_space_is_removed() -> None:
    assert_split_invariant(b"data:test\n\ndata: test\n\n", [M("test"), M("test")])
    assert whole(b"data:  two\n\n") == [M(" two")]
    assert whole(b"data: a: b:c\n\n") == [M("a: b:c")]
    assert whole(b"data: \n\n") == [M("")]


def test_named_events() -> None:
    stream = (
        b"event: add\ndata: 73857293\n\nevent: remove\ndata: 2153\n\nevent: add\ndata: 113411\n\n"
    )
    expected = [M("73857293", "add"), M("2153", "remove"), M("113411", "add")]
    assert_split_invariant(stream, expected)


def test_blank_line_with_empty_data_dispatches_nothing_and_resets() -> None:
    stream = b"event: ping\nid: 7\n\ndata: x\n\n\n\n"
    assert_split_invariant(stream, [M("x")])
    out, dec = decode([b"event: ping\n\n"])
    assert out == []
    assert not dec.pending


def test_field_without_colon_has_empty_value() -> None:
    assert whole(b"event: a\nevent\ndata: x\n\n") == [M("x", "")]
    assert whole(b"id: 3\nid\ndata: x\n\n") == [M("x", id="")]


def test_id_with_nul_is_ignored_and_id_is_per_message() -> None:
    stream = b"id: 1\nid: a\x00b\ndata: x\n\nid: 2\n\ndata: y\n\n"
    assert_split_invariant(stream, [M("x", id="1"), M("y")])


def test_retry_unknown_and_miscased_fields_are_ignored() -> None:
    stream = b"retry: 1000\nfoo: bar\nData: no\nEVENT: no\n:data: comment\ndata: yes\n\n"
    out, dec = decode([stream])
    assert out == [M("yes")]
    assert dec.comments == 1


def test_data_keeps_nul_colons_and_unicode() -> None:
    stream = "data: a\x00b\ndata: é€😀\ndata::\n\n".encode()
    assert_split_invariant(stream, [M("a\x00b\né€😀\n:")])


# --- Line endings. ------------------------------------------------------------------------


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
def test_every_line_ending(eol: str) -> None:
    text = eol.join([": hi", "event: e", "id: 9", "data: a", "data: b", "", "data: c", "", ""])
    assert_split_invariant(text.encode(), [M("a\nb", "e", "9"), M("c")])


def test_mixed_line_endings() -> None:
    stream = b"data: a\r\ndata: b\rdata: c\n\r\ndata: d\r\r\n\n"
    assert_split_invariant(stream, [M("a\nb\nc"), M("d")])


def test_cr_cr_is_two_line_ends_and_lf_cr_too() -> None:
    assert_split_invariant(b"data: a\r\rdata: b\n\rdata: c\r\n\r\n", [M("a"), M("b"), M("c")])


def test_cr_at_end_of_chunk_then_lf() -> None:
    out, dec = decode([b"data: a\r", b"\n", b"\r", b"\n", b"data: b\r", b"", b"\n\n"])
    assert out == [M("a"), M("b")]
    assert not dec.pending


def test_trailing_lone_cr_at_flush_ends_the_line() -> None:
    assert whole(b"data: a\r\r") == [M("a")]
    out, dec = decode([b"data: a\r"])
    assert out == []
    assert dec.pending  # the line ended, but its message was never dispatched
    out, dec = decode([b": c\r"])
    assert dec.comments == 1
    assert not dec.pending


# --- Byte order mark. ---------------------------------------------------------------------


def test_leading_bom_is_stripped_even_when_split() -> None:
    stream = b"\xef\xbb\xbfdata: x\n\n"
    assert_split_invariant(stream, [M("x")])
    assert decode([b"", b"\xef", b"", b"\xbb", b"\xbf", b"data: x\n\n"])[0] == [M("x")]


def test_only_one_bom_is_stripped() -> None:
    # The second BOM belongs to the first line, making its field name "\ufeffdata".
    stream = b"\xef\xbb\xbf\xef\xbb\xbfdata: x\n\ndata: y\n\n"
    assert_split_invariant(stream, [M("y")])


def test_bom_later_in_the_stream_is_data() -> None:
    stream = "data: x\n\n\ufeffdata: y\n\ndata: \ufeffz\n\n".encode()
    assert_split_invariant(stream, [M("x"), M("\ufeffz")])


def test_bom_is_not_stripped_after_other_text() -> None:
    assert decode([b"\n", "\ufeffdata: y\n\n".encode()])[0] == []


# --- Splits everywhere. -------------------------------------------------------------------

CORPUS = [
    b"",
    b"\n\n\n",
    b"data: {}\n\n",
    b'data: {"choices":[{"delta":{"content":"h\xc3\xa9llo"}}]}\r\n\r\ndata: [DONE]\r\n\r\n',
    "event: é\rid: ☃\rdata: 😀😀\r\r:😀\r\r".encode(),
    b"\xef\xbb\xbf: c\n\ndata\ndata:\ndata: \n\n",
    b"data: x\n\ndata: partial",
]


@pytest.mark.parametrize("stream", CORPUS)
def test_corpus_matches_reference_at_every_split(stream: bytes) -> None:
    expected, comments, _ = reference(stream)
    assert_split_invariant(stream, expected)
    assert decode([stream])[1].comments == comments


@pytest.mark.slow
@pytest.mark.parametrize("stream", CORPUS[3:5])
def test_corpus_at_every_three_piece_split(stream: bytes) -> None:
    expected = whole(stream)
    n = len(stream)
    for i in range(n + 1):
        for j in range(i, n + 1):
            assert decode(split_at(stream, [i, j]))[0] == expected


# --- Properties. --------------------------------------------------------------------------

_value = st.text(st.characters(exclude_characters="\r\n", exclude_categories=["Cs"]))
_line = st.one_of(
    st.just(""),
    _value.map(lambda v: ":" + v),
    st.tuples(
        st.sampled_from(["data", "event", "id", "retry", "foo", "Data", ""]),
        st.sampled_from(["", ":", ": ", ":  "]),
        _value,
    ).map("".join),
)
_stream = st.tuples(
    st.booleans(),
    st.lists(st.tuples(_line, st.sampled_from(["\n", "\r\n", "\r"])), max_size=30),
    st.sampled_from(["", "data: tail", "\r", "é"]),
).map(lambda t: ("\ufeff" if t[0] else "") + "".join(a + b for a, b in t[1]) + t[2])


@settings(max_examples=300, deadline=None)
@given(text=_stream, data=st.data())
def test_any_split_matches_whole_and_reference(text: str, data: st.DataObject) -> None:
    stream = text.encode()
    expected, comments, _ = reference(stream)
    out, dec = decode([stream])
    assert out == expected
    assert dec.comments == comments
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=12))
    out2, dec2 = decode(split_at(stream, cuts))
    assert out2 == expected
    assert (dec2.comments, dec2.pending, dec2.bytes_seen) == (
        dec.comments,
        dec.pending,
        len(stream),
    )


@settings(max_examples=300, deadline=None)
@given(text=_stream, data=st.data())
def test_size_limit_is_split_invariant(text: str, data: st.DataObject) -> None:
    stream = text.encode()
    expected, _, peak = reference(stream)
    limit = data.draw(st.integers(1, max(1, peak + 2)))
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=8))
    for pieces in ([stream], split_at(stream, cuts)):
        if peak > limit:
            with pytest.raises(SSEDecodeError) as info:
                decode(pieces, limit)
            assert info.value.reason is QuarantineReason.EVENT_TOO_LARGE
        else:
            assert decode(pieces, limit)[0] == expected


@settings(max_examples=300, deadline=None)
@given(stream=st.binary(max_size=64), data=st.data())
def test_arbitrary_bytes_match_reference_or_fault(stream: bytes, data: st.DataObject) -> None:
    try:
        expected: list[SSEMessage] | None = reference(stream)[0]
    except UnicodeDecodeError:
        expected = None
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=8))
    for pieces in ([stream], split_at(stream, cuts)):
        if expected is None:
            with pytest.raises(SSEDecodeError) as info:
                decode(pieces)
            assert info.value.reason is QuarantineReason.INVALID_UTF8
        else:
            assert decode(pieces)[0] == expected


# --- Invalid UTF-8. -----------------------------------------------------------------------


def feed_checked(dec: SSEDecoder, data: bytes) -> list[SSEMessage]:
    """feed(), then raise the fault it recorded (the way the attempt uses the decoder)."""
    out = dec.feed(data)
    if dec.error is not None:
        dec.feed(b"")
    return out


def _assert_clean(err: SSEDecodeError, reason: QuarantineReason) -> None:
    assert err.reason is reason
    assert err.__context__ is None
    assert err.__cause__ is None
    assert err.args == (reason.value,)
    assert str(err) == reason.value
    assert repr(err) == f"SSEDecodeError({reason.value!r})"
    # Internal: the gate turns it into the attempt's quarantine; never the public error base.
    assert isinstance(err, Fault) and not isinstance(err, ToolGateError)


@pytest.mark.parametrize(
    "bad",
    [b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc3(", b"\x80"],
    ids=["ff", "overlong", "surrogate", "above-max", "bad-continuation", "lone-continuation"],
)
def test_invalid_utf8_raises_without_context(bad: bytes) -> None:
    dec = SSEDecoder(max_event_bytes=BIG)
    assert dec.feed(b"data: ok\n\n") == [M("ok")]
    with pytest.raises(SSEDecodeError) as info:
        feed_checked(dec, b"data: " + bad + b"SECRET\n\n")
    _assert_clean(info.value, QuarantineReason.INVALID_UTF8)
    assert "SECRET" not in repr(info.value)


def test_truncated_sequence_at_flush_raises() -> None:
    dec = SSEDecoder(max_event_bytes=BIG)
    assert dec.feed(b"data: \xe2\x82") == []
    assert dec.pending
    with pytest.raises(SSEDecodeError) as info:
        dec.flush()
    _assert_clean(info.value, QuarantineReason.INVALID_UTF8)


def test_sequence_split_across_feeds_is_fine() -> None:
    dec = SSEDecoder(max_event_bytes=BIG)
    assert dec.feed(b"\xf0") == []
    assert dec.pending
    assert dec.feed(b"\x9f\x98") == []
    assert dec.feed(b"\x80\n\n") == []  # "😀" alone is an unknown field
    assert not dec.pending
    assert dec.flush() == []


# --- Size limit. --------------------------------------------------------------------------


def test_limit_is_inclusive() -> None:
    # "data: " + 4 bytes is a 10-byte line; the message then holds 4 + 1 bytes.
    assert whole(b"data: abcd\n\n", limit=10) == [M("abcd")]
    with pytest.raises(SSEDecodeError) as info:
        whole(b"data: abcd\n\n", limit=9)
    _assert_clean(info.value, QuarantineReason.EVENT_TOO_LARGE)


def test_limit_counts_accumulated_data() -> None:
    stream = b"data: aaaa\ndata: bbbb\ndata: cccc\n\n"
    assert whole(stream, limit=20) == [M("aaaa\nbbbb\ncccc")]
    with pytest.raises(SSEDecodeError):
        whole(stream, limit=19)  # 10 bytes held + a 10-byte line


def test_limit_resets_after_dispatch() -> None:
    stream = b"data: aaaa\n\n" * 50
    assert len(whole(stream, limit=10)) == 50


def test_limit_counts_utf8_bytes_not_characters() -> None:
    line = "data: " + "é" * 5  # 11 characters, 16 bytes
    assert whole((line + "\n\n").encode(), limit=16) == [M("é" * 5)]
    with pytest.raises(SSEDecodeError):
        whole((line + "\n\n").encode(), limit=15)


def test_limit_stops_an_unterminated_line_early() -> None:
    dec = SSEDecoder(max_event_bytes=1000)
    for _ in range(9):
        dec.feed(b": " + b"x" * 98)
    with pytest.raises(SSEDecodeError) as info:
        feed_checked(dec, b"x" * 101)
    assert info.value.reason is QuarantineReason.EVENT_TOO_LARGE


def test_limit_applies_to_comment_lines_too() -> None:
    with pytest.raises(SSEDecodeError):
        whole(b": " + b"x" * 100 + b"\n", limit=50)


def test_limit_applies_to_buffered_data_at_end_of_chunk() -> None:
    dec = SSEDecoder(max_event_bytes=8)
    dec.feed(b"data:abc\n")  # 8-byte line, 4 bytes held
    with pytest.raises(SSEDecodeError):
        feed_checked(dec, b"data:ab\n")  # 7-byte line + 4 held


def test_dribbled_line_is_held_in_few_pieces() -> None:
    dec = SSEDecoder(max_event_bytes=BIG)
    dec.feed(b"data: ")
    for _ in range(50_000):
        assert dec.feed(b"ab") == []
    assert len(dec._partial) <= 20  # white-box: O(log n) pieces, not one per read
    assert dec.feed(b"\n\n") == [M("ab" * 50_000)]


def test_non_positive_limit_is_a_config_error() -> None:
    with pytest.raises(GateConfigError):
        SSEDecoder(max_event_bytes=0)


# --- Broken and closed states. ------------------------------------------------------------


def test_broken_decoder_reraises_same_reason() -> None:
    dec = SSEDecoder(max_event_bytes=8)
    with pytest.raises(SSEDecodeError) as first:
        feed_checked(dec, b"data: 0123456789\n\n")
    calls: list[Callable[[], object]] = [
        lambda: dec.feed(b"data: ok\n\n"),
        dec.flush,
        lambda: dec.feed(b""),
    ]
    for call in calls:
        with pytest.raises(SSEDecodeError) as again:
            call()
        _assert_clean(again.value, first.value.reason)


def test_broken_by_utf8_then_flush_reraises() -> None:
    dec = SSEDecoder(max_event_bytes=BIG)
    assert dec.feed(b"\xff") == []
    assert dec.error is QuarantineReason.INVALID_UTF8
    with pytest.raises(SSEDecodeError) as info:
        dec.flush()
    _assert_clean(info.value, QuarantineReason.INVALID_UTF8)


def test_broken_at_flush_stays_broken() -> None:
    dec = SSEDecoder(max_event_bytes=BIG)
    dec.feed(b"\xc3")
    with pytest.raises(SSEDecodeError):
        dec.flush()
    with pytest.raises(SSEDecodeError) as info:
        dec.flush()
    _assert_clean(info.value, QuarantineReason.INVALID_UTF8)


def test_flush_is_idempotent_and_feed_after_flush_is_misuse() -> None:
    dec = SSEDecoder(max_event_bytes=BIG)
    assert dec.feed(b"data: x\n\n") == [M("x")]
    assert dec.flush() == []
    assert dec.flush() == []
    with pytest.raises(RuntimeError):
        dec.feed(b"data: y\n\n")


# --- pending, counters, value types. ------------------------------------------------------


@pytest.mark.parametrize(
    ("stream", "pending"),
    [
        (b"", False),
        (b"data: x\n\n", False),
        (b"data: x\n", True),
        (b"data: x", True),
        (b"data: x\n\ndata", True),
        (b": comment\n", False),
        (b": comment", True),
        (b"event: x\nid: 1\n", False),  # nothing that could ever have been dispatched
    ],
)
def test_pending_after_flush(stream: bytes, pending: bool) -> None:
    for pieces in ([stream], [stream[i : i + 1] for i in range(len(stream))]):
        _, dec = decode(pieces)
        assert dec.pending is pending


def test_counters() -> None:
    dec = SSEDecoder(max_event_bytes=BIG)
    assert (dec.comments, dec.bytes_seen, dec.pending) == (0, 0, False)
    dec.feed(b":a\n:b\r\n")
    dec.feed(b"")
    dec.feed(b":")
    assert (dec.comments, dec.bytes_seen, dec.pending) == (2, 8, True)
    dec.feed(b"c\n")
    assert (dec.comments, dec.bytes_seen, dec.pending) == (3, 10, False)


def test_message_is_frozen_with_slots() -> None:
    msg = M("x", "e", "1")
    with pytest.raises(dataclasses.FrozenInstanceError):
        msg.data = "y"  # type: ignore[misc]
    assert not hasattr(msg, "__dict__")
    assert msg == SSEMessage("e", "x", "1")


def test_error_pickles_with_its_reason() -> None:
    err = SSEDecodeError(QuarantineReason.EVENT_TOO_LARGE)
    again = pickle.loads(pickle.dumps(err))
    assert isinstance(again, SSEDecodeError)
    assert again.reason is QuarantineReason.EVENT_TOO_LARGE
    assert again.args == ("event_too_large",)


def test_large_stream_in_chunks() -> None:
    event = b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"tok\xc3\xa9n"}}]}\n\n'
    stream = b": keepalive\n\n" + event * 2000 + b"data: [DONE]\n\n"
    for size in (7, 4096):
        out, dec = decode([stream[i : i + size] for i in range(0, len(stream), size)])
        assert len(out) == 2001
        assert out[-1] == M("[DONE]")
        assert out[0].data.endswith('"tok\xe9n"}}]}')
        assert dec.comments == 1
        assert not dec.pending


# --- A fault never hides the messages completed before it. ---------------------------------


@pytest.mark.parametrize(
    ("tail", "reason"),
    [
        (b"data: \xffbad\n\n", QuarantineReason.INVALID_UTF8),
        (b"data: " + b"x" * 64 + b"\n\n", QuarantineReason.EVENT_TOO_LARGE),
    ],
    ids=["invalid-utf8", "too-large"],
)
def test_messages_before_a_fault_are_returned_whatever_the_split(
    tail: bytes, reason: QuarantineReason
) -> None:
    stream = b"data: one\n\ndata: two\n\n" + tail
    for cut in range(len(stream) + 1):
        dec = SSEDecoder(max_event_bytes=32)
        got = dec.feed(stream[:cut])
        if dec.error is None:
            got += dec.feed(stream[cut:])
        assert got == [M("one"), M("two")], cut
        assert dec.error is reason
        with pytest.raises(SSEDecodeError):
            dec.feed(b"")


# ---- memory: a message of many short data lines costs what it is charged -----------------
@pytest.mark.parametrize(
    "line",
    [b"data:\n", b"data:x\n", b"data:xy\n", b"data: " + b"x" * 30 + b"\n"],
    ids=["empty", "one-char", "two-chars", "thirty-chars"],
)
def test_many_data_lines_pin_no_more_than_the_event_limit(line: bytes) -> None:
    """Each data line is charged its bytes and one LF; held one object per line, an empty
    line cost a list slot (8 B) and a two-character one about 60 B, so a message of them
    pinned 8 to 20 times its limit (33.7 MiB at 4 MiB)."""
    import gc
    import tracemalloc

    limit = 1 << 18
    dec = SSEDecoder(max_event_bytes=limit)
    piece = line * (8192 // len(line))  # the transport feeds slices of 8 KiB
    gc.collect()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        fed = 0
        while dec.error is None and fed < 16 * limit:
            dec.feed(piece)
            fed += len(piece)
        peak = tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()
    assert dec.error is QuarantineReason.EVENT_TOO_LARGE
    assert peak < 3 * limit, f"peak {peak:,} B for a {limit:,} B event limit"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet="ab\u00e9", max_size=9), min_size=1, max_size=40))
def test_merged_data_lines_dispatch_as_written(values: list[str]) -> None:
    stream = "".join(f"data:{v}\n" for v in values).encode() + b"\n"
    assert whole(stream) == [M("\n".join(values))]
    assert bytewise(stream) == [M("\n".join(values))]


def test_internal_faults_are_not_public_errors() -> None:
    from litellm_toolgate.core.values.strictjson import ArgumentsError
    from litellm_toolgate.core.wires.loads import WireFault

    for internal in (Fault, SSEDecodeError, WireFault, ArgumentsError):
        assert not issubclass(internal, ToolGateError), internal
