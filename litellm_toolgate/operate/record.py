"""``toolgate record``: keep what a probe saw as versioned, sanitized fixtures.

One directory per route (``<out>/<route>-<api>/``): each probe request's body in its wire's
framing (``.sse``; Ollama's ``.ndjson``; Bedrock's ``.eventstream``, its frames written again
with their checksums), sanitized by :func:`~litellm_toolgate.core.records.sanitize.sanitize_body`
(structure kept, every value of the model's or the provider's replaced), and a
``manifest.json`` naming the route, the API and
wire, the date, the litellm, gate and sanitizer versions, and for each request the expected
outcome (the gate's live verdict, with the released calls named by their id placeholders),
the transport's read sizes and the wire's facts. Headers are never kept. ``toolgate verify``
replays the directory.

Sanitizing keeps the gate's verdict on every body of the project's own fixtures (every wire)
but one kind (a built-in ``apply_patch`` call, whose diff has a line format of its own that
filler breaks). To be sure for a recorded route, the recorder replays every body through the core
before and after sanitizing and, where the verdict changed, keeps the sanitized body's
verdict as the expected one and says so (``"sanitizing_changed_verdict"`` in the manifest,
and a line on stderr).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, TextIO

from ..core.decision.attempt import Attempt
from ..core.decision.state import Wire
from ..core.errors import ToolCallQuarantined
from ..core.records.sanitize import SANITIZER_VERSION, sanitize_body, schema_words
from ..core.values.registry import ToolRegistry
from ..core.wires import WIRES
from ..loopback.requests import PROBE_REQUESTS, PROBE_TOOLS
from ..version import __version__
from .probe import ProbeRow, RouteProbe, responses_tools

__all__ = ["core_verdict", "record", "versions"]

_PATHS = {
    "chat": "/chat/completions",
    "responses": "/responses",
    "anthropic": "/v1/messages",
    "gemini": "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
    "ollama": "/api/chat",
    "bedrock": "/model/anthropic.claude-3-5-sonnet-20240620-v1:0/converse-stream",
    "watsonx": "/ml/v1/text/chat_stream",
}
"""A request path of each wire, where the caller names none (the path picks the wire)."""
_SUFFIXES = {"ollama": ".ndjson", "bedrock": ".eventstream"}
"""A streamed body's file suffix, by wire (``.sse`` for the others)."""


def versions() -> dict[str, str]:
    def of(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:  # pragma: no cover - an uninstalled checkout
            return "unknown"

    return {"litellm": of("litellm"), "gate": __version__, "sanitizer": SANITIZER_VERSION}


def core_verdict(
    body: bytes,
    *,
    wire: str,
    tools: Iterable[Mapping[str, Any]],
    route: str,
    request: Mapping[str, object] | None = None,
    route_profiles: Mapping[str, str] | None = None,
    streamed: bool = True,
    path: str | None = None,
) -> tuple[str, str | None]:
    """The core's verdict on a body alone (no litellm): (``release``/``quarantine``, reason).
    ``path``: the request's path (default: one of the wire's)."""
    attempt = Attempt(ToolRegistry.from_tools(tools), route=route, route_profiles=route_profiles)
    path = path or _PATHS[wire]
    try:
        attempt.bind_request(path, dict(request or {}) if wire == "chat" else {})
        media = WIRES[Wire(wire)].media[streamed]
        attempt.bind_response(content_type=media, streamed=streamed, path=path)
        if streamed:
            attempt.receive_bytes(body)
            attempt.receive_eof()
        else:
            attempt.receive_body(body)
        attempt.conclude()
    except ToolCallQuarantined as exc:
        return "quarantine", exc.reason.value
    return "release", None


def _slug(route: str, api: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", f"{route}-{api}").strip("_")


def _expected_live(row: ProbeRow) -> tuple[str, str | None]:
    """The manifest's outcome for what the probe saw: ``release``, ``quarantine`` (reason),
    or ``error`` / ``refused`` (the exception's type or the refusal's reason)."""
    if row.outcome == "released":
        return "release", None
    if row.outcome == "quarantined":
        return "quarantine", row.reason
    return row.outcome, row.reason


def record(
    probes: Iterable[RouteProbe],
    out: Path,
    *,
    route_profiles: Mapping[str, str] | None = None,
    warn: TextIO | None = None,
) -> list[Path]:
    """Write each probed route's fixtures under ``out``; returns the manifests written."""
    written: list[Path] = []
    stamp = datetime.now(UTC).replace(microsecond=0).isoformat()
    for probe in probes:
        rows = [r for r in probe.rows if r.body and r.facts is not None and r.facts.status == 200]
        if warn is not None:
            for row in probe.rows:
                if row not in rows:
                    warn.write(
                        f"{probe.route} {row.request}: not recorded (no streamed 200 body: "
                        f"{row.outcome} {row.reason or ''})\n"
                    )
        if not rows:
            continue
        wire = rows[0].facts.wire if rows[0].facts is not None else "chat"
        tools = responses_tools(PROBE_TOOLS) if wire == "responses" else PROBE_TOOLS
        registry = ToolRegistry.from_tools(tools)
        keep = schema_words(spec.schema for spec in registry)
        framing = WIRES[Wire(wire)].framing
        suffix = _SUFFIXES.get(wire, ".sse")
        folder = out / _slug(probe.route, probe.api)
        folder.mkdir(parents=True, exist_ok=True)
        cases: list[dict[str, Any]] = []
        chat_choice = {r.name: r.tool_choice for r in PROBE_REQUESTS}
        for row in rows:
            request = {"tool_choice": chat_choice.get(row.request, "auto")}
            if wire == "responses" and isinstance(request["tool_choice"], dict):
                request["tool_choice"] = {
                    "type": "function",
                    "name": request["tool_choice"]["function"]["name"],
                }
            clean = sanitize_body(row.body, keep=keep, names=registry.names, framing=framing)
            verdict_args: dict[str, Any] = {
                "wire": wire,
                "tools": tools,
                "route": probe.route,
                "request": request,
                "route_profiles": route_profiles,
                "path": row.path or None,
            }
            before = core_verdict(row.body, **verdict_args)
            after = core_verdict(clean.body, **verdict_args)
            expect, reason = _expected_live(row)
            case: dict[str, Any] = {
                "name": row.request,
                "body": row.request + suffix,
                "request": request,
            }
            if before != after:
                if (expect, reason) == before:
                    expect, reason = after
                case["sanitizing_changed_verdict"] = {
                    "live": list(before),
                    "sanitized": list(after),
                }
                if warn is not None:
                    warn.write(
                        f"{probe.route} {row.request}: sanitizing changed the gate's verdict "
                        f"({before[0]} {before[1] or ''} -> {after[0]} {after[1] or ''}); "
                        "the manifest expects the sanitized body's\n"
                    )
            case["expect"] = expect
            if reason is not None:
                case["reason"] = reason
            if expect == "release":
                case["calls"] = [
                    {"id": clean.ids.get(call_id, call_id) if call_id else call_id, "name": name}
                    for call_id, name in row.call_ids
                ]
            if len(clean.body) == len(row.body):
                # The sanitized body keeps every byte offset: the route's read boundaries too.
                case["chunk_sizes"] = list(row.piece_sizes)
            if row.facts is not None:
                facts = row.facts.as_dict()
                for timing in ("first_call_ms", "terminal_ms", "last_byte_ms"):
                    facts.pop(timing, None)
                case["wire_facts"] = facts
            (folder / case["body"]).write_bytes(clean.body)
            cases.append(case)
        manifest = {
            "recorded": {
                "route": probe.route,
                "api": probe.api,
                "wire": wire,
                "date": stamp,
                **versions(),
                "route_profiles": dict(route_profiles or {}),
            },
            "wire": wire,
            "route": probe.route,
            "tools": tools,
            "cases": cases,
        }
        path = folder / "manifest.json"
        path.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", "utf-8")
        written.append(path)
    return written
