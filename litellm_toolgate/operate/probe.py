"""``toolgate probe``: send the probe's requests to a route through the gate, and say what the
route did on the wire and what the gate decided.

Each request of :data:`~.requests.PROBE_REQUESTS` goes through a :class:`ToolGate` (sync; the
Anthropic Messages API async, since litellm has no sync path for it on ``anthropic/``
models), on whatever wire litellm speaks for the route (chat, Responses, Anthropic, Gemini,
Ollama or Bedrock Converse; credentials come from litellm's own lookup, as for any call).
The gate's HTTP transport is observed (:mod:`.observed`): the wire's facts cover the whole
body, even where the gate stopped reading at a fault. What is kept is counts, sizes, times
and protocol names; the raw pieces stay in memory only, for ``toolgate record`` to sanitize.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import ToolCallQuarantined, ToolGateError
from ..core.records.observe import WireFacts, WireObserver
from ..loopback.requests import PROBE_REQUESTS, PROBE_TOOLS, ProbeRequest
from .observed import ObservedGate

__all__ = ["ObservedGate", "ProbeRow", "RouteProbe", "probe_routes", "render", "to_json"]

APIS = ("chat", "responses", "anthropic")


# ---- one row per request -----------------------------------------------------------------
@dataclass
class ProbeRow:
    """One request's outcome and its wire's facts."""

    request: str
    outcome: str
    """``released``, ``quarantined``, ``refused`` (the gate would not send it) or ``error``
    (litellm or the transport failed; ``reason`` names the exception type)."""
    reason: str | None
    party: str | None
    released: int
    facts: WireFacts | None
    path: str = ""
    tool_choice: Any = None
    call_ids: list[tuple[str | None, str | None]] = field(default_factory=list)
    piece_sizes: list[int] = field(default_factory=list)
    body: bytes = field(default=b"", repr=False)
    """The raw body (held for ``toolgate record`` only; never printed nor written raw)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "request": self.request,
            "outcome": self.outcome,
            "reason": self.reason,
            "party": self.party,
            "released": self.released,
            "wire": None if self.facts is None else self.facts.as_dict(),
        }


@dataclass
class RouteProbe:
    route: str
    api: str
    rows: list[ProbeRow]

    def as_dict(self) -> dict[str, Any]:
        return {"route": self.route, "api": self.api, "rows": [r.as_dict() for r in self.rows]}


def responses_tools(tools: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Chat tool definitions in the Responses API's flat shape."""
    return [{"type": "function", **tool["function"]} for tool in tools]


def anthropic_tools(tools: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Chat tool definitions in the Anthropic Messages API's shape."""
    return [
        {
            "name": tool["function"]["name"],
            "description": tool["function"].get("description", ""),
            "input_schema": tool["function"]["parameters"],
        }
        for tool in tools
    ]


def _tool_choice(choice: Any, api: str) -> Any:
    forced = isinstance(choice, dict) and choice.get("type") == "function"
    if api == "responses":
        return {"type": "function", "name": choice["function"]["name"]} if forced else choice
    if api == "anthropic":
        return {"type": "tool", "name": choice["function"]["name"]} if forced else {"type": "auto"}
    return choice


def _kwargs(
    route: str, api: str, request: ProbeRequest, settings: Mapping[str, Any]
) -> dict[str, Any]:
    common: dict[str, Any] = {
        "model": route,
        "stream": True,
        "tool_choice": _tool_choice(request.tool_choice, api),
        **settings,
    }
    if api == "responses":
        return {**common, "input": request.messages(), "tools": responses_tools(PROBE_TOOLS)}
    if api == "anthropic":
        return {
            **common,
            "messages": request.messages(),
            "tools": anthropic_tools(PROBE_TOOLS),
            "max_tokens": 20_000,
        }
    return {
        **common,
        "messages": request.messages(),
        "tools": PROBE_TOOLS,
        "stream_options": {"include_usage": True},
        "num_retries": 0,
    }


def _drain_sync(result: Any) -> None:
    for _ in result:
        pass


async def _drain_async(result: Any) -> None:
    async for _ in result:
        pass


def run_request(gate: ObservedGate, api: str, kwargs: dict[str, Any]) -> tuple[str, Any, Any]:
    """One request through the gate: (outcome, reason, party)."""
    gate.begin()
    try:
        if api == "anthropic":

            async def go() -> None:
                await _drain_async(await gate.amessages(**kwargs))

            asyncio.run(go())
        elif api == "responses":
            result = gate.responses(**kwargs)
            if kwargs.get("stream"):
                _drain_sync(result)
        else:
            result = gate.completion(**kwargs)
            if kwargs.get("stream"):
                _drain_sync(result)
    except ToolCallQuarantined as exc:
        return "quarantined", exc.reason.value, exc.party.value
    except ToolGateError as exc:
        reason = getattr(exc, "reason", None)
        reason = getattr(reason, "value", reason)
        party = getattr(exc, "party", None)
        return "refused", str(reason or type(exc).__name__), getattr(party, "value", party)
    except Exception as exc:  # litellm's error: its type, never its message (it may quote)
        return "error", type(exc).__name__, None
    return "released", None, None


def probe_route(
    route: str,
    api: str = "chat",
    *,
    settings: Mapping[str, Any] | None = None,
    route_profiles: Mapping[str, str] | None = None,
    requests: Iterable[ProbeRequest] = PROBE_REQUESTS,
) -> RouteProbe:
    """Every probe request to ``route`` through a fresh observed gate."""
    if api not in APIS:
        raise ValueError(f"api must be one of {APIS}")
    rows: list[ProbeRow] = []
    gate = ObservedGate(PROBE_TOOLS, observe=True, route_profiles=route_profiles)
    try:
        for request in requests:
            kwargs = _kwargs(route, api, request, settings or {})
            outcome, reason, party = run_request(gate, api, kwargs)
            observer = gate.observer
            attempt = gate.attempt
            records = attempt.records() if attempt is not None else []
            released = [r for r in records if r.execution_state == "released"]
            if outcome == "released":
                ids = [(r.call_id, r.tool_name) for r in released if r.executor == "client"]
            else:
                ids = []
            rows.append(
                ProbeRow(
                    request=request.name,
                    outcome=outcome,
                    reason=reason,
                    party=party,
                    released=len([r for r in released if r.executor == "client"]),
                    facts=None if observer is None else observer.facts(),
                    path=_path_of(observer),
                    tool_choice=kwargs.get("tool_choice"),
                    call_ids=ids,
                    piece_sizes=[] if observer is None else [len(p) for p in observer.pieces],
                    body=b"" if observer is None else observer.body(),
                )
            )
    finally:
        gate.close()
    return RouteProbe(route, api, rows)


def _path_of(observer: WireObserver | None) -> str:
    return "" if observer is None else observer.path


def probe_routes(
    routes: Iterable[str],
    api: str = "chat",
    *,
    settings: Mapping[str, Any] | None = None,
    route_profiles: Mapping[str, str] | None = None,
    requests: Iterable[ProbeRequest] = PROBE_REQUESTS,
) -> list[RouteProbe]:
    chosen = list(requests)
    return [
        probe_route(route, api, settings=settings, route_profiles=route_profiles, requests=chosen)
        for route in routes
    ]


# ---- the table -----------------------------------------------------------------------------
COLUMNS = (
    ("request", "the probe request"),
    ("gate", "released N calls, or the quarantine reason (party), or refused/error"),
    (
        "terminal",
        "the wire's terminal: finish_reason, Responses status, Anthropic stop_reason, Gemini "
        "finishReason, Ollama done_reason, Bedrock stopReason",
    ),
    (
        "end",
        "the end marker: [DONE], response.completed, message_stop, Gemini's finish message, "
        "Ollama's done line, Bedrock's metadata (no: missing)",
    ),
    (
        "identity",
        "where a call's id and name came: first, repeated, whole, item, block; missing: no id",
    ),
    ("index", "chat: every tool-call fragment carried an index"),
    ("args", "argument fragments: count and min-max bytes, or where arguments came"),
    ("usage", "a usage report was sent"),
    ("utf8", "a transport read ended inside a UTF-8 sequence"),
    ("first-call", "ms from the request to the first argument fragment"),
    ("terminal-at", "ms from the request to the terminal"),
)


def _cells(row: ProbeRow) -> list[str]:
    if row.outcome == "released":
        gate = f"released {row.released}"
    elif row.outcome == "quarantined":
        gate = f"quarantined {row.reason} ({row.party})"
    else:
        gate = f"{row.outcome} {row.reason}"
    facts = row.facts
    if facts is None:
        return [row.request, gate] + ["-"] * (len(COLUMNS) - 2)

    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:.0f}"

    if facts.fragments:
        args = f"{facts.fragments} x {facts.fragment_bytes_min}-{facts.fragment_bytes_max} B"
    else:
        args = facts.arguments_in
    index = "-" if facts.indexed is None else "yes" if facts.indexed else "no"
    return [
        row.request,
        gate,
        facts.terminal or "none",
        "yes" if facts.end_marker else "no",
        facts.identity,
        index,
        args,
        "yes" if facts.usage else "no",
        "split" if facts.utf8_split else "-",
        ms(facts.first_call_ms),
        ms(facts.terminal_ms),
    ]


def render(probes: Iterable[RouteProbe]) -> str:
    """The conformance table of every route, as text."""
    out: list[str] = []
    for probe in probes:
        wire = next((r.facts.wire for r in probe.rows if r.facts is not None), "-")
        out.append(f"route {probe.route} (API: {probe.api}, wire: {wire})")
        table = [[name for name, _ in COLUMNS]] + [_cells(row) for row in probe.rows]
        widths = [max(len(line[i]) for line in table) for i in range(len(COLUMNS))]
        for line in table:
            out.append("  " + "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)))
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def to_json(probes: Iterable[RouteProbe]) -> str:
    return json.dumps({"routes": [p.as_dict() for p in probes]}, indent=2) + "\n"
