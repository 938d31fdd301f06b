"""The frameworks as real clients: one tool loop per framework and call shape.

Each ``run_*`` function builds the framework's agent on a model routed through litellm,
registers the gate the way docs/frameworks.md says, runs ``prompt`` and returns the final
answer; the tool function records each call in ``tally``. ``cases(framework, api_base)``
lists ``(case_id, run)`` for every shape the framework makes, on ``cometapi/`` and
``openai/``, for every scenario of ``fwscript.SCENARIOS``. Run only by ``tests/fwscript.py``,
inside the framework's own virtualenv.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import textwrap
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from fwscript import SCENARIOS, Tally

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
MODELS = {"cometapi": "cometapi/gpt-4o-mini", "openai": "openai/gpt-4o-mini"}


def recipes() -> dict[str, str]:
    """Each framework's recipe (the lines between ``# recipe: NAME`` and ``# end recipe``),
    dedented: docs/frameworks.md shows them byte for byte (the lane checks)."""
    out: dict[str, str] = {}
    name = None
    lines: list[str] = []
    for line in Path(__file__).read_text(encoding="utf-8").splitlines():
        mark = line.strip()
        if mark.startswith("# recipe: "):
            name, lines = mark.removeprefix("# recipe: "), []
        elif mark == "# end recipe" and name:
            out[name] = textwrap.dedent("\n".join(lines)) + "\n"
            name = None
        elif name:
            lines.append(line)
    return out


# --- OpenAI Agents SDK (LitellmModel): async, streamed or whole; run_sync -----------------


def run_agents(shape: str, model: str, api_base: str, prompt: str, tally: Tally) -> Any:
    import agents

    agents.set_tracing_disabled(True)
    # recipe: agents
    import litellm
    from agents.extensions.models.litellm_model import LitellmModel

    from litellm_toolgate import ToolGateGuardrail

    litellm.callbacks = [ToolGateGuardrail(tools="request")]
    llm = LitellmModel(model=model, base_url=api_base, api_key="sk-fw")
    # end recipe

    @agents.function_tool
    def multiply(a: float, b: float) -> float:
        """Multiply two numbers."""
        return tally.multiply(a, b)

    agent = agents.Agent(name="calc", instructions="Use tools.", tools=[multiply], model=llm)
    if shape == "sync":
        return agents.Runner.run_sync(agent, prompt).final_output

    async def go() -> Any:
        if shape == "whole":
            return (await agents.Runner.run(agent, prompt)).final_output
        result = agents.Runner.run_streamed(agent, prompt)
        async for _ in result.stream_events():
            pass
        return result.final_output

    return asyncio.run(go())


# --- smolagents (LiteLLMModel + ToolCallingAgent): sync, whole or streamed ----------------


def run_smolagents(shape: str, model: str, api_base: str, prompt: str, tally: Tally) -> Any:
    # recipe: smolagents
    import litellm
    from smolagents import LiteLLMModel, ToolCallingAgent, tool

    from litellm_toolgate import ToolGateGuardrail

    litellm.callbacks = [ToolGateGuardrail(tools="request")]
    llm = LiteLLMModel(model_id=model, api_base=api_base, api_key="sk-fw")
    # end recipe

    @tool
    def multiply(a: float, b: float) -> float:
        """Multiply two numbers.

        Args:
            a: the first number
            b: the second number
        """
        return tally.multiply(a, b)

    agent = ToolCallingAgent(
        tools=[multiply],
        model=llm,
        max_steps=3,
        verbosity_level=0,
        stream_outputs=shape == "streamed",
    )
    return agent.run(prompt)


# --- LangChain / LangGraph (ChatLiteLLM + create_react_agent) -----------------------------


def run_langchain(shape: str, model: str, api_base: str, prompt: str, tally: Tally) -> Any:
    from langchain_core.tools import tool

    streamed = shape.endswith("streamed")
    # recipe: langchain
    import litellm
    from langchain_litellm import ChatLiteLLM
    from langgraph.prebuilt import create_react_agent

    from litellm_toolgate import ToolGateGuardrail

    litellm.callbacks = [ToolGateGuardrail(tools="request")]
    llm = ChatLiteLLM(model=model, api_base=api_base, api_key="sk-fw", streaming=streamed)
    # end recipe

    @tool
    def multiply(a: float, b: float) -> float:
        """Multiply two numbers."""
        return tally.multiply(a, b)

    agent = create_react_agent(llm, [multiply])
    state = {"messages": [("user", prompt)]}
    if shape == "sync-whole":
        return agent.invoke(state)["messages"][-1].content
    if shape == "sync-streamed":
        states = list(agent.stream(state, stream_mode="values"))
        return states[-1]["messages"][-1].content

    async def go() -> Any:
        if shape == "async-whole":
            return (await agent.ainvoke(state))["messages"][-1].content
        states = [s async for s in agent.astream(state, stream_mode="values")]
        return states[-1]["messages"][-1].content

    return asyncio.run(go())


# --- Strands (LiteLLMModel): always streams, sync or async --------------------------------


def run_strands(shape: str, model: str, api_base: str, prompt: str, tally: Tally) -> Any:
    # recipe: strands
    import litellm
    from strands import Agent, tool
    from strands.models.litellm import LiteLLMModel

    from litellm_toolgate import ToolGateGuardrail

    litellm.callbacks = [ToolGateGuardrail(tools="request")]
    llm = LiteLLMModel(client_args={"api_key": "sk-fw", "api_base": api_base}, model_id=model)
    # end recipe

    @tool
    def multiply(a: float, b: float) -> float:
        """Multiply two numbers.

        Args:
            a: the first number
            b: the second number
        """
        return tally.multiply(a, b)

    agent = Agent(model=llm, tools=[multiply], callback_handler=None)
    if shape == "sync":
        return str(agent(prompt)).strip()

    async def go() -> Any:
        if shape == "async":
            return str(await agent.invoke_async(prompt)).strip()
        result = None
        async for event in agent.stream_async(prompt):
            result = event.get("result", result)
        return str(result).strip()

    return asyncio.run(go())


# --- Google ADK (LiteLlm): async, whole or streamed (SSE); the sync runner ----------------


def run_adk(shape: str, model: str, api_base: str, prompt: str, tally: Tally) -> Any:
    # recipe: adk
    import litellm
    from google.adk.agents import Agent
    from google.adk.agents.run_config import RunConfig, StreamingMode
    from google.adk.models.lite_llm import LiteLlm
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    from litellm_toolgate import ToolGateGuardrail

    litellm.callbacks = [ToolGateGuardrail(tools="request")]
    llm = LiteLlm(model=model, api_base=api_base, api_key="sk-fw")
    # end recipe

    def multiply(a: float, b: float) -> float:
        """Multiply two numbers."""
        return tally.multiply(a, b)

    agent = Agent(name="calc", model=llm, instruction="Use tools.", tools=[multiply])
    runner = InMemoryRunner(agent=agent, app_name="fw")
    message = types.Content(role="user", parts=[types.Part(text=prompt)])
    mode = StreamingMode.SSE if shape == "streamed" else StreamingMode.NONE
    config = RunConfig(streaming_mode=mode)

    def final(event: Any, answer: Any) -> Any:
        if event.is_final_response() and event.content and event.content.parts:
            return "".join(p.text or "" for p in event.content.parts)
        return answer

    async def go() -> Any:
        session = await runner.session_service.create_session(app_name="fw", user_id="u")
        answer = None
        events = runner.run_async(
            user_id="u", session_id=session.id, new_message=message, run_config=config
        )
        async for event in events:
            answer = final(event, answer)
        return answer

    if shape != "sync":
        return asyncio.run(go())
    session = asyncio.run(runner.session_service.create_session(app_name="fw", user_id="u"))
    answer = None
    for event in runner.run(user_id="u", session_id=session.id, new_message=message):
        answer = final(event, answer)
    return answer


# --- DSPy (dspy.LM on litellm, native function calling): sync, async, streamed ------------


def run_dspy(shape: str, model: str, api_base: str, prompt: str, tally: Tally) -> Any:
    # recipe: dspy
    import dspy
    import litellm

    from litellm_toolgate import ToolGateGuardrail

    litellm.callbacks = [ToolGateGuardrail(tools="request")]
    litellm.register_model({model: {"supports_function_calling": True}})
    lm = dspy.LM(model, api_base=api_base, api_key="sk-fw", engine="litellm", cache=False)
    dspy.configure(lm=lm, adapter=dspy.ChatAdapter(use_native_function_calling=True))
    # end recipe

    def multiply(a: float, b: float) -> float:
        """Multiply two numbers."""
        return tally.multiply(a, b)

    # (built from a dict: this module's annotations are strings, which DSPy cannot resolve
    # for classes defined inside a function)
    inp, out = dspy.InputField, dspy.OutputField
    pick_fields = {"question": (str, inp()), "tools": (list[dspy.Tool], inp())}
    pick_fields["tool_calls"] = (dspy.ToolCalls, out())
    Pick = dspy.Signature(pick_fields, "Answer with tool calls.")
    answer_fields = {"question": (str, inp()), "tool_result": (str, inp())}
    Answer = dspy.Signature({**answer_fields, "answer": (str, out())}, "Answer the question.")

    pick, final, tools = dspy.Predict(Pick), dspy.Predict(Answer), [dspy.Tool(multiply)]

    def results(calls: Any) -> str:
        return "\n".join(str(call.execute(functions=tools)) for call in calls.tool_calls)

    if shape == "sync":
        calls = pick(question=prompt, tools=tools).tool_calls
        return final(question=prompt, tool_result=results(calls)).answer

    async def streamed(program: Any, **inputs: Any) -> Any:
        prediction = None
        async for item in dspy.streamify(program, is_async_program=True)(**inputs):
            prediction = item if isinstance(item, dspy.Prediction) else prediction
        return prediction

    async def go() -> Any:
        if shape == "async":
            calls = (await pick.acall(question=prompt, tools=tools)).tool_calls
            return (await final.acall(question=prompt, tool_result=results(calls))).answer
        calls = (await streamed(pick, question=prompt, tools=tools)).tool_calls
        return (await streamed(final, question=prompt, tool_result=results(calls))).answer

    return asyncio.run(go())


# --- CrewAI (a Crew of one Agent on crewai.LLM via litellm): kickoff, streamed, async -----


def run_crewai(shape: str, model: str, api_base: str, prompt: str, tally: Tally) -> Any:
    # recipe: crewai
    import crewai
    import litellm

    from litellm_toolgate import ToolGateGuardrail

    gate = ToolGateGuardrail(tools="request")

    class GatedLLM(crewai.LLM):
        # CrewAI sets litellm.callbacks to a list of its own at every model call: keep the gate in
        @staticmethod
        def set_callbacks(callbacks: list[object]) -> None:
            crewai.LLM.set_callbacks([gate, *(c for c in callbacks if c is not gate)])

    litellm.register_model({model: {"supports_function_calling": True}})
    llm = GatedLLM(model=model, base_url=api_base, api_key="sk-fw", is_litellm=True)
    # end recipe
    from crewai import Agent, Crew, Task
    from crewai.tools import tool

    llm.stream = shape == "streamed"

    @tool("multiply")
    def multiply(a: float, b: float) -> float:
        """Multiply two numbers."""
        return tally.multiply(a, b)

    agent = Agent(
        role="calc",
        goal="multiply",
        backstory="a calculator",
        llm=llm,
        tools=[multiply],
        max_iter=3,
    )
    task = Task(description=prompt, expected_output="the product", agent=agent)
    crew = Crew(agents=[agent], tasks=[task], verbose=False)
    if shape == "async":
        return str(asyncio.run(crew.kickoff_async()))
    return str(crew.kickoff())


SHAPES: dict[str, tuple[Callable[..., Any], tuple[str, ...]]] = {
    "agents": (run_agents, ("streamed", "whole", "sync")),
    "smolagents": (run_smolagents, ("whole", "streamed")),
    "langchain": (run_langchain, ("sync-whole", "sync-streamed", "async-whole", "async-streamed")),
    "strands": (run_strands, ("sync", "async", "streamed")),
    "adk": (run_adk, ("whole", "streamed", "sync")),
    "dspy": (run_dspy, ("sync", "async", "streamed")),
    "crewai": (run_crewai, ("sync", "streamed", "async")),
}


# What each framework's cases import: imported once before the first case's watchdog starts.
WARM = {
    "agents": ("agents", "agents.extensions.models.litellm_model"),
    "smolagents": ("smolagents",),
    "langchain": ("langchain_litellm", "langgraph.prebuilt", "langchain_core.tools"),
    "strands": ("strands", "strands.models.litellm"),
    "adk": ("google.adk.agents", "google.adk.models.lite_llm", "google.adk.runners"),
    "dspy": ("dspy",),
    "crewai": ("crewai", "crewai.tools"),
}


def warm(framework: str) -> None:
    """Import litellm, the gate and the framework (a missing one raises here)."""
    for name in ("litellm", "litellm_toolgate", *WARM[framework]):
        importlib.import_module(name)


def case_ids(framework: str) -> list[str]:
    _, shapes = SHAPES[framework]
    return [f"{s}-{m}-{sc}" for s in shapes for m in MODELS for sc in SCENARIOS]


def cases(framework: str, api_base: str) -> list[tuple[str, Callable[[str, Tally], Any]]]:
    run, _ = SHAPES[framework]
    out = []
    for case_id in case_ids(framework):
        shape, provider, _ = case_id.rsplit("-", 2)
        out.append((case_id, partial(run, shape, MODELS[provider], api_base)))
    return out
