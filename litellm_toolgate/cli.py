"""The ``toolgate`` command."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TextIO


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="toolgate", description="Gate streamed LLM tool calls (litellm-toolgate)."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo",
        help="run the 7 x 8 tool loop through the gate (a loopback fake CometAPI unless "
        "COMETAPI_KEY is set), then show a broken stream quarantined",
    )
    demo.add_argument("--model", default=None, help="litellm model (default cometapi/gpt-4o-mini)")
    demo.add_argument(
        "--api",
        choices=("chat", "responses", "anthropic"),
        default="chat",
        help="chat completions (default), the Responses API (gate.responses) or the "
        "Anthropic Messages API (gate.amessages, /v1/messages)",
    )
    demo.add_argument(
        "--crash",
        action="store_true",
        help="kill a worker between a call's start and finish, then resume: the journal "
        "refuses to run the call again until it is reconciled",
    )
    fake = commands.add_parser(
        "fake-upstream",
        help="serve the demo's fake CometAPI on 127.0.0.1 (for the proxy examples)",
    )
    fake.add_argument("--port", type=int, default=4010, help="port on 127.0.0.1 (default 4010)")
    commands.add_parser(
        "routes",
        help="print which litellm routes the gate gates (chat and Responses), and why not",
    )
    from .operate.cli import COMMANDS, add_commands, run
    from .run.journal.cli import add_journal_command

    add_journal_command(commands)
    add_commands(commands)
    args = parser.parse_args(argv)
    if args.command == "journal":
        return int(args.handler(args, sys.stdout))
    if args.command in COMMANDS:
        return run(args)
    if args.command == "routes":
        return print_routes(sys.stdout)
    if args.command == "fake-upstream":
        from .demo.serve import serve

        serve(args.port)
        return 0
    # Use litellm's bundled model cost map: nothing outside this machine is needed.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    if args.crash:
        from .demo.crash import run_crash_demo

        return run_crash_demo(sys.stdout)
    from .demo.run import run_demo

    return run_demo(sys.stdout, model=args.model, api=args.api)


def print_routes(out: TextIO) -> int:
    """The route table (``edge/routes.py``) as text."""
    from .edge.routes import table

    rows = table()
    width = max(len(row[0]) for row in rows)
    for route, chat, responses in rows:
        out.write(f"{route:<{width}}  chat: {chat}\n{'':<{width}}  Responses: {responses}\n")
    out.write(
        "\nAny other provider is refused. A refused route raises RouteNotGated before "
        "anything is sent.\n"
    )
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
