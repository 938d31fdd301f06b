"""``toolgate journal``: list runs and calls, show the ambiguous ones, reconcile a row.

Output is ids, tool names, rounds, steps, outcomes, fencing tokens and UTC times: the
journal holds nothing else (no arguments, no results), so nothing else can be printed.
Errors (a bad URL, an unknown key, a move the table refuses) go to stderr with exit 2.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from ...core.errors import ToolGateError
from ...core.rules.journal import JournalRow

URL_ENV = "TOOLGATE_JOURNAL_URL"


def add_journal_command(commands: Any) -> None:
    """Add ``journal`` to the ``toolgate`` command's subparsers."""
    journal = commands.add_parser(
        "journal",
        help="list the run journal's runs and calls, show ambiguous calls, reconcile one",
    )
    journal.add_argument(
        "--url",
        default=os.environ.get(URL_ENV),
        help=f"journal URL (sqlite:///file.db, postgresql://...; default ${URL_ENV})",
    )
    actions = journal.add_subparsers(dest="journal_command", required=True)
    actions.add_parser("runs", help="one line per run: calls, unfinished, ambiguous, times")
    calls = actions.add_parser("calls", help="every call of a run")
    calls.add_argument("run_id")
    ambiguous = actions.add_parser(
        "ambiguous", help="calls left started (the tool may have run), in one run or all"
    )
    ambiguous.add_argument("run_id", nargs="?", default=None)
    reconcile = actions.add_parser(
        "reconcile", help="mark an unfinished call reconciled, saying what you found"
    )
    reconcile.add_argument("key", help="the call's idempotency key (see `calls`)")
    reconcile.add_argument("--reason", required=True, help="what the target system showed")
    journal.set_defaults(handler=run_journal_command)


def run_journal_command(args: argparse.Namespace, out: TextIO, err: TextIO | None = None) -> int:
    from . import open_journal

    err = sys.stderr if err is None else err
    if not args.url:
        err.write(f"toolgate journal: give --url or set {URL_ENV}\n")
        return 2
    try:
        with open_journal(args.url) as journal:
            if args.journal_command == "runs":
                summaries = journal.runs()
                table(
                    out,
                    ["RUN", "CALLS", "UNFINISHED", "AMBIGUOUS", "FIRST DECIDED", "LAST CHANGE"],
                    [
                        [
                            s.run_id,
                            str(s.calls),
                            str(s.unfinished),
                            str(s.ambiguous),
                            when(s.first_decided_at),
                            when(s.last_change_at),
                        ]
                        for s in summaries
                    ],
                )
            elif args.journal_command == "calls":
                rows(out, journal.calls(args.run_id))
            elif args.journal_command == "ambiguous":
                found = journal.ambiguous(args.run_id)
                rows(out, found)
                if found:
                    out.write(
                        f"\n{len(found)} call(s) started and never finished: the tool may "
                        "have run. Check the target system, then `toolgate journal reconcile "
                        "KEY --reason ...`.\n"
                    )
            else:
                row = journal.reconcile(args.key, reason=args.reason)
                rows(out, [row])
                out.write(f"\nreconciled ({row.outcome.value if row.outcome else '-'})\n")
    except ToolGateError as e:
        err.write(f"toolgate journal: {e}\n")
        return 2
    return 0


def rows(out: TextIO, found: Sequence[JournalRow]) -> None:
    table(
        out,
        [
            "RUN",
            "ROUND",
            "CALL",
            "TOOL",
            "EFFECT",
            "STEP",
            "OUTCOME",
            "TOKEN",
            "DECIDED",
            "STARTED",
            "FINISHED",
            "KEY",
        ],
        [
            [
                r.run_id,
                str(r.round),
                r.call_id,
                r.tool,
                r.effect.value,
                r.step.value,
                r.outcome.value if r.outcome else "-",
                "-" if r.fencing_token is None else str(r.fencing_token),
                when(r.decided_at),
                when(r.started_at),
                when(r.finished_at or r.reconciled_at),
                r.idempotency_key,
            ]
            for r in found
        ],
    )


def when(t: float | None) -> str:
    if t is None:
        return "-"
    stamp = datetime.datetime.fromtimestamp(t, datetime.UTC).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


def table(out: TextIO, head: list[str], body: list[list[str]]) -> None:
    if not body:
        out.write("(none)\n")
        return
    # Ids come from the upstream's wire: no control character reaches the terminal.
    body = [["".join(ch if ch.isprintable() else "?" for ch in c) for c in row] for row in body]
    widths = [max(len(row[i]) for row in [head, *body]) for i in range(len(head))]
    for row in [head, *body]:
        out.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n")
