"""Fuzz the SSE decoder against the reference reader in tests/oracle.py.

Input: a byte that chooses the size of the pieces the body is fed in (16 B to 4 KiB), then
the body. The decoder, fed the pieces, must produce exactly the reference's messages (event
type and data), or fail with SSEDecodeError(invalid_utf8) exactly when the body is not
UTF-8. Anything else it raises is a crash.
"""

from __future__ import annotations

import sys

import _common  # noqa: F401  (import paths)
import atheris

with atheris.instrument_imports(include=["litellm_toolgate"]):
    from litellm_toolgate.core.framing.sse import SSEDecodeError, SSEDecoder

from oracle import sse_messages

LIMIT = 1 << 20  # far above any input libFuzzer writes here: no size faults


def one_input(data: bytes) -> None:
    step = 16 + (data[0] if data else 0) * 16  # 16 B to 4 KiB pieces
    body = data[1:]
    decoder = SSEDecoder(max_event_bytes=LIMIT)
    got: list[tuple[str, str]] = []
    failed = None
    try:
        for at in range(0, len(body), step):
            got += [(m.event, m.data) for m in decoder.feed(body[at : at + step])]
            if decoder.error is not None:
                break
        if decoder.error is None:
            decoder.flush()
    except SSEDecodeError as fault:
        failed = fault.reason.value
    failed = failed or (decoder.error.value if decoder.error else None)
    expected = sse_messages(body)
    if expected is None:
        assert failed == "invalid_utf8", (failed, body)
    else:
        assert failed is None, (failed, body)
        assert got == expected, (got, expected, body)


def main() -> None:
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
