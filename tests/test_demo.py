"""`toolgate demo` end to end on its embedded default (the loopback fake CometAPI)."""

from __future__ import annotations

import json

import pytest

from litellm_toolgate.cli import main


def test_demo_prints_56_and_quarantines_the_broken_stream(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COMETAPI_KEY", raising=False)
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "computed locally: 56" in out
    assert "7 times 8 is 56." in out
    # The rounds went through the tool loop; its journal row is printed (no arguments).
    assert "== the journal: 1 row(s) of run demo-run ==" in out
    row = json.loads(
        next(line for line in out.splitlines() if line.startswith('{"run_id": "demo-run"'))
    )
    assert (row["tool"], row["step"], row["outcome"], row["effect"]) == (
        "multiply",
        "finished",
        "succeeded",
        "read_only",
    )
    assert row["argument_digest"].startswith("sha256:") and '"a": 7' not in out
    assert "the gate: attempt" in out and "quarantined: missing_finish" in out
    assert '"execution_state": "quarantined"' in out
    # Plain litellm, shown for contrast, hands the broken call over (its finish reason is
    # made up: 'tool_calls' on 1.110, 'stop' on 1.108); only sizes are printed.
    assert "plain litellm hands the caller: finish_reason=" in out
    assert "1 call(s): 76 bytes of arguments that do not parse" in out
    assert "[log WARNING] toolgate call" in out and "[log INFO] toolgate call" in out
    assert "CANARY-7f3a9c" not in out


@pytest.mark.parametrize(
    "model", [None, "openai/gpt-4o-mini"], ids=["bridged-cometapi", "native-responses"]
)
def test_demo_on_the_responses_api_prints_56_and_quarantines_the_broken_stream(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, model: str | None
) -> None:
    monkeypatch.delenv("COMETAPI_KEY", raising=False)
    argv = ["demo", "--api", "responses"] + ([] if model is None else ["--model", model])
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert ("(native /responses)" in out) == (model is not None)
    assert "released: multiply (call call_" in out and "computed locally: 56" in out
    # Round two's answer is built by the fake upstream from the function_call_output sent.
    assert "7 times 8 is 56." in out
    # Plain litellm's bridge ends the truncated stream in response.completed; the gate does not.
    assert "last event 'response.completed' and 1 call(s): 76 bytes of arguments that do not" in out
    assert "quarantined: missing_finish" in out and '"execution_state": "quarantined"' in out
    assert "CANARY-7f3a9c" not in out


def test_the_fake_upstream_answers_only_a_result_with_the_matching_call_id() -> None:
    from litellm_toolgate.demo.responses import fake_answer

    call = {"type": "function_call", "call_id": "call_1", "name": "multiply", "arguments": "{}"}
    result = {"type": "function_call_output", "call_id": "call_1", "output": '{"value": 56}'}
    assert fake_answer({"input": [call, result]}).status == 200
    assert fake_answer({"input": [call, {**result, "call_id": "call_2"}]}).status == 400
    asked = {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function"}]}
    tool = {"role": "tool", "tool_call_id": "call_1", "content": '{"value": 56}'}
    assert fake_answer({"messages": [asked, tool]}).status == 200
    assert fake_answer({"messages": [asked, {**tool, "tool_call_id": "x"}]}).status == 400


def test_demo_on_the_anthropic_api_prints_56_and_quarantines_the_broken_message(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["demo", "--api", "anthropic"]) == 0
    out = capsys.readouterr().out
    assert "/v1/messages" in out
    assert "released: multiply (tool_use toolu_" in out and "computed locally: 56" in out
    # Round two's answer is built by the fake upstream from the tool_result sent.
    assert "7 times 8 is 56." in out
    assert "the gate: attempt" in out and '"execution_state": "quarantined"' in out
    assert "quarantined: missing_finish" in out or "quarantined: finish_reason_mismatch" in out


def test_the_anthropic_fake_answers_only_a_tool_result_with_the_matching_id() -> None:
    from litellm_toolgate.demo.anthropic import fake_answer

    use = {"type": "tool_use", "id": "toolu_1", "name": "multiply", "input": {"a": 7, "b": 8}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": '{"value": 56}'}
    asked = {"role": "assistant", "content": [use]}
    assert fake_answer({"messages": [asked, {"role": "user", "content": [result]}]}).status == 200
    other = {**result, "tool_use_id": "toolu_2"}
    assert fake_answer({"messages": [asked, {"role": "user", "content": [other]}]}).status == 400


def test_demo_crash_refuses_the_ambiguous_call_until_it_is_reconciled(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["demo", "--crash"]) == 0
    out = capsys.readouterr().out
    assert "worker killed with SIGKILL between start and finish" in out
    assert '"step": "started"' in out
    assert (
        "resume refused: run demo-crash: 1 call(s) not finished, not run again until "
        "reconciled: call_demo_crash_1 (record_product, started)" in out
    )
    assert "reconciled call_demo_crash_1 (record_product): ledger checked" in out
    assert '"step": "reconciled"' in out
    assert "ledger entries: 1; record_product ran once" in out
    assert "answer: The product was recorded before the interruption." in out
