"""Settings fail closed: a misspelt key, or a missing registry, stops the gate being built.

A LiteLLM proxy hands a guardrail's constructor every key of its ``litellm_params`` plus some
forty of its own (whatever :class:`litellm.types.guardrails.LitellmParams` fills in with a
default). The gate accepts exactly those, litellm's own guardrail parameters and its own
settings; anything else is a :class:`GuardrailConfigError` that names the key. Taking each
request's own tools as the registry is a setting (``tools: request``), never what a missing
``tools``/``tools_file`` means.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import MANIFEST

from litellm_toolgate import (
    GateConfigError,
    GuardrailConfigError,
    ToolGate,
    ToolGateGuardrail,
)
from litellm_toolgate.edge.config import GateSettings, litellm_guardrail_keys


def _tools_file(tmp_path: Path) -> str:
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(MANIFEST["tools"]))
    return str(path)


def _proxy_keys() -> dict[str, Any]:
    """What the installed litellm's proxy passes a custom guardrail besides the YAML keys."""
    from litellm.types.guardrails import LitellmParams

    params = LitellmParams(guardrail="m.Gate", mode="post_call")
    excluded = {"guardrail", "mode", "default_on", "stream_scope"}
    return {k: v for k, v in params.model_dump(exclude_none=True).items() if k not in excluded}


def test_misspelt_keys_stop_the_guardrail(tmp_path: Path) -> None:
    with pytest.raises(GuardrailConfigError) as caught:
        ToolGateGuardrail(
            tools_file=_tools_file(tmp_path),
            polcy="litellm_toolgate.demo.serve:workspace_policy",
            limit={"max_calls": 3},
        )
    message = str(caught.value)
    assert "polcy" in message and "limit" in message
    assert not isinstance(caught.value, ValueError | TypeError)


def test_a_key_litellm_does_not_pass_by_default_is_refused(tmp_path: Path) -> None:
    # api_key is a LitellmParams field with no default: the proxy passes it only when the
    # YAML says it, and it means nothing to this gate.
    with pytest.raises(GuardrailConfigError, match="api_key"):
        ToolGateGuardrail(tools_file=_tools_file(tmp_path), api_key="sk-x")


def test_every_key_the_proxy_passes_is_accepted(tmp_path: Path) -> None:
    passed = _proxy_keys()
    assert len(passed) > 30  # the proxy's own keys, as in litellm 1.108.7 and 1.110.2
    assert set(passed) <= litellm_guardrail_keys()
    gate = ToolGateGuardrail(
        guardrail_name="tg",
        event_hook="post_call",
        default_on=True,
        tools_file=_tools_file(tmp_path),
        **passed,
    )
    assert gate.gate.registry is not None and len(gate.gate.registry) == 2


def test_the_known_proxy_keys_of_both_versions_are_accepted() -> None:
    # Keys litellm 1.108.7's and 1.110.2's proxies pass every custom guardrail.
    for key in ("presidio_language", "mask", "use_v2", "forward_messages_as_sent", "version"):
        assert key in litellm_guardrail_keys()
    for key in ("guardrail_name", "event_hook", "default_on", "supported_event_hooks"):
        assert key in litellm_guardrail_keys()


def test_a_missing_registry_is_an_error_not_the_request_tools() -> None:
    with pytest.raises(GuardrailConfigError, match="tools: request"):
        ToolGateGuardrail(guardrail_name="tg", limits={"max_calls": 3})
    with pytest.raises(GateConfigError, match="request"):
        ToolGate()
    with pytest.raises(GateConfigError, match="request"):
        ToolGate(None)


def test_request_tools_are_an_explicit_setting() -> None:
    assert ToolGateGuardrail(tools="request").gate.registry is None
    assert ToolGate("request").registry is None
    assert ToolGate(tools="request").registry is None
    assert GateSettings.from_mapping({"tools": "request"}).load_tools() is None
    with pytest.raises(GuardrailConfigError):
        ToolGateGuardrail(tools="requests")
    with pytest.raises(GateConfigError):
        ToolGate("all")
    with pytest.raises(GuardrailConfigError, match="not both"):
        ToolGateGuardrail(tools="request", tools_file="x.json")


def test_settings_file_fails_closed(tmp_path: Path) -> None:
    (tmp_path / "tools.json").write_text(json.dumps(MANIFEST["tools"]))
    misspelt = tmp_path / "misspelt.yaml"
    misspelt.write_text("tools_file: tools.json\npolcy: litellm_toolgate.demo.serve:x\n")
    with pytest.raises(GuardrailConfigError, match="polcy") as caught:
        ToolGateGuardrail.from_settings_file(misspelt)
    assert not isinstance(caught.value, ValueError | TypeError)
    bad_limit = tmp_path / "limits.yaml"
    bad_limit.write_text("tools_file: tools.json\nlimits:\n  max_call: 3\n")
    with pytest.raises(GuardrailConfigError, match="max_call"):
        ToolGateGuardrail.from_settings_file(bad_limit)
    no_tools = tmp_path / "no_tools.yaml"
    no_tools.write_text("limits:\n  max_calls: 3\n")
    with pytest.raises(GuardrailConfigError, match="tools: request"):
        ToolGateGuardrail.from_settings_file(no_tools)
    unreadable = tmp_path / "missing.yaml"
    with pytest.raises(GuardrailConfigError, match="cannot read"):
        ToolGateGuardrail.from_settings_file(unreadable)
    explicit = tmp_path / "request.yaml"
    explicit.write_text("tools: request\n")
    assert ToolGateGuardrail.from_settings_file(explicit).gate.registry is None


@pytest.mark.parametrize("error", ["ValueError", "TypeError", "KeyError", "OSError"])
def test_a_policy_module_that_fails_to_import_stops_the_guardrail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: str
) -> None:
    """A policy module that raises while it is imported (a composed policy built at import,
    reading a missing setting, say) is a typed config error. A bare ValueError or TypeError
    would reach the proxy, which logs such a guardrail and starts without it."""
    name = f"policy_fails_{error.lower()}"
    (tmp_path / f"{name}.py").write_text(f"raise {error}('CANARY-7f3a9c')\npolicy = None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(GuardrailConfigError) as stopped:
        ToolGateGuardrail(tools_file=_tools_file(tmp_path), policy=f"{name}:policy")
    assert "cannot be imported" in str(stopped.value)
    assert "CANARY" not in str(stopped.value)
