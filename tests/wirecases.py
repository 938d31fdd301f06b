"""A wire's fixture folder as the tests read it, and the replay of its bodies through the core.

``Fixtures("ollama")`` is ``fixtures/ollama``: its manifest, its cases by name (the streamed and
the whole ones apart), their bodies and the tool registry of the manifest's tools.
``CoreWire`` adds what binds a body to the wire (the response path and a streamed body's
content type) and replays a body through a sans-I/O ``Attempt``: the calls it releases, the
text it passes live, the quarantine if any. ``refused`` is what every quarantine in the
manifest must look like. No litellm.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import CANARY, expected

from litellm_toolgate.core import (
    Attempt,
    Carrier,
    PolicyDecision,
    QuarantineReason,
    ToolCallQuarantined,
    ToolRegistry,
)
from litellm_toolgate.core.decision.events import TextDelta
from litellm_toolgate.core.decision.state import StreamState, Wire

ROOT = Path(__file__).resolve().parent.parent
Replayed = tuple[list[dict[str, Any]], str, ToolCallQuarantined | None, Attempt]


class Fixtures:
    """``fixtures/<folder>``: the manifest, the cases by name, the bodies, the registry."""

    def __init__(self, folder: str) -> None:
        self.folder = ROOT / "fixtures" / folder
        text = (self.folder / "manifest.json").read_text(encoding="utf-8")
        self.manifest: dict[str, Any] = json.loads(text)
        self.cases: dict[str, dict[str, Any]] = {c["name"]: c for c in self.manifest["cases"]}
        self.streamed = sorted(n for n, c in self.cases.items() if c.get("streamed", True))
        self.whole = sorted(n for n, c in self.cases.items() if not c.get("streamed", True))
        self.registry = ToolRegistry.from_tools(self.manifest["tools"])

    def body(self, name: str) -> bytes:
        return (self.folder / self.cases[name]["body"]).read_bytes()

    def through_litellm(self, name: str) -> dict[str, Any]:
        """The case as expected through this litellm version: its ``via_litellm`` outcome
        where litellm's chunks differ from the wire, else the wire's."""
        case = dict(self.cases[name])
        case["expect"], case["reason"] = expected(case)
        if case["reason"] is None:
            del case["reason"]
        return case


class CoreWire(Fixtures):
    """The fixtures of a wire the core reads at ``path`` (a whole body at ``whole_path``, the
    same unless given), streamed as ``content_type``."""

    def __init__(
        self,
        folder: str,
        *,
        wire: Wire,
        path: str,
        content_type: str,
        attempt_id: str,
        whole_path: str | None = None,
    ) -> None:
        super().__init__(folder)
        self.wire = wire
        self.path = path
        self.whole_path = path if whole_path is None else whole_path
        self.content_type = content_type
        self.attempt_id = attempt_id

    def check_generator(self, out: Path) -> None:
        """The folder's ``generate.py``, run into ``out``, writes exactly the files on disk."""
        subprocess.run(
            [sys.executable, str(self.folder / "generate.py"), "--out", str(out)],
            check=True,
            capture_output=True,
        )
        for path in out.iterdir():
            assert path.read_bytes() == (self.folder / path.name).read_bytes(), path.name
        assert {p.name for p in out.iterdir()} == {
            p.name for p in self.folder.iterdir() if p.name != "generate.py"
        }

    def replay(
        self,
        pieces: list[bytes] | None = None,
        *,
        whole: bytes | None = None,
        carrier: Carrier | None = None,
        route: str = "",
    ) -> Replayed:
        """The streamed body in ``pieces`` (or the ``whole`` body) through one attempt whose
        every call is approved: the calls released, the text, the quarantine, the attempt."""
        attempt = Attempt(self.registry, attempt_id=self.attempt_id, clock=lambda: 0.0, route=route)
        text: list[str] = []
        released: list[dict[str, Any]] = []
        fault = None
        try:
            if whole is not None:
                attempt.bind_response(
                    content_type="application/json", streamed=False, path=self.whole_path
                )
                attempt.receive_body(whole)
            else:
                attempt.bind_response(content_type=self.content_type, streamed=True, path=self.path)
                for piece in pieces or []:
                    for event in attempt.receive_bytes(piece):
                        if isinstance(event, TextDelta):
                            text.append(event.text)
                attempt.receive_eof()
            for call in attempt.conclude(carrier):
                attempt.decide(call.index, PolicyDecision.approve())
            released = [
                {"call_id": c.call_id, "name": c.name, "arguments": c.arguments}
                for c in attempt.release()
            ]
        except ToolCallQuarantined as exc:
            fault = exc
        return released, "".join(text), fault, attempt

    def check(self, name: str, pieces: list[bytes] | None = None) -> None:
        """The manifest's outcome for case ``name``: a streamed case read in ``pieces``, a
        whole one read whole. Released: exactly the manifest's calls (and its text, streamed).
        Refused: see ``refused``."""
        case = self.cases[name]
        if case["streamed"]:
            released, text, fault, attempt = self.replay(pieces)
            assert fault is not None or text == case["text"]
        else:
            released, text, fault, attempt = self.replay(whole=self.body(name))
        assert attempt.wire is self.wire
        if case["expect"] == "release":
            assert fault is None, f"{name}: {fault!r}"
            assert released == case["calls"]
            assert attempt.state is StreamState.RELEASED
        else:
            refused(case, released, fault)


def refused(
    case: dict[str, Any], released: list[dict[str, Any]], fault: ToolCallQuarantined | None
) -> None:
    """Quarantined for the manifest's reason, nothing released, the canary in no rendering of
    the fault and in none of its records, every record marked quarantined."""
    name = case["name"]
    assert fault is not None, f"{name}: released {released!r}"
    assert fault.reason is QuarantineReason(case["reason"]), f"{name}: {fault.reason}"
    assert released == []
    for rendered in (str(fault), repr(fault), repr(fault.args)):
        assert CANARY not in rendered
    for record in fault.records:
        assert CANARY not in record.model_dump_json()
        assert record.execution_state == "quarantined"
