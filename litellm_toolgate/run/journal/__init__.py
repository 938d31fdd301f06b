"""The run journal's stores, chosen by URL (the rules are ``core/rules/journal.py``).

``open_journal(url)``:

* ``sqlite:///relative/file.db``, ``sqlite:////absolute/file.db`` (the usual three slashes
  then the path), ``sqlite:///:memory:``. Options: ``timeout`` (seconds to wait for the
  write lock, default 30), ``synchronous`` (``full``, the default, or ``normal``).
* ``postgresql://user@host:port/db`` (also ``postgres://``), with psycopg 3 installed (the
  extra ``litellm-toolgate[postgres]``). Options: ``schema`` (where the tables live,
  default ``public``) and any libpq connection parameter (``sslmode``, ``connect_timeout``, ...).

An unknown scheme, option or value stops the open with :class:`GateConfigError` (whose
message never repeats the URL: it may hold a password).

Every store is synchronous and thread-safe; each method is one committed transaction (an
async caller runs it with ``asyncio.to_thread``). ``observer(move, row)``, if given, is
called after each committed move (``"decided"``, ``"approval"``, ``"started"``,
``"finished"``, ``"skipped"``, ``"reconciled"``): a test can stop the process exactly there.

Every move takes ``run=``, a run lease (``acquire_run``): the move commits only while that
lease is the run's current one (``RunLeaseLost`` otherwise), and renews it when due, in the
same transaction. ``gate.run`` passes its lease to every move it makes.
"""

from __future__ import annotations

import re
import time
import urllib.parse
from typing import Protocol, runtime_checkable

from ...core.errors import GateConfigError
from ...core.rules.journal import (
    ApprovalStatus,
    Claim,
    JournalRow,
    NewCall,
    Outcome,
    RunLease,
    RunSummary,
)
from .store import Clock, Observer, SqlJournal

__all__ = ["Journal", "Observer", "open_journal"]

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


@runtime_checkable
class Journal(Protocol):
    """What every store offers. Each method is one committed transaction."""

    def decide(self, call: NewCall, *, run: RunLease | None = None) -> JournalRow:
        """Insert at DECIDED; the same call again returns the existing row unchanged; its
        call id used in the run for another call (another round, tool or argument digest)
        raises ``CallIdReused``."""
        ...

    def record_approval(
        self,
        key: str,
        *,
        status: ApprovalStatus,
        argument_digest: str,
        schema_digest: str,
        policy_version: str,
        expires_at: float | None,
        run: RunLease | None = None,
    ) -> JournalRow:
        """Bind an approval to the digests and policy version it was given for (at DECIDED)."""
        ...

    def claim(
        self,
        key: str,
        *,
        lease_seconds: float,
        retry_expired: bool = False,
        run: RunLease | None = None,
    ) -> Claim:
        """Atomic DECIDED -> STARTED (or an expired lease at STARTED, with
        ``retry_expired=True``) with a new fencing token, greater than any before it.
        ``AlreadyClaimed`` otherwise."""
        ...

    def check_token(self, key: str, token: int) -> bool:
        """For a tool: is this token the current claim on a STARTED call?"""
        ...

    def finish(
        self,
        claim: Claim,
        outcome: Outcome,
        *,
        error_class: str | None = None,
        result_size: int | None = None,
        result_digest: str | None = None,
        run: RunLease | None = None,
    ) -> JournalRow:
        """STARTED -> FINISHED with the current token; ``StaleClaim`` otherwise."""
        ...

    def skip(self, key: str, *, reason: str, run: RunLease | None = None) -> JournalRow:
        """DECIDED -> FINISHED (SKIPPED): the tool was never run."""
        ...

    def reconcile(self, key: str, *, reason: str, run: RunLease | None = None) -> JournalRow:
        """DECIDED or STARTED -> RECONCILED, an operator's mark with a reason."""
        ...

    def get(self, key: str) -> JournalRow:
        """The row with this key; ``UnknownCall`` if none."""
        ...

    def calls(self, run_id: str, *, run: RunLease | None = None) -> list[JournalRow]:
        """Every row of a run, by round (with ``run``: ``RunLeaseLost`` if it is stale)."""
        ...

    def unfinished(self, run_id: str) -> list[JournalRow]:
        """The run's rows at DECIDED or STARTED."""
        ...

    def ambiguous(self, run_id: str | None = None) -> list[JournalRow]:
        """Rows at STARTED, in one run or all."""
        ...

    def runs(self) -> list[RunSummary]:
        """A summary per run."""
        ...

    def acquire_run(
        self, run_id: str, *, lease_seconds: float, holder: str | None = None
    ) -> RunLease:
        """The run's lease for one driver (a new fencing token); ``RunBusy`` while another
        driver's lease is live."""
        ...

    def begin_run(
        self, run_id: str, *, lease_seconds: float, holder: str | None = None
    ) -> tuple[RunLease, list[JournalRow]]:
        """``acquire_run``, then the run's rows read once the lease is taken."""
        ...

    def renew_run(self, run: RunLease) -> None:
        """Extend the lease; ``RunLeaseLost`` if another driver took the run over."""
        ...

    def release_run(self, run: RunLease) -> None:
        """End the lease now (if it is still current)."""
        ...

    def check_run(self, run: RunLease) -> bool:
        """Is this still the run's current lease?"""
        ...

    def close(self) -> None: ...


def open_journal(
    url: str, *, observer: Observer | None = None, clock: Clock = time.time
) -> SqlJournal:
    """Open (creating or migrating) the journal at ``url``. See the module docstring."""
    if not isinstance(url, str):
        raise GateConfigError("a journal URL is a string")
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise GateConfigError("a journal URL looks like sqlite:///file.db or postgresql://...")
    scheme = scheme.lower()
    if scheme == "sqlite":
        return _open_sqlite(rest, observer=observer, clock=clock)
    if scheme in ("postgresql", "postgres"):
        return _open_postgres(url, observer=observer, clock=clock)
    raise GateConfigError(
        f"unknown journal URL scheme {scheme[:20]!r}: use sqlite:/// or postgresql://"
    )


def _options(query: str) -> dict[str, str]:
    try:
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True, strict_parsing=True)
    except ValueError:
        raise GateConfigError("the journal URL's query is malformed") from None
    options: dict[str, str] = {}
    for name, value in pairs:
        if name in options:
            raise GateConfigError(f"journal URL option {name!r} is given twice")
        options[name] = value
    return options


def _open_sqlite(rest: str, *, observer: Observer | None, clock: Clock) -> SqlJournal:
    from .sqlite import SqliteJournal

    where, _, query = rest.partition("?")
    if not where.startswith("/") or where == "/":
        raise GateConfigError(
            "a SQLite journal URL is sqlite:///file.db, sqlite:////abs/file.db or "
            "sqlite:///:memory:"
        )
    path = urllib.parse.unquote(where[1:])
    options = _options(query)
    unknown = sorted(set(options) - {"timeout", "synchronous"})
    if unknown:
        raise GateConfigError(
            f"unknown SQLite journal option(s) {unknown}: known are timeout, synchronous"
        )
    try:
        timeout = float(options.get("timeout", "30"))
    except ValueError:
        timeout = -1.0
    if not 0 < timeout < 86_400:
        raise GateConfigError("the SQLite journal's timeout is a number of seconds > 0")
    synchronous = options.get("synchronous", "full").upper()
    if synchronous not in ("FULL", "NORMAL", "EXTRA"):
        raise GateConfigError("the SQLite journal's synchronous is full, extra or normal")
    return SqliteJournal(
        path, timeout=timeout, synchronous=synchronous, clock=clock, observer=observer
    )


def _open_postgres(url: str, *, observer: Observer | None, clock: Clock) -> SqlJournal:
    try:
        import psycopg.conninfo
    except ImportError:
        raise GateConfigError(
            "a postgresql:// journal needs psycopg 3: pip install 'litellm-toolgate[postgres]'"
        ) from None
    from .postgres import PostgresJournal

    parts = urllib.parse.urlsplit(url)
    options = _options(parts.query)
    schema = options.pop("schema", "public")
    if not _SCHEMA_NAME.fullmatch(schema):
        raise GateConfigError(
            "the journal's schema is a lower-case identifier ([a-z_][a-z0-9_]*, 63 at most)"
        )
    conninfo = urllib.parse.urlunsplit(
        parts._replace(scheme="postgresql", query=urllib.parse.urlencode(options))
    )
    try:
        # libpq's own parser: a misspelt option is refused here, before any connection.
        params = psycopg.conninfo.conninfo_to_dict(conninfo)
    except psycopg.Error:
        # Its message can quote the URL, password included: name the fault only.
        raise GateConfigError(
            "the PostgreSQL journal URL has an option libpq does not know, or is malformed"
        ) from None
    timeout = float(params.get("connect_timeout") or 30)
    return PostgresJournal(
        conninfo, schema=schema, connect_timeout=timeout, clock=clock, observer=observer
    )
