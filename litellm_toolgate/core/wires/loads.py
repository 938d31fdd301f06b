"""Reading one wire message's JSON: the one loader every wire's normalizer uses.

A data line of every wire (and a whole ``stream=False`` body) must be one JSON object;
anything else is ``malformed_event``. :func:`load_object` is that read, with json.loads as
its specification (:func:`load_object_reference`, to which a differential test and a fuzz
harness hold it). :func:`load_strict` is the stricter read that also refuses a duplicate key
anywhere in the object (``duplicate_key``): the Anthropic wire reads its whole body with it.

Faults are raised as :class:`WireFault`, which carries a reason (and a tool index) and never
the message text; the normalizers, the ledger and the call accumulators all raise it, so it
lives here, below all of them.
"""

from __future__ import annotations

import json
import json.scanner
from typing import Any

import jiter

from ..errors import Fault, QuarantineReason

R = QuarantineReason


class WireFault(Fault):
    """A protocol fault found while normalizing; carries only a reason and a tool index."""


_jiter: Any = jiter.from_json  # see load_object

# The C scanner behind json.loads, called directly: a data line is almost always exactly one
# object with no surrounding whitespace, and then this skips json.loads' Python layers (two
# regex matches and two frames). Anything else takes json.loads itself, so what is accepted
# and refused is json.loads' answer either way.
_scan: Any = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]


def load_object(data: str) -> dict[str, Any]:
    """One data line as a JSON object (every wire); anything else is ``malformed_event``.

    The answer is json.loads' (the specification here). jiter (pydantic-core's parser,
    already a dependency of the core) parses a line in about half the time, and every text
    it accepts json.loads accepts with an equal value: duplicate keys keep the last value,
    NaN and the infinities are read alike, and what jiter alone refuses (nesting deeper
    than 200, a lone surrogate escape, a number past its range) goes to json.loads, which
    decides. Its cache is off (``cache_mode="none"``), so no wire text outlives the call;
    its errors quote the line and are dropped where they are caught.
    """
    value: Any = None
    try:
        value = _jiter(data.encode(), cache_mode="none")
    except ValueError:
        value = None
    if type(value) is dict:
        return value
    return load_object_reference(data)


def load_object_reference(data: str) -> dict[str, Any]:
    """:func:`load_object` by json.loads alone: the specification the fast read is held to."""
    failed = False
    value: Any = None
    try:
        value, end = _scan(data, 0)
        if end != len(data):
            value = json.loads(data)
    except StopIteration:  # not a value at offset 0 (e.g. leading whitespace)
        try:
            value = json.loads(data)
        except (ValueError, RecursionError):
            failed = True
    except (ValueError, RecursionError):
        failed = True
    # Raised outside the handler: a JSONDecodeError's ``doc`` is the raw line.
    if failed or not isinstance(value, dict):
        raise WireFault(R.MALFORMED_EVENT)
    return value


class _Duplicate(Exception):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise _Duplicate
    return obj


def load_strict(data: str) -> dict[str, Any]:
    """A data line as a JSON object, refusing a duplicate key anywhere in it.

    Used for a whole body, whose ``input`` objects arrive parsed: their text is
    re-serialized for the strict parser, and a duplicate key would already have been
    silently merged by then.
    """
    reason: QuarantineReason | None = None
    value: Any = None
    try:
        value = json.loads(data, object_pairs_hook=_pairs)
    except _Duplicate:
        reason = R.DUPLICATE_KEY
    except (ValueError, RecursionError):
        reason = R.MALFORMED_EVENT
    # Raised outside the handler: a JSONDecodeError's ``doc`` is the raw line.
    if reason is not None:
        raise WireFault(reason)
    if not isinstance(value, dict):
        raise WireFault(R.MALFORMED_EVENT)
    return value
