"""Fuzz the NDJSON line decoder (Ollama's framing) against the whole-body reader in
tests/oracle_ollama.py.

Input: a byte that chooses the size of the pieces the body is fed in (1 B to 256 B), then
the body. The decoder, fed the pieces, must produce exactly the reference's lines, or fail
with the reference's reason (``malformed_event``, ``invalid_utf8``, ``event_too_large``),
and never raise anything but its typed fault.
"""

from __future__ import annotations

import sys

import _common  # noqa: F401  (import paths)
import atheris

with atheris.instrument_imports(include=["litellm_toolgate"]):
    from litellm_toolgate.core.framing.ndjson import NDJSONDecodeError, NDJSONDecoder

from oracle_ollama import lines

LIMIT = 512  # inside libFuzzer's inputs: the size bound is exercised too


def one_input(data: bytes) -> None:
    step = 1 + (data[0] if data else 0)
    body = data[1:]
    decoder = NDJSONDecoder(max_event_bytes=LIMIT)
    got: list[tuple[str, str]] = []
    failed = None
    try:
        for at in range(0, len(body), step):
            got += [(m.event, m.data) for m in decoder.feed(body[at : at + step])]
            if decoder.error is not None:
                break
        if decoder.error is None:
            decoder.flush()
    except NDJSONDecodeError as fault:
        failed = fault.reason.value
    failed = failed or (decoder.error.value if decoder.error else None)
    expected = lines(body, LIMIT)
    if isinstance(expected, str):
        assert failed == expected, (failed, expected, body)
    else:
        assert failed is None, (failed, body)
        assert got == [("", line) for line in expected], (got, expected, body)


def main() -> None:
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
