"""``toolgate verify DIR``: replay every fixture under a directory through the gate and litellm.

Every ``manifest.json`` under ``DIR`` is read: the project's own (``fixtures/chat``,
``fixtures/responses``, ``fixtures/anthropic``, ``fixtures/profiles``) and those ``toolgate
record`` wrote. Each case's body is served by a loopback server (the fake upstream, on
127.0.0.1) to the real litellm through a :class:`ToolGate`, sync and then async, and the
outcome is compared with the manifest's: released with exactly the expected calls (ids and
names, in order), or quarantined for the expected reason. A difference is printed as the
expected and the actual outcome, never with argument text (the calls are named by id and
tool name only), and the command exits non-zero.

Where a case runs:

* chat wire: ``gate.completion`` on the case's route (``cometapi/gpt-4o-mini`` unless the
  case or manifest names one), the request's ``tool_choice`` sent as recorded;
* Responses wire: ``gate.responses`` on ``openai/gpt-4o-mini`` (a model litellm serves
  natively), the case route's profile (``lm_studio/...``) given as ``route_profiles``; a
  recorded route is replayed on itself;
* Anthropic wire: ``gate.completion`` on ``anthropic/claude-sonnet-4-5`` (or the recorded
  route), streamed or whole as the case says;
* Gemini, Ollama and Bedrock wires (``fixtures/gemini``, ``fixtures/ollama``,
  ``fixtures/bedrock``): ``gate.completion`` on ``gemini/gemini-2.5-flash``,
  ``ollama_chat/qwen3:8b`` and ``bedrock/converse/<the manifest's model>`` (with throwaway
  AWS credentials: litellm signs the request), each body served with its wire's media type;
* watsonx.ai's chat wire (``fixtures/watsonx``): ``gate.completion`` on
  ``watsonx/ibm/granite-3-3-8b-instruct``, with a throwaway ``token`` (litellm then asks
  IBM's IAM for none) and ``project_id``;
* Cohere's v2 chat wire (``fixtures/cohere``): ``gate.completion`` on
  ``cohere/command-a-03-2025`` for a whole case (litellm sends it over its own client,
  which the gate claims for the call); a streamed case must be refused before sending, for
  the table's reason (litellm's Cohere stream reader fails on every stream).

A manifest's wire is its ``wire`` entry, or else its folder's name when that names a wire,
or else chat (``fixtures/profiles``, a folder of chat recordings); a ``wire`` entry that
names no wire the gate reads is an error (exit 2), never replayed as another.

A case's ``via_litellm`` entry (the outcome through a given litellm version, where litellm
mangles a valid wire) overrides its expected outcome on that version; ``transport`` cuts
(``disconnect_after``, ``stall_after``) are served as such.

With two or more interpreters (``--python``), each runs this command on the same directory
(``-m litellm_toolgate.cli verify DIR --json``) and every case is classified from the first
interpreter to the last: ``unchanged``, ``fixed`` or ``regressed``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from ..core.decision.limits import Limits
from ..core.decision.profiles import PROFILES
from ..core.decision.state import Wire
from ..core.wires import WIRES
from ..edge.routes import Api, decision_for
from ..loopback.upstream import FakeUpstream, Scripted
from .observed import ObservedGate
from .probe import run_request
from .record import versions

__all__ = ["Case", "classify", "cross_verify", "load_cases", "verify"]

_RESPONSES_MODEL = "openai/gpt-4o-mini"
_CHAT_MODEL = "cometapi/gpt-4o-mini"
_AWS = {
    "aws_access_key_id": "AKIDVERIFY",
    "aws_secret_access_key": "not-a-secret",
    "aws_region_name": "us-east-1",
}


@dataclass(frozen=True)
class _Replay:
    """How one wire's fixtures are replayed through litellm: its route unless the manifest
    or case names one, whether litellm is given the server's root (not ``/v1``), and what
    else the route's call needs."""

    model: str | None
    root: bool = True
    extra: dict[str, Any] = field(default_factory=dict)
    path: str = ""
    """Appended to the server's URL for ``api_base`` (a route that takes the whole URL)."""


_REPLAYS: dict[str, _Replay] = {
    "chat": _Replay(_CHAT_MODEL, root=False),
    "responses": _Replay(_RESPONSES_MODEL, root=False),
    "anthropic": _Replay("anthropic/claude-sonnet-4-5"),
    "gemini": _Replay("gemini/gemini-2.5-flash"),
    "ollama": _Replay("ollama_chat/qwen3:8b"),
    "bedrock": _Replay(None, extra=_AWS),  # bedrock/converse/<the manifest's model>
    "cohere": _Replay("cohere/command-a-03-2025", path="/v2/chat"),
    # token=: litellm's bearer token, so it asks IBM's IAM for none; project_id: required.
    "watsonx": _Replay(
        "watsonx/ibm/granite-3-3-8b-instruct",
        extra={"token": "verify-token", "project_id": "verify"},
    ),
}
_WHOLE_ONLY = frozenset({"cohere"})
"""Wires whose route gates whole calls only (litellm's Cohere stream reader fails on every
stream): a streamed case must be refused before sending."""


class UnknownWire(ValueError):
    """A manifest names a wire the gate does not read."""


@dataclass
class Case:
    """One fixture to replay."""

    ident: str
    """``<manifest folder, relative to DIR>/<case name>``."""
    wire: str
    model: str
    body: bytes = field(repr=False)
    streamed: bool
    tools: list[Any] = field(repr=False)
    request: dict[str, Any]
    route_profiles: dict[str, str]
    expect: str
    reason: str | None
    calls: list[tuple[str | None, str | None]] | None
    transport: dict[str, int]
    chunk_sizes: list[int] | None
    media: str = "text/event-stream"


# Where the outcome through litellm's chat carrier differs from the core's on every litellm
# version (tests/test_gate_anthropic.py says why): two tool blocks open at once make litellm
# mix the calls' arguments, and the cross-check refuses them.
_THROUGH_CHAT = {("anthropic", "tool_deltas_overlap"): ("quarantine", "carrier_mismatch")}


def _litellm_prefix_outcome(case: dict[str, Any], litellm: str) -> tuple[str, str | None]:
    for prefix, outcome in (case.get("via_litellm") or {}).items():
        if litellm.startswith(prefix):
            return outcome["expect"], outcome.get("reason")
    return case["expect"], case.get("reason")


def _calls(case: dict[str, Any]) -> list[tuple[str | None, str | None]] | None:
    calls = case.get("released", case.get("calls"))
    if calls is None:
        return None
    return [(c.get("id", c.get("call_id")), c.get("name")) for c in calls]


def load_cases(root: Path) -> list[Case]:
    """Every case of every manifest under ``root`` (or ``root`` itself, a manifest)."""
    manifests = [root] if root.is_file() else sorted(root.rglob("manifest.json"))
    litellm = versions()["litellm"]
    chat_tools: list[Any] | None = None
    cases: list[Case] = []
    for path in manifests:
        manifest = json.loads(path.read_text("utf-8"))
        folder = path.parent
        base = root if root.is_dir() else root.parent
        label = folder.relative_to(base).as_posix() if folder != base else folder.name
        recorded = manifest.get("recorded")
        tools = manifest.get("tools")
        if tools is None:  # fixtures/profiles: the chat fixtures' tools
            if chat_tools is None:
                chat_manifest = folder.parent / "chat" / "manifest.json"
                chat_tools = json.loads(chat_manifest.read_text("utf-8"))["tools"]
            tools = chat_tools
        for case in manifest.get("cases", []):
            wire = case.get("wire") or manifest.get("wire")
            if wire is None:
                wire = folder.name if folder.name in _REPLAYS else "chat"
            elif wire not in _REPLAYS:
                raise UnknownWire(f"{path}: the wire {str(wire)[:40]!r} is not one the gate reads")
            route = case.get("route") or manifest.get("route")
            if route is None and wire == "bedrock" and isinstance(manifest.get("model"), str):
                route = "bedrock/converse/" + manifest["model"]
            profiles: dict[str, str] = dict((recorded or {}).get("route_profiles") or {})
            if wire == "responses" and not recorded:
                model = _RESPONSES_MODEL
                prefix = (route or "openai/").split("/", 1)[0]
                profiles = {model: prefix if prefix in PROFILES else "strict"}
            else:
                model = route or _REPLAYS[wire].model or ""
            body_name = case["body"]
            expect, reason = _litellm_prefix_outcome(case, litellm)
            if not recorded:
                expect, reason = _THROUGH_CHAT.get((wire, case["name"]), (expect, reason))
            cases.append(
                Case(
                    ident=f"{label}/{case['name']}",
                    wire=wire,
                    model=model,
                    body=(folder / body_name).read_bytes(),
                    streamed=case.get("streamed", not body_name.endswith(".json")),
                    tools=tools,
                    request=dict(case.get("request") or {}),
                    route_profiles=profiles,
                    expect=expect,
                    reason=reason,
                    calls=_calls(case),
                    transport=dict(case.get("transport") or {}),
                    chunk_sizes=case.get("chunk_sizes"),
                    media=_media(wire),
                )
            )
    return cases


def _media(wire: str) -> str:
    """The media type of the wire's streamed body (SSE but for Ollama's and Bedrock's)."""
    return WIRES[Wire(wire)].media[True]


# ---- one replay ------------------------------------------------------------------------------
def _scripted(case: Case) -> Scripted:
    if not case.streamed:
        return Scripted(case.body, content_type="application/json")
    return Scripted(
        case.body,
        content_type=case.media,
        chunk_sizes=case.chunk_sizes or [64],
        disconnect_after=case.transport.get("disconnect_after"),
        stall_after=case.transport.get("stall_after"),
    )


def _kwargs(case: Case, upstream: FakeUpstream) -> tuple[str, dict[str, Any]]:
    common: dict[str, Any] = {
        "model": case.model,
        "stream": case.streamed,
        "api_key": "sk-verify",
        "tools": case.tools,
        **case.request,
    }
    message = [{"role": "user", "content": "Replay the recorded answer."}]
    if case.wire == "responses":
        return "responses", {**common, "input": message, "api_base": upstream.base_url}
    replay = _REPLAYS[case.wire]
    base = upstream.root_url if replay.root else upstream.base_url
    return "chat", {
        **common,
        **replay.extra,
        "messages": message,
        "api_base": base + replay.path,
        "num_retries": 0,
    }


def expected_in(case: Case, mode: str) -> Case:
    """The case as ``mode`` (sync or async) must end: on a route gated for whole calls only,
    a streamed case is refused before sending, for the table's reason."""
    if case.wire in _WHOLE_ONLY and case.streamed:
        provider = case.model.split("/", 1)[0]
        gated = decision_for(provider, Api.CHAT)
        reason = getattr(gated, "streams", None) or getattr(gated, "reason", "")
        return replace(case, expect="refused", reason=reason, calls=None)
    return case


def replay(case: Case, upstream: FakeUpstream, *, asynchronous: bool) -> dict[str, Any]:
    """One replay of ``case``: its outcome, reason and released calls."""
    gate = ObservedGate(
        case.tools,
        route_profiles=case.route_profiles,
        limits=Limits(idle_timeout=2.0),
    )
    api, kwargs = _kwargs(case, upstream)
    upstream.enqueue(_scripted(case))
    try:
        if asynchronous:
            outcome, reason, party = asyncio.run(_areplay(gate, api, kwargs))
        else:
            outcome, reason, party = run_request(gate, api, kwargs)
    finally:
        gate.close()
    if outcome == "refused":
        upstream.discard()  # nothing was sent: the scripted answer is no other case's
    attempt = gate.attempt
    records = [] if attempt is None else attempt.records()
    calls = [
        [r.call_id, r.tool_name]
        for r in records
        if r.execution_state == "released" and r.executor == "client"
    ]
    return {"outcome": outcome, "reason": reason, "party": party, "calls": calls}


async def _areplay(gate: ObservedGate, api: str, kwargs: dict[str, Any]) -> tuple[str, Any, Any]:
    gate.begin()
    from ..core.errors import ToolCallQuarantined, ToolGateError

    try:
        if api == "responses":
            result = await gate.aresponses(**kwargs)
        else:
            result = await gate.acompletion(**kwargs)
        if kwargs.get("stream"):
            async for _ in result:
                pass
    except ToolCallQuarantined as exc:
        return "quarantined", exc.reason.value, exc.party.value
    except ToolGateError as exc:
        reason = getattr(exc, "reason", None)
        return "refused", str(getattr(reason, "value", reason) or type(exc).__name__), None
    except Exception as exc:  # litellm's error: its type only (its message may quote)
        return "error", type(exc).__name__, None
    finally:
        await gate.aclose()
    return "released", None, None


def differences(case: Case, actual: dict[str, Any]) -> list[str]:
    """What differs between the case's expected outcome and ``actual`` (readable lines)."""
    want = {"release": "released", "quarantine": "quarantined"}.get(case.expect, case.expect)
    if actual["outcome"] != want:
        return [f"expected {describe_expected(case)}, got {describe(actual)}"]
    if want != "released":
        if actual["reason"] != case.reason:
            return [f"expected {describe_expected(case)}, got {describe(actual)}"]
        return []
    if case.calls is None:
        return []
    # Released calls are compared as a set of (id, tool): a wire's order of completion and
    # the gate's order of release (by index) may differ, and either is fine.
    got = [(c[0], c[1]) for c in actual["calls"]]
    if sorted(got, key=str) == sorted(case.calls, key=str):
        return []
    lines = [
        f"expected call {call_id} ({name}), not released"
        for call_id, name in case.calls
        if (call_id, name) not in got
    ]
    lines += [
        f"released call {call_id} ({name}), not expected"
        for call_id, name in got
        if (call_id, name) not in case.calls
    ]
    return lines or [f"expected {len(case.calls)} released call(s), got {len(got)}"]


def describe_expected(case: Case) -> str:
    if case.expect == "refused":
        return "refused by the route table"
    if case.expect == "release":
        count = "" if case.calls is None else f" ({len(case.calls)} call(s))"
        return f"release{count}"
    return f"{case.expect} {case.reason}"


def describe(actual: dict[str, Any]) -> str:
    if actual["outcome"] == "released":
        return f"release ({len(actual['calls'])} call(s))"
    if actual["outcome"] == "quarantined":
        return f"quarantine {actual['reason']} ({actual['party']})"
    return f"{actual['outcome']} {actual['reason']}"


def verify(root: Path, out: TextIO, *, json_path: Path | None = None) -> int:
    """Replay every case under ``root``; print expected vs actual; 1 on any difference, 2
    when a manifest names a wire the gate does not read."""
    try:
        cases = load_cases(root)
    except UnknownWire as exc:
        sys.stderr.write(f"toolgate verify: {exc}\n")
        return 2
    results: list[dict[str, Any]] = []
    failed = 0
    with FakeUpstream() as upstream:
        current = None
        for case in cases:
            group = case.ident.rsplit("/", 1)[0]
            if group != current:
                current = group
                out.write(f"{group} (route {case.model}, wire {case.wire})\n")
            runs = {
                mode: replay(case, upstream, asynchronous=mode == "async")
                for mode in ("sync", "async")
            }
            diffs = {
                mode: differences(expected_in(case, mode), actual) for mode, actual in runs.items()
            }
            ok = not any(diffs.values())
            failed += not ok
            name = case.ident.rsplit("/", 1)[1]
            wanted = {describe_expected(expected_in(case, mode)) for mode in runs}
            said = (
                wanted.pop()
                if len(wanted) == 1
                else "; ".join(
                    f"{mode} {describe_expected(expected_in(case, mode))}" for mode in runs
                )
            )
            if ok:
                out.write(f"  ok    {name}: {said}\n")
            else:
                out.write(f"  DIFF  {name}: expected {said}\n")
                for mode, lines in diffs.items():
                    for line in lines:
                        out.write(f"          {mode}: {line}\n")
            results.append(
                {
                    "case": case.ident,
                    "route": case.model,
                    "wire": case.wire,
                    "expected": {"outcome": case.expect, "reason": case.reason},
                    **runs,
                    "differences": diffs,
                    "ok": ok,
                }
            )
    out.write(
        f"{len(cases)} fixture(s), {failed} with differences "
        f"(litellm {versions()['litellm']}, sync and async)\n"
    )
    if json_path is not None:
        report = {"python": sys.executable, **versions(), "cases": results}
        json_path.write_text(json.dumps(report, indent=2) + "\n", "utf-8")
    return 1 if failed else 0


# ---- across interpreters ---------------------------------------------------------------------
def cross_verify(root: Path, pythons: Iterable[str], out: TextIO) -> int:
    """Run ``verify`` under each interpreter; classify every case from the first to the last.

    Exits 1 when a case regressed, or fails under the last interpreter.
    """
    reports: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch:
        for number, python in enumerate(pythons):
            target = Path(scratch) / f"verify-{number}.json"
            command = [python, "-m", "litellm_toolgate.cli", "verify", str(root)]
            subprocess.run(
                [*command, "--json", str(target)],
                env={**os.environ},
                stdout=subprocess.DEVNULL,
                check=False,
            )
            if not target.exists():
                out.write(f"{python}: verify did not run\n")
                return 2
            reports.append(json.loads(target.read_text("utf-8")))
    first, last = reports[0], reports[-1]
    out.write(f"litellm {first['litellm']} -> litellm {last['litellm']}\n")
    rows = classify(first, last)
    state = {True: "ok", False: "DIFF", None: "missing"}
    for ident, was, now, verdict in rows:
        out.write(f"  {verdict:<9}  {state[was]:>7} -> {state[now]:<7}  {ident}\n")
    regressed = sum(verdict == "regressed" for *_, verdict in rows)
    failing = sum(now is not True for _, _, now, _ in rows)
    out.write(f"{regressed} regressed, {failing} failing under litellm {last['litellm']}\n")
    return 1 if regressed or failing else 0


def classify(
    first: dict[str, Any], last: dict[str, Any]
) -> list[tuple[str, bool | None, bool | None, str]]:
    """Each case of two ``verify --json`` reports: (case, ok before, ok after, verdict), the
    verdict ``unchanged``, ``fixed`` (failed before, passes after) or ``regressed``."""
    before = {c["case"]: bool(c["ok"]) for c in first["cases"]}
    after = {c["case"]: bool(c["ok"]) for c in last["cases"]}
    rows: list[tuple[str, bool | None, bool | None, str]] = []
    for ident in sorted(set(before) | set(after)):
        was, now = before.get(ident), after.get(ident)
        if was == now:
            verdict = "unchanged"
        elif now and not was:
            verdict = "fixed"
        else:
            verdict = "regressed"
        rows.append((ident, was, now, verdict))
    return rows


def subprocess_verify(root: Path, python: str, json_path: Path | None) -> int:
    """``verify`` under another interpreter, its output passed through."""
    command = [python, "-m", "litellm_toolgate.cli", "verify", str(root)]
    if json_path is not None:
        command += ["--json", str(json_path)]
    return subprocess.run(command, env={**os.environ}, check=False).returncode
