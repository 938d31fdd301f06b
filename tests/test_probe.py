"""``toolgate probe``, ``record`` and ``verify`` against the loopback fake's route personalities.

The fake upstream (``litellm_toolgate/demo/personalities.py``) streams the probe's requests
the way different routes do; each test runs the real ``toolgate`` entry point through the
real litellm and reads the conformance table it prints.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import litellm
import pytest
from conftest import CANARY

from litellm_toolgate.cli import main
from litellm_toolgate.demo.personalities import (
    bedrock_body,
    chat_body,
    gemini_body,
    ollama_body,
    personality_answer,
)
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted
from litellm_toolgate.operate.verify import classify

litellm.suppress_debug_info = True

REQUESTS = [
    "one_call",
    "parallel_calls",
    "no_arguments",
    "text_then_call",
    "large_argument",
    "non_ascii",
]
CALLS = {"parallel_calls": 2}
# Routes other than the standard one are probed with a few requests, to keep the tests quick.
FEW = ["one_call", "parallel_calls", "non_ascii"]
FEW_ARGS = [a for name in FEW for a in ("--request", name)]


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream(personality_answer) as server:
        yield server


def probe(
    capsys: pytest.CaptureFixture[str], upstream: FakeUpstream, *extra: str, root: bool = False
) -> dict[str, dict[str, list[str]]]:
    """Run ``toolgate probe``; the printed table as {route: {request: cells}}."""
    base = upstream.root_url if root else upstream.base_url
    code = main(["probe", "--api-base", base, "--api-key", "sk-probe", *extra])
    assert code == 0
    return parse(capsys.readouterr().out)


def parse(text: str) -> dict[str, dict[str, list[str]]]:
    tables: dict[str, dict[str, list[str]]] = {}
    route = ""
    for line in text.splitlines():
        if line.startswith("route "):
            route = line.split()[1]
            tables[route] = {}
        elif line.startswith("  ") and route:
            cells = re.split(r"\s{2,}", line.strip())
            if cells[0] != "request":
                tables[route][cells[0]] = cells
    return tables


COLUMNS = [
    "request",
    "gate",
    "terminal",
    "end",
    "identity",
    "index",
    "args",
    "usage",
    "utf8",
    "first-call",
    "terminal-at",
]


def column(row: list[str], name: str) -> str:
    return row[COLUMNS.index(name)]


def released(request: str) -> str:
    return f"released {CALLS.get(request, 1)}"


def test_the_table_of_each_chat_personality(
    capsys: pytest.CaptureFixture[str], upstream: FakeUpstream, tmp_path: Path
) -> None:
    routes = [
        "standard",
        "repeat-identity",
        "no-done",
        "forced-stop",
        "utf8-split",
        "mistral",
    ]
    args = [a for name in routes[1:] for a in ("--model", f"cometapi/probe-{name}")]
    tables = probe(capsys, upstream, *args, *FEW_ARGS, "--json", str(tmp_path / "probe.json"))
    assert sorted(tables) == sorted(f"cometapi/probe-{name}" for name in routes[1:])
    for rows in tables.values():
        assert list(rows) == FEW
    tables.update(probe(capsys, upstream, "--model", "cometapi/probe-standard"))
    assert list(tables["cometapi/probe-standard"]) == REQUESTS
    for route, rows in tables.items():
        for request, row in rows.items():
            # The times were measured (never asserted: the machine may be busy).
            assert re.fullmatch(r"\d+", column(row, "first-call")), (route, row)
            assert re.fullmatch(r"\d+", column(row, "terminal-at")), (route, row)
            assert column(row, "usage") == "yes"
            if request == "large_argument" and "mistral" not in route:
                assert column(row, "args").startswith("1343 x ")

    standard = tables["cometapi/probe-standard"]
    for request, row in standard.items():
        assert row[1:9] == [
            released(request),
            "tool_calls",
            "yes",
            "first",
            "yes",
            row[6],
            "yes",
            row[8],
        ]
    assert column(standard["no_arguments"], "args") == "1 x 2-2 B"
    assert column(standard["one_call"], "args") == "2 x 4-12 B"

    for request, row in tables["cometapi/probe-repeat-identity"].items():
        assert column(row, "gate") == released(request)
        assert column(row, "identity") == "repeated"

    for row in tables["cometapi/probe-no-done"].values():
        assert column(row, "gate") == "quarantined missing_done (remote)"
        assert (column(row, "terminal"), column(row, "end")) == ("tool_calls", "no")

    for row in tables["cometapi/probe-forced-stop"].values():
        assert column(row, "gate") == "quarantined finish_reason_mismatch (remote)"
        assert (column(row, "terminal"), column(row, "end")) == ("stop", "yes")

    split = tables["cometapi/probe-utf8-split"]
    assert column(split["non_ascii"], "utf8") == "split"
    assert column(split["one_call"], "utf8") == "-"
    assert all(column(row, "gate") == released(r) for r, row in split.items())

    for row in tables["cometapi/probe-mistral"].values():
        # A strict route: whole calls without an index are refused at the first fragment.
        assert column(row, "gate") == "quarantined invalid_call_index (remote)"
        assert (column(row, "identity"), column(row, "index")) == ("whole", "no")
    assert column(tables["cometapi/probe-mistral"]["non_ascii"], "args") == "1 x 84-84 B"

    written = json.loads((tmp_path / "probe.json").read_text())
    json_rows = {r["route"]: r["rows"] for r in written["routes"]}
    assert json_rows["cometapi/probe-no-done"][0]["reason"] == "missing_done"
    assert json_rows["cometapi/probe-no-done"][0]["wire"]["end_marker"] is False
    assert json_rows["cometapi/probe-mistral"][0]["wire"]["identity"] == "whole"


def test_profiles_change_the_verdict_not_the_wire(
    capsys: pytest.CaptureFixture[str], upstream: FakeUpstream
) -> None:
    """The same personality on the route whose profile admits it: released."""
    tables = probe(
        capsys,
        upstream,
        "--model",
        "openai/probe-forced-stop",
        "--model",
        "mistral/probe-mistral",
        "--request",
        "one_call",
        "--request",
        "text_then_call",
    )
    forced = tables["openai/probe-forced-stop"]
    # Only the forced request (a named tool choice) may end with "stop" on openai/.
    assert column(forced["one_call"], "gate") == "released 1"
    assert column(forced["text_then_call"], "gate") == "quarantined finish_reason_mismatch (remote)"
    mistral = tables["mistral/probe-mistral"]
    assert column(mistral["one_call"], "gate") == "released 1"
    assert column(mistral["one_call"], "identity") == "whole"


def test_lm_studio_arguments_only_in_done_on_the_responses_api(
    capsys: pytest.CaptureFixture[str], upstream: FakeUpstream
) -> None:
    common = ["--api", "responses", "--model", "openai/gpt-4o-mini", *FEW_ARGS]
    header = ["--header", "X-Fake-Personality: lm-studio"]
    strict = probe(capsys, upstream, *common, *header)["openai/gpt-4o-mini"]
    for row in strict.values():
        assert column(row, "gate") == "quarantined item_mismatch (remote)"
        assert column(row, "args") == "done only"
        assert (column(row, "terminal"), column(row, "end")) == ("completed", "yes")
    admitted = probe(
        capsys, upstream, *common, *header, "--profile", "openai/gpt-4o-mini=lm_studio"
    )["openai/gpt-4o-mini"]
    for request, row in admitted.items():
        assert column(row, "gate") == released(request)
        assert column(row, "identity") == "item"
    standard = probe(capsys, upstream, *common)["openai/gpt-4o-mini"]
    for request, row in standard.items():
        assert column(row, "gate") == released(request)
        assert column(row, "args") != "done only"


def test_the_anthropic_wire(capsys: pytest.CaptureFixture[str], upstream: FakeUpstream) -> None:
    table = probe(capsys, upstream, "--model", "anthropic/claude-sonnet-4-5", *FEW_ARGS, root=True)
    for request, row in table["anthropic/claude-sonnet-4-5"].items():
        assert row[1:6] == [released(request), "tool_use", "yes", "block", "-"]
    # The Anthropic Messages API (litellm's anthropic entry point), same wire.
    messages = probe(
        capsys,
        upstream,
        "--api",
        "anthropic",
        "--model",
        "anthropic/claude-sonnet-4-5",
        "--request",
        "parallel_calls",
        root=True,
    )
    row = messages["anthropic/claude-sonnet-4-5"]["parallel_calls"]
    assert row[1:6] == ["released 2", "tool_use", "yes", "block", "-"]


# The wires of whole calls and of event-stream frames. Bedrock's credentials come from
# litellm's own lookup (here: throwaway ones in the environment; litellm signs the request).
BEDROCK_ROUTE = "bedrock/converse/anthropic.claude-3-5-sonnet-20240620-v1:0"
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "AKIDPROBE",
    "AWS_SECRET_ACCESS_KEY": "not-a-secret",
    "AWS_REGION_NAME": "us-east-1",
}


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in AWS_ENV.items():
        monkeypatch.setenv(name, value)


def test_the_gemini_ollama_and_bedrock_wires(
    capsys: pytest.CaptureFixture[str], upstream: FakeUpstream, aws: None, tmp_path: Path
) -> None:
    routes = ["gemini/probe-standard", "ollama_chat/probe-standard", BEDROCK_ROUTE]
    models = [a for route in routes for a in ("--model", route)]
    out = tmp_path / "probe.json"
    tables = probe(capsys, upstream, *models, *FEW_ARGS, "--json", str(out), root=True)
    assert list(tables) == routes
    # (terminal, end, identity, args of one_call, of parallel_calls, of non_ascii)
    expected = {
        # Whole calls without ids, each args object one fragment; the finish message ends it.
        "gemini/probe-standard": ("STOP", "missing", "16-16", "84-84"),
        # Whole calls with the server's ids; the done line ends it.
        "ollama_chat/probe-standard": ("stop", "whole", "16-16", "84-84"),
        # Tool blocks (id and name on the start), arguments in 12-character deltas.
        BEDROCK_ROUTE: ("tool_use", "block", "4-12", "12-20"),
    }
    for route, (terminal, identity, small, unicode) in expected.items():
        rows = tables[route]
        assert list(rows) == FEW
        for request, row in rows.items():
            assert row[1:6] == [released(request), terminal, "yes", identity, "-"], (route, row)
            assert column(row, "usage") == "yes"
            assert re.fullmatch(r"\d+", column(row, "first-call")), (route, row)
        whole = route != BEDROCK_ROUTE
        assert column(rows["one_call"], "args") == f"{1 if whole else 2} x {small} B"
        assert column(rows["parallel_calls"], "args") == f"{2 if whole else 4} x {small} B"
        assert column(rows["non_ascii"], "args") == f"{1 if whole else 6} x {unicode} B"
    written = {r["route"]: r["rows"] for r in json.loads(out.read_text())["routes"]}
    facts = {route: rows[0]["wire"] for route, rows in written.items()}
    assert [facts[r]["wire"] for r in routes] == ["gemini", "ollama", "bedrock"]
    assert [facts[r]["arguments_in"] for r in routes] == ["object", "object", "deltas"]
    assert all(f["undecodable"] == 0 and f["after_end"] == 0 for f in facts.values())
    assert facts[BEDROCK_ROUTE]["content_type"] == "application/vnd.amazon.eventstream"


def test_vertex_gemini_is_probed_on_the_gemini_wire(
    capsys: pytest.CaptureFixture[str],
    upstream: FakeUpstream,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """A Gemini model of ``vertex_ai/``: litellm finds the project, the location and a
    throwaway service account in the environment (its own lookup, as for any call), fetches
    its token on loopback, and calls Vertex's ``streamGenerateContent``; the probe reads the
    Gemini wire there, as on ``gemini/``."""
    from vertexauth import LOCATION, PROJECT, TOKENS, new_credentials

    monkeypatch.setenv("VERTEXAI_PROJECT", PROJECT)
    monkeypatch.setenv("VERTEXAI_LOCATION", LOCATION)
    monkeypatch.setenv("VERTEXAI_CREDENTIALS", new_credentials())  # no token kept for it yet
    route = "vertex_ai/gemini-probe-standard"
    tokens = len(TOKENS)
    out = tmp_path / "probe.json"
    tables = probe(capsys, upstream, "--model", route, *FEW_ARGS, "--json", str(out), root=True)
    assert len(TOKENS) == tokens + 1  # litellm's Vertex sign-in ran, once
    rows = tables[route]
    assert list(rows) == FEW
    (written,) = json.loads(out.read_text())["routes"]
    assert written["route"] == route and written["rows"][0]["wire"]["wire"] == "gemini"
    for request, row in rows.items():
        assert row[1:6] == [released(request), "STOP", "yes", "missing", "-"], row
    assert column(rows["one_call"], "args") == "1 x 16-16 B"
    assert column(rows["non_ascii"], "args") == "1 x 84-84 B"


# ---- record, then verify ---------------------------------------------------------------------
def record(
    capsys: pytest.CaptureFixture[str], upstream: FakeUpstream, out: Path, *args: str
) -> None:
    code = main(
        [
            "record",
            "--api-base",
            upstream.base_url,
            "--api-key",
            "sk-probe",
            *args,
            "--out",
            str(out),
        ]
    )
    assert code == 0
    capsys.readouterr()


def verify(capsys: pytest.CaptureFixture[str], folder: Path) -> tuple[int, str]:
    code = main(["verify", str(folder)])
    return code, capsys.readouterr().out


def test_record_then_verify_round_trips(
    capsys: pytest.CaptureFixture[str], upstream: FakeUpstream, tmp_path: Path
) -> None:
    record(capsys, upstream, tmp_path, "--model", "cometapi/probe-standard")
    record(capsys, upstream, tmp_path, "--model", "cometapi/probe-no-done", "--request", "one_call")
    manifest = json.loads((tmp_path / "cometapi_probe-standard-chat" / "manifest.json").read_text())
    meta = manifest["recorded"]
    assert meta["route"] == "cometapi/probe-standard" and meta["wire"] == "chat"
    assert {"date", "litellm", "gate", "sanitizer"} <= set(meta)
    assert meta["litellm"] == litellm_version()
    cases = {c["name"]: c for c in manifest["cases"]}
    assert list(cases) == REQUESTS
    assert cases["parallel_calls"]["expect"] == "release"
    ids = [c["id"] for c in cases["parallel_calls"]["calls"]]
    assert len(set(ids)) == 2 and all(i.startswith("call_") for i in ids)
    code, out = verify(capsys, tmp_path)
    assert code == 0, out
    assert "7 fixture(s), 0 with differences" in out
    assert "ok    one_call: release (1 call(s))" in out
    assert "ok    one_call: quarantine missing_done" in out


def test_record_then_verify_on_the_gemini_ollama_and_bedrock_wires(
    capsys: pytest.CaptureFixture[str], upstream: FakeUpstream, aws: None, tmp_path: Path
) -> None:
    routes = ["gemini/probe-standard", "ollama_chat/probe-standard", BEDROCK_ROUTE]
    models = [a for route in routes for a in ("--model", route)]
    base = ["--api-base", upstream.root_url, "--api-key", "sk-probe"]
    code = main(["record", *base, *models, "--request", "parallel_calls", "--out", str(tmp_path)])
    assert code == 0
    capsys.readouterr()
    # (folder, body file, the released calls' ids in the manifest)
    expected = {
        "gemini": ("gemini_probe-standard-chat", "parallel_calls.sse", r"gemini-call-[01]"),
        "ollama": ("ollama_chat_probe-standard-chat", "parallel_calls.ndjson", r"call_0000000[12]"),
        "bedrock": (
            "bedrock_converse_anthropic.claude-3-5-sonnet-20240620-v1_0-chat",
            "parallel_calls.eventstream",
            r"tooluse_0{21}[12]",
        ),
    }
    for wire, (folder, body, ids) in expected.items():
        manifest = json.loads((tmp_path / folder / "manifest.json").read_text())
        assert (manifest["wire"], manifest["recorded"]["sanitizer"]) == (wire, "3")
        (case,) = manifest["cases"]
        assert case["body"] == body and (tmp_path / folder / body).is_file()
        made = [c["id"] for c in case["calls"]]
        assert len(set(made)) == 2 and all(re.fullmatch(ids, i) for i in made), made
        assert case["wire_facts"]["calls"] == 2 and "sanitizing_changed_verdict" not in case
    code, out = verify(capsys, tmp_path)
    assert code == 0, out
    assert "3 fixture(s), 0 with differences" in out


def litellm_version() -> str:
    from importlib.metadata import version

    return version("litellm")


def test_an_edited_fixture_fails_verify_readably(
    capsys: pytest.CaptureFixture[str], upstream: FakeUpstream, tmp_path: Path
) -> None:
    requests = ["--request", "one_call", "--request", "text_then_call"]
    record(capsys, upstream, tmp_path, "--model", "cometapi/probe-standard", *requests)
    folder = tmp_path / "cometapi_probe-standard-chat"
    one = folder / "one_call.sse"
    one.write_bytes(one.read_bytes().replace(b"data: [DONE]\n\n", b""))
    manifest = json.loads((folder / "manifest.json").read_text())
    call_id = next(c for c in manifest["cases"] if c["name"] == "text_then_call")["calls"][0]["id"]
    other = call_id[:-1] + ("7" if call_id[-1] != "7" else "8")
    body = folder / "text_then_call.sse"
    body.write_bytes(body.read_bytes().replace(call_id.encode(), other.encode()))
    code, out = verify(capsys, folder)
    assert code == 1
    assert "DIFF  one_call: expected release (1 call(s))" in out
    assert "sync: expected release (1 call(s)), got quarantine missing_done (remote)" in out
    assert "async: expected release (1 call(s)), got quarantine missing_done (remote)" in out
    assert "DIFF  text_then_call" in out
    assert f"sync: expected call {call_id} (multiply), not released" in out
    assert f"sync: released call {other} (multiply), not expected" in out
    assert "2 with differences" in out


# Each wire's body builder, media type and route for the canary.
CANARY_WIRES: dict[str, tuple[Any, str, str]] = {
    "chat": (chat_body, "text/event-stream", "cometapi/gpt-4o-mini"),
    "gemini": (gemini_body, "text/event-stream", "gemini/gemini-2.5-flash"),
    "ollama": (ollama_body, "application/x-ndjson", "ollama_chat/qwen3:8b"),
    "bedrock": (bedrock_body, "application/vnd.amazon.eventstream", BEDROCK_ROUTE),
}


@pytest.mark.parametrize("wire", list(CANARY_WIRES))
def test_a_recording_holds_no_argument_text(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, aws: None, wire: str
) -> None:
    """The canary: argument values, text and ids the route sent appear nowhere recorded, on
    every wire's framing (SSE, NDJSON, event-stream frames); the recording still verifies."""
    secret_args = json.dumps(
        {"path": f"/home/{CANARY}/notes.txt", "content": f"{CANARY} ünïcødé 日本語 🎉 42"},
        ensure_ascii=False,
    )
    build, media, route = CANARY_WIRES[wire]
    original: bytes = build(f"Writing {CANARY} now.", [("write_file", secret_args)], seed=CANARY)

    def answer(request: dict[str, Any]) -> Scripted:
        return Scripted(original, content_type=media, chunk_sizes=[7, 64, 3])

    with FakeUpstream(answer) as server:
        code = main(
            [
                "record",
                "--api-base",
                server.base_url if wire == "chat" else server.root_url,
                "--api-key",
                "sk-probe",
                "--model",
                route,
                "--request",
                "non_ascii",
                "--out",
                str(tmp_path / "rec"),
                "--json",
                str(tmp_path / "probe.json"),
            ]
        )
    assert code == 0
    printed = capsys.readouterr()
    assert f"recorded {tmp_path / 'rec'}" in printed.out
    original_ids = set(re.findall(rb'"(?:id|toolUseId|responseId)":"([^"]+)"', original))
    assert original_ids
    files = [*(tmp_path / "rec").rglob("*"), tmp_path / "probe.json"]
    assert len([f for f in files if f.is_file()]) == 3  # the body, the manifest, the JSON
    for path in files:
        if path.is_file():
            data = path.read_bytes()
            assert CANARY.encode() not in data, path
            assert "日本語".encode() not in data and b"notes.txt" not in data, path
            for original_id in original_ids:
                assert original_id not in data, path
    assert CANARY not in printed.out + printed.err
    code, out = verify(capsys, tmp_path / "rec")
    assert code == 0, out
    assert "ok    non_ascii: release (1 call(s))" in out


# ---- across litellm versions --------------------------------------------------------------------
def test_cases_are_classified_unchanged_fixed_or_regressed() -> None:
    first = {
        "cases": [{"case": "a", "ok": True}, {"case": "b", "ok": False}, {"case": "c", "ok": True}]
    }
    last = {
        "cases": [{"case": "a", "ok": True}, {"case": "b", "ok": True}, {"case": "c", "ok": False}]
    }
    assert classify(first, last) == [
        ("a", True, True, "unchanged"),
        ("b", False, True, "fixed"),
        ("c", True, False, "regressed"),
    ]


FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def some_fixtures(wire: str, keep: list[str], into: Path) -> Path:
    """A copy of a few of ``fixtures/<wire>``'s cases under ``into/<wire>``."""
    manifest = json.loads((FIXTURES / wire / "manifest.json").read_text())
    manifest["cases"] = [c for c in manifest["cases"] if c["name"] in keep]
    assert len(manifest["cases"]) == len(keep)
    folder = into / wire
    folder.mkdir()
    (folder / "manifest.json").write_text(json.dumps(manifest))
    for case in manifest["cases"]:
        (folder / case["body"]).write_bytes((FIXTURES / wire / case["body"]).read_bytes())
    return folder


def test_verify_runs_under_two_interpreters(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Each interpreter replays the same fixtures; a case both pass is unchanged."""
    some_fixtures("chat", ["multiply_basic", "finish_without_done"], tmp_path)
    code = main(["verify", str(tmp_path), "--python", sys.executable, "--python", sys.executable])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "unchanged       ok -> ok       chat/multiply_basic" in out
    assert "unchanged       ok -> ok       chat/finish_without_done" in out
    assert "0 regressed, 0 failing" in out


def test_the_standalone_fake_upstream_answers_the_probe_in_personalities() -> None:
    """``toolgate fake-upstream`` (demo_answer) answers a probe request in its personality."""
    from litellm_toolgate.demo.serve import demo_answer
    from litellm_toolgate.loopback.requests import PROBE_REQUESTS

    request = {"model": "probe-no-done", "stream": True, "messages": PROBE_REQUESTS[0].messages()}
    body = demo_answer(request).body
    assert b'"finish_reason":"tool_calls"' in body and b"[DONE]" not in body
    standard = demo_answer({**request, "model": "gpt-4o-mini"}).body
    assert standard.endswith(b"data: [DONE]\n\n")
    demo = demo_answer({"model": "gpt-4o-mini", "stream": True, "messages": []}).body
    assert b"multiply" in demo  # any other request: the demo's recorded call, as before


# ---- the wires of whole calls and event-stream frames ------------------------------------------
# A released case, a refused one and a whole body of each, and where litellm's chunks differ
# from the wire, that case too (its manifest's via_litellm says what this litellm gives).
WIRE_SAMPLES = {
    "gemini": ["multiply_basic", "call_then_safety", "whole_multiply"],
    "ollama": ["multiply_basic", "eof_before_done", "two_calls_two_lines_without_ids"],
    "bedrock": [
        "multiply_basic",
        "bad_message_crc",
        "whole_two_calls",
        "no_input_for_a_tool_with_required_fields",
    ],
}


def test_verify_replays_the_gemini_ollama_and_bedrock_fixtures(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Each folder is replayed on its own wire's route (not as chat), and a cut body fails."""
    for wire, keep in WIRE_SAMPLES.items():
        some_fixtures(wire, keep, tmp_path)
    code, out = verify(capsys, tmp_path)
    assert code == 0, out
    assert "gemini (route gemini/gemini-2.5-flash, wire gemini)" in out
    assert "ollama (route ollama_chat/qwen3:8b, wire ollama)" in out
    assert re.search(r"^bedrock \(route bedrock/converse/\S+, wire bedrock\)$", out, re.M)
    assert "10 fixture(s), 0 with differences" in out
    assert "ok    bad_message_crc: quarantine malformed_event" in out
    body = tmp_path / "bedrock" / "multiply_basic.eventstream"
    body.write_bytes(body.read_bytes()[:-40])
    code, out = verify(capsys, tmp_path / "bedrock")
    assert code == 1
    assert "DIFF  multiply_basic: expected release (1 call(s))" in out


def test_verify_refuses_a_wire_it_does_not_read(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder = some_fixtures("ollama", ["multiply_basic"], tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps({**manifest, "wire": "nosuchwire"}))
    code = main(["verify", str(tmp_path)])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert "the wire 'nosuchwire' is not one the gate reads" in captured.err


def test_verify_replays_the_cohere_fixtures_where_the_route_gates_them(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Cohere's route gates whole calls, sync and async (on litellm's own client, claimed for
    the call): a whole case is replayed both ways (released, or quarantined for its
    reason); a streamed case must be refused by the route table before sending."""
    some_fixtures("cohere", ["multiply_basic", "whole_two_calls", "whole_unknown_tool"], tmp_path)
    code, out = verify(capsys, tmp_path)
    assert code == 0, out
    assert "cohere (route cohere/command-a-03-2025, wire cohere)" in out
    assert "ok    multiply_basic: refused by the route table" in out
    assert "ok    whole_two_calls: release (2 call(s))" in out
    assert "ok    whole_unknown_tool: quarantine unknown_tool" in out
    assert "3 fixture(s), 0 with differences" in out
    body = tmp_path / "cohere" / "whole_two_calls.json"
    body.write_bytes(body.read_bytes().replace(b"TOOL_CALL", b"MAX_TOKENS"))
    code, out = verify(capsys, tmp_path / "cohere")
    assert code == 1
    assert "DIFF  whole_two_calls" in out
    assert "sync: expected release (2 call(s)), got quarantine finish_reason_mismatch" in out


def test_watsonx_is_probed_on_its_own_wire(
    capsys: pytest.CaptureFixture[str],
    upstream: FakeUpstream,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """``watsonx/``: litellm finds a throwaway token and project in the environment (its own
    lookup; with a token it asks IBM's IAM for none) and calls ``/ml/v1/text/chat_stream``;
    the probe reads watsonx.ai's wire there, which has no end marker (``end: no``)."""
    monkeypatch.setenv("WATSONX_TOKEN", "not-a-token")
    monkeypatch.setenv("WATSONX_PROJECT_ID", "probe-project")
    route = "watsonx/probe-standard"
    sent = len(upstream.requests)
    out = tmp_path / "probe.json"
    tables = probe(capsys, upstream, "--model", route, *FEW_ARGS, "--json", str(out), root=True)
    assert len(upstream.requests) == sent + len(FEW)  # no other request (no IAM call)
    rows = tables[route]
    assert list(rows) == FEW
    (written,) = json.loads(out.read_text())["routes"]
    assert written["rows"][0]["wire"]["wire"] == "watsonx"
    for request, row in rows.items():
        assert row[1:6] == [released(request), "tool_calls", "no", "first", "yes"], row
        assert column(row, "usage") == "yes"


def test_verify_replays_the_watsonx_fixtures(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``fixtures/watsonx`` is replayed on ``watsonx/`` through ``ToolGate`` (its own wire, not
    chat's: a body with no ``[DONE]`` is released), and a cut body fails."""
    keep = ["multiply_basic", "two_calls", "cut_after_finish_mid_usage", "whole_two_calls"]
    some_fixtures("watsonx", keep, tmp_path)
    code, out = verify(capsys, tmp_path)
    assert code == 0, out
    assert "watsonx (route watsonx/ibm/granite-3-3-8b-instruct, wire watsonx)" in out
    assert "ok    cut_after_finish_mid_usage: quarantine malformed_event" in out
    assert "4 fixture(s), 0 with differences" in out
    body = tmp_path / "watsonx" / "multiply_basic.sse"
    body.write_bytes(
        body.read_bytes().replace(b'"finish_reason":"tool_calls"', b'"finish_reason":"stop"')
    )
    code, out = verify(capsys, tmp_path / "watsonx")
    assert code == 1
    assert "DIFF  multiply_basic" in out
