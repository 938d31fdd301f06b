"""Checks that the canary placed in tool-call arguments went nowhere it must not go.

``assert_clean_exception`` walks a quarantine's message, repr, args, its traceback text and
its whole ``__cause__``/``__context__`` chain (which the gate leaves empty), and its
records. ``every_logger`` captures every log record of every logger at DEBUG (the root
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
import traceback
from collections.abc import Iterator

from conftest import CANARY

LITELLM_OWN = frozenset({"LiteLLM", "LiteLLM Proxy", "LiteLLM Router"})


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
    for record in getattr(exc, "records", ()):
        assert canary not in record.model_dump_json()
        assert canary not in repr(record)


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
