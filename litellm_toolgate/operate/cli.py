"""The ``probe``, ``record`` and ``verify`` subcommands of ``toolgate``."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any

from ..loopback.requests import PROBE_REQUESTS

__all__ = ["COMMANDS", "add_commands", "run"]

COMMANDS = ("probe", "record", "verify")


def _probe_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        action="append",
        required=True,
        metavar="ROUTE",
        help="a litellm model string (cometapi/gpt-4o-mini); repeat for several routes",
    )
    parser.add_argument(
        "--api",
        choices=("chat", "responses", "anthropic"),
        default="chat",
        help="chat completions (default), the Responses API, or the Anthropic Messages API",
    )
    parser.add_argument("--api-base", default=None, help="the upstream's base URL")
    parser.add_argument(
        "--api-key",
        default=None,
        help="the key (default: litellm's own lookup, from the environment)",
    )
    parser.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="NAME:VALUE",
        help="an extra request header; repeatable",
    )
    parser.add_argument(
        "--profile",
        action="append",
        default=[],
        metavar="ROUTE=PROFILE",
        help="the gate's route profile for a route (openai/qwen3-8b=lm_studio); repeatable",
    )
    parser.add_argument(
        "--request",
        action="append",
        default=[],
        choices=[r.name for r in PROBE_REQUESTS],
        help="send only this probe request (repeatable; default: all of them)",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")


def add_commands(commands: Any) -> None:
    """Add ``probe``, ``record`` and ``verify`` to ``toolgate``'s subparsers."""
    probe = commands.add_parser(
        "probe",
        help="send the probe's tool-calling requests to routes through the gate and print "
        "what each route did on the wire and what the gate decided",
    )
    _probe_arguments(probe)
    record = commands.add_parser(
        "record",
        help="probe routes and keep what they streamed as sanitized, versioned fixtures",
    )
    _probe_arguments(record)
    record.add_argument("--out", type=Path, required=True, help="the fixtures' directory")
    verify = commands.add_parser(
        "verify",
        help="replay every fixture under a directory through litellm and the gate, sync and "
        "async; exit 1 on any difference from the manifests",
    )
    verify.add_argument("dir", type=Path, help="a directory of fixtures (manifest.json files)")
    verify.add_argument("--json", type=Path, default=None, help="also write the results here")
    verify.add_argument(
        "--python",
        action="append",
        default=[],
        metavar="PY",
        help="run under this interpreter (give two or more to compare litellm versions)",
    )


def _pairs(values: list[str], separator: str, what: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for value in values:
        key, sep, rest = value.partition(separator)
        if not sep or not key.strip():
            raise SystemExit(f"toolgate: {what} must look like NAME{separator}VALUE: {value!r}")
        pairs[key.strip()] = rest.strip()
    return pairs


def run(args: argparse.Namespace) -> int:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    # The tables say what the gate decided; its per-call records would repeat it on stderr.
    logging.getLogger("litellm_toolgate").setLevel(logging.ERROR)
    if args.command == "verify":
        from .verify import cross_verify, verify

        if len(args.python) > 1:
            return cross_verify(args.dir, args.python, sys.stdout)
        if args.python:
            from .verify import subprocess_verify

            return subprocess_verify(args.dir, args.python[0], args.json)
        return verify(args.dir, sys.stdout, json_path=args.json)
    from .probe import probe_routes, render, to_json

    settings: dict[str, Any] = {}
    if args.api_base:
        settings["api_base"] = args.api_base
    if args.api_key:
        settings["api_key"] = args.api_key
    headers = _pairs(args.header, ":", "--header")
    if headers:
        settings["extra_headers"] = headers
    profiles = _pairs(args.profile, "=", "--profile")
    chosen = [r for r in PROBE_REQUESTS if not args.request or r.name in args.request]
    probes = probe_routes(
        args.model, args.api, settings=settings, route_profiles=profiles, requests=chosen
    )
    sys.stdout.write(render(probes))
    if args.json is not None:
        args.json.write_text(to_json(probes), "utf-8")
    if args.command == "record":
        from .record import record

        written = record(probes, args.out, route_profiles=profiles, warn=sys.stderr)
        for path in written:
            sys.stdout.write(f"recorded {path}\n")
    return 0
