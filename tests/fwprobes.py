"""Two probes the frameworks lane runs as scripts (``python tests/fwprobes.py NAME API_BASE``),
each printing ``@probe KEY=VALUE`` lines for tests/test_frameworks_lane.py to judge.

* ``crewai``: a gate registered, then a ``crewai.LLM(...)`` created: is ``litellm.callbacks``
  emptied, does the gate's "no longer there" warning fire, is a schema-invalid call then
  released; and with the gate passed as the LLM's ``callbacks=``, is it refused again.
  And a real Agent on an LLM given the gate as ``callbacks=``: does a call with duplicate keys
  reach the tool (CrewAI replaces ``litellm.callbacks`` again at every model call).
* ``smolagents429``: an attempt id made from a uuid whose hex holds ``429``: does smolagents
  take the quarantine for a rate limit (the minutes-long retry), or does the run end at once
  with the gate's error.
"""

from __future__ import annotations

import logging
import sys
import time

import litellm

from litellm_toolgate import SchemaRejected, ToolCallQuarantined, ToolGateGuardrail
from litellm_toolgate.demo.run import MULTIPLY


def probe(key: str, value: object) -> None:
    print(f"\n@probe {key}={value}", flush=True)


class _Seen(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def crewai_probe(api_base: str) -> None:
    import crewai
    from crewai.tools import tool

    seen = _Seen()
    logging.getLogger("litellm_toolgate").addHandler(seen)
    kw = {"model": "cometapi/gpt-4o-mini", "tools": [MULTIPLY], "api_base": api_base}
    bad = [{"role": "user", "content": "scenario-schema"}]
    litellm.callbacks = [ToolGateGuardrail(tools="request")]
    litellm.completion(messages=[{"role": "user", "content": "scenario-valid"}], **kw)
    crewai.LLM(model="cometapi/gpt-4o-mini", is_litellm=True, base_url=api_base, api_key="sk")
    probe("emptied", litellm.callbacks == [])
    released = litellm.completion(messages=bad, **kw).choices[0].message.tool_calls
    probe("released_after_reset", bool(released))
    probe("warned", any("no longer there" in m for m in seen.messages))
    gate = ToolGateGuardrail(tools="request")
    crewai.LLM(
        model="cometapi/gpt-4o-mini",
        is_litellm=True,
        base_url=api_base,
        api_key="sk",
        callbacks=[gate],
    )
    try:
        litellm.completion(messages=bad, **kw)
        probe("refused_with_callbacks", False)
    except SchemaRejected:
        probe("refused_with_callbacks", True)
    # ... but an Agent's every model call hands CrewAI's own callbacks (its token counter) to
    # LLM.call, which writes them into litellm.callbacks: the gate is gone again
    litellm.register_model({"cometapi/gpt-4o-mini": {"supports_function_calling": True}})
    ran: list[float] = []

    @tool("multiply")
    def multiply(a: float, b: float) -> float:
        """Multiply two numbers."""
        ran.append(a)
        return a * b

    llm = crewai.LLM(
        model="cometapi/gpt-4o-mini",
        is_litellm=True,
        base_url=api_base,
        api_key="sk",
        callbacks=[ToolGateGuardrail(tools="request")],
    )
    agent = crewai.Agent(role="calc", goal="multiply", backstory="b", llm=llm, tools=[multiply])
    task = crewai.Task(description="7 times 8? scenario-dupkeys", expected_output="x", agent=agent)
    crewai.Crew(agents=[agent], tasks=[task]).kickoff()
    probe("agent_ran_duplicate_keys_with_llm_callbacks", len(ran) == 1)


def smolagents_probe(api_base: str) -> None:
    from smolagents import LiteLLMModel, ToolCallingAgent, tool
    from smolagents.models import is_rate_limit_error

    import litellm_toolgate.core.decision.attempt as attempt_module

    class _Id:
        hex = "0429" + "0" * 28

    attempt_module.uuid = type("U", (), {"uuid4": staticmethod(_Id)})
    litellm.callbacks = [ToolGateGuardrail(tools="request")]
    ran: list[float] = []

    @tool
    def multiply(a: float, b: float) -> float:
        """Multiply two numbers.

        Args:
            a: the first number
            b: the second number
        """
        ran.append(a)
        return a * b

    model = LiteLLMModel(model_id="cometapi/gpt-4o-mini", api_base=api_base, api_key="sk")
    agent = ToolCallingAgent(tools=[multiply], model=model, max_steps=3, verbosity_level=0)
    started = time.monotonic()
    try:
        agent.run("What is 7 times 8? scenario-truncated")
    except Exception as exc:
        gate = exc.__cause__
        probe("gate_error", isinstance(gate, ToolCallQuarantined))
        probe("looks_like_rate_limit", is_rate_limit_error(gate) if gate else None)
    probe("seconds", round(time.monotonic() - started, 2))
    probe("ran", len(ran))


if __name__ == "__main__":
    {"crewai": crewai_probe, "smolagents429": smolagents_probe}[sys.argv[1]](sys.argv[2])
