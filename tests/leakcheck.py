"""Checks that the canary placed in tool-call arguments went nowhere it must not go.

``assert_clean_exception`` walks a quarantine's message, repr, args, its traceback text and
its whole ``__cause__``/``__context__`` chain (which the gate leaves empty), and its
records. It also walks the local variables of every frame in the traceback of every
exception in that chain (:func:`assert_clean_frames`), as an error tracker that ships frame
locals (Sentry's ``include_local_variables``, rich's ``show_locals``) would: every value,
into containers and objects' attributes, to :data:`FRAME_DEPTH` levels. Frames of the tests'
own code, and objects of the tests' fake upstream, are the test's data and are left out.
``every_logger`` captures every log record of every logger at DEBUG (the root
logger and every logger that does not propagate to it) for ``assert_clean_logs``. litellm's
own loggers (``LiteLLM``, ``LiteLLM Proxy``, ``LiteLLM Router``) print request and response
bodies at DEBUG; the README says so and leaves them outside the gate's promise, so they are
held at WARNING while capturing (formatting their DEBUG output costs more than the request)
and their records are not checked.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from conftest import CANARY

LITELLM_OWN = frozenset({"LiteLLM", "LiteLLM Proxy", "LiteLLM Router"})
TESTS = str(Path(__file__).resolve().parent)
FRAME_DEPTH = 6
"""How deep the frame walk follows containers and attributes from a frame's locals."""
OPAQUE = frozenset({"tiktoken.core.Encoding"})
"""Types the walk does not enter: they hold no call's data (a tokenizer's vocabulary of 100,000
byte strings, which litellm's token counter keeps in its frames, made the walk the larger part
of a suite's time)."""


def chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    pending: list[BaseException | None] = [exc]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        pending += [current.__cause__, current.__context__]


def assert_clean_exception(exc: BaseException, canary: str = CANARY) -> None:
    assert exc.__cause__ is None
    assert exc.__context__ is None
    for link in chain(exc):
        for text in (str(link), repr(link), repr(link.args)):
            assert canary not in text
    assert canary not in "".join(traceback.format_exception(exc))
    assert_clean_frames(exc, canary)
    for record in getattr(exc, "records", ()):
        assert canary not in record.model_dump_json()
        assert canary not in repr(record)


def _frames(tb: TracebackType | None) -> Iterator[FrameType]:
    while tb is not None:
        yield tb.tb_frame
        tb = tb.tb_next


def _tests_own(value: Any) -> bool:
    module = sys.modules.get(getattr(type(value), "__module__", "") or "")
    return str(getattr(module, "__file__", "") or "").startswith(TESTS)


def _opaque(value: Any) -> bool:
    kind = type(value)
    return f"{kind.__module__}.{kind.__qualname__}" in OPAQUE


def find_in(
    value: Any,
    label: str,
    canary: str = CANARY,
    seen: set[int] | None = None,
    depth: int = FRAME_DEPTH,
) -> list[str]:
    """Where the canary sits in ``value``, followed through containers and attributes up to
    ``depth`` levels: ``label`` and the path to it, each. ``seen``: the ids of objects
    already walked (shared by several calls, each object is walked once)."""
    needle = canary.encode()
    found: list[str] = []
    seen = set() if seen is None else seen

    def walk(value: Any, where: str, level: int) -> None:
        if isinstance(value, str):
            if canary in value:
                found.append(where)
            return
        if isinstance(value, bytes | bytearray | memoryview):
            if needle in bytes(value):
                found.append(where)
            return
        if value is None or isinstance(value, int | float | bool | type) or id(value) in seen:
            return
        seen.add(id(value))
        if level >= depth or _tests_own(value) or isinstance(value, FrameType) or _opaque(value):
            return
        if isinstance(value, dict):
            for key, item in list(value.items()):
                walk(key, f"{where}[key]", level + 1)
                walk(item, f"{where}[{key!r}]"[:200], level + 1)
            return
        if isinstance(value, list | tuple | set | frozenset) or type(value).__name__ == "deque":
            for i, item in enumerate(list(value)):
                walk(item, f"{where}[{i}]", level + 1)
            return
        attributes: dict[str, Any] = {}
        with contextlib.suppress(TypeError):
            attributes.update(vars(value))
        for klass in type(value).__mro__:
            for name in getattr(klass, "__slots__", ()) or ():
                if isinstance(name, str) and name not in ("__dict__", "__weakref__"):
                    with contextlib.suppress(AttributeError):
                        attributes[name] = object.__getattribute__(value, name)
        for name, item in attributes.items():
            walk(item, f"{where}.{name}", level + 1)

    walk(value, label, 0)
    return found


def find_in_frames(exc: BaseException, canary: str = CANARY) -> list[str]:
    """Where the canary sits in the frame locals of ``exc``'s chain: ``frame:path`` each."""
    found: list[str] = []
    seen: set[int] = set()
    for link in chain(exc):
        for frame in _frames(link.__traceback__):
            if frame.f_code.co_filename.startswith(TESTS):
                continue
            label = f"{frame.f_code.co_name}@{Path(frame.f_code.co_filename).name}"
            for name, value in frame.f_locals.items():
                found += find_in(value, f"{label}:{name}", canary, seen)
    return found


def assert_clean_frames(exc: BaseException, canary: str = CANARY) -> None:
    found = find_in_frames(exc, canary)
    assert not found, f"argument text in traceback frame locals: {found[:5]}"


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextlib.contextmanager
def every_logger() -> Iterator[list[logging.LogRecord]]:
    """Every record of every logger (litellm's own excepted) at DEBUG, while inside."""
    capture = _Capture()
    manager = logging.Logger.manager
    loggers = [logging.getLogger()] + [
        lg
        for name, lg in list(manager.loggerDict.items())
        if isinstance(lg, logging.Logger) and name not in LITELLM_OWN
    ]
    own = [logging.getLogger(name) for name in sorted(LITELLM_OWN)]
    levels = [lg.level for lg in [*loggers, *own]]
    attached = [lg for lg in loggers if lg is loggers[0] or not lg.propagate]
    for lg in loggers:
        lg.setLevel(logging.DEBUG)
    for lg in own:
        lg.setLevel(logging.WARNING)
    for lg in attached:
        lg.addHandler(capture)
    try:
        yield capture.records
    finally:
        for lg in attached:
            lg.removeHandler(capture)
        for lg, level in zip([*loggers, *own], levels, strict=True):
            lg.setLevel(level)


def assert_clean_logs(records: list[logging.LogRecord], canary: str = CANARY) -> None:
    for record in records:
        if record.name in LITELLM_OWN:
            continue
        assert canary not in record.getMessage(), record.name
        assert canary not in repr(record.args), record.name
        assert canary not in json.dumps(getattr(record, "toolgate", None), default=str)
        assert canary not in repr(record.__dict__), record.name
        if record.exc_info:
            assert canary not in "".join(traceback.format_exception(*record.exc_info))
