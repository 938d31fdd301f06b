"""Every route of a LiteLLM proxy, classified once: gated, refused before sending, or untouched.

The proxy's doors to a model are more than ``/v1/chat/completions``: pass-through routes
forward a provider's body as it is, the MCP gateway runs a model's tool call inside the
request, realtime speaks over a socket. This table says what the gate does on each route
(matched on the route's path, first row first), and :func:`refuse_before_sending` is what the
guardrail's ``async_pre_call_hook`` runs on each request the proxy hands it, before anything is
sent:

* **gated**: the chat, Responses and Messages routes; their calls are gated by the hooks of
  :mod:`.request` and :mod:`.answer`.
* **refused before sending**: routes whose model turns the gate cannot read (pass-through,
  realtime, assistants runs, interactions, agents, ...). litellm runs the proxy's pre-call
  hooks there with a call type the gate refuses (``pass_through_endpoint`` ...,
  :mod:`.calltypes`), and the route is refused here too.
* **untouched**: routes that carry no model-made tool call (embeddings, images, audio,
  files, management, ...), and text completions (``/v1/completions``): their answer is text
  only (litellm's text result has no tool calls); one that asks for tools is refused before
  sending.

On a few routes litellm runs none of the gate's hooks before it sends (:data:`UNREACHED`:
assistants runs, batches): the gate can neither gate nor refuse them, and ``docs/proxy.md``
says to deny them to clients.

Whatever the route, a request whose tools name an MCP server (``"type": "mcp"``, or
Anthropic's ``mcp_servers``) is refused before sending: litellm's MCP gateway would run the
model's call on the server and send its result upstream inside the request, before any hook
of the gate saw the call (:class:`McpToolsRefused`).

``tests/test_proxy_routes.py`` enumerates the proxy's own route table (litellm's
``proxy_server.app``) and fails for a route no row here matches, so a route a future litellm
adds is classified before it can pass silently.
"""

from __future__ import annotations

from collections.abc import Mapping
from fnmatch import fnmatchcase
from typing import Any
from urllib.parse import urlsplit

from ...core.errors import WireNotObservable
from ..calltypes import CallRefused, Handling, handling
from ..guardrailerrors import set_guardrail_fields
from ..seam.symbols import GuardrailRaisedException

GATED, REFUSED, UNTOUCHED = Handling.GATED, Handling.REFUSED, Handling.NOT_A_MODEL_TURN

# (what, handling, path patterns): the first row with a matching pattern decides. Patterns are
# shell-style (``*`` crosses ``/``), matched against a route's path template and a request's
# path alike.
ROUTES: tuple[tuple[str, Handling, tuple[str, ...]], ...] = (
    (
        "chat completions",
        GATED,
        (
            "/chat/completions",
            "/v1/chat/completions",
            "/engines/*/chat/completions",
            "/openai/deployments/*/chat/completions",
            "/queue/chat/completions",
        ),
    ),
    (
        "the Responses API (new responses; stored ones are read back as stored)",
        GATED,
        (
            "/responses",
            "/v1/responses",
            "/openai/v1/responses",
            "/responses/*",
            "/v1/responses/*",
            "/openai/v1/responses/*",
        ),
    ),
    (
        "Anthropic Messages",
        GATED,
        ("/v1/messages", "/v1/messages/count_tokens", "/claude_code_gateway/v1/messages*"),
    ),
    (
        "text completions: a text answer; a request with tools is refused before sending",
        UNTOUCHED,
        (
            "/completions",
            "/v1/completions",
            "/engines/*/completions",
            "/openai/deployments/*/completions",
        ),
    ),
    (
        "Gemini generateContent: a model turn on Gemini's wire",
        REFUSED,
        ("/models/*:generateContent", "/models/*:streamGenerateContent", "/v1beta/models/*"),
    ),
    (
        "realtime and live sessions: model turns over a socket",
        REFUSED,
        (
            "/realtime*",
            "/v1/realtime*",
            "/openai/v1/realtime*",
            "/live/*",
            "/v1/live/*",
            "/openai/v1/live/*",
            "/vertex_ai/live",
        ),
    ),
    (
        "assistants runs, interactions, agents, workflows, evals: model turns the gate never sees",
        REFUSED,
        (
            "/threads/*/runs",
            "/v1/threads/*/runs",
            "/interactions*",
            "/v1beta/interactions*",
            "/a2a/*",
            "/v1/a2a/*",
            "/v1/workflows/*",
            "/v1/evals*",
            "/usage/ai/chat",
            "/policy/templates/enrich/stream",
        ),
    ),
    (
        "the MCP gateway and tool calls: the gate's caller runs tools, not a model turn "
        "(a model request naming MCP tools is refused before sending)",
        UNTOUCHED,
        (
            "/mcp",
            "/mcp/*",
            "/mcp-rest/*",
            "/{mcp_server_name}/mcp",
            "/toolset/*/mcp",
            "/{mcp_server_name}/*",
            "/v1/mcp/*",
            "/v1/tool/*",
            "/.well-known/*",
            "/authorize*",
            "/token",
            "/register",
            "/revoke",
            "/introspect",
            "/callback",
            "/oauth/*",
        ),
    ),
    (
        "files and batches under a provider's name (``/openai/v1/files``, ...): not a model "
        "turn (a pass-through request there is refused by its call type all the same)",
        UNTOUCHED,
        ("/{provider}/v1/*", "/*/v1/files", "/*/v1/files/*", "/*/v1/batches", "/*/v1/batches/*"),
    ),
    (
        "pass-through routes: a provider's body forwarded as it is",
        REFUSED,
        (
            "/openai/*",
            "/openai_passthrough/*",
            "/anthropic/*",
            "/azure/*",
            "/azure_ai/*",
            "/azure_speech/*",
            "/bedrock/*",
            "/gemini/*",
            "/vertex_ai/*",
            "/vertex-ai/*",
            "/cohere/*",
            "/mistral/*",
            "/openrouter/*",
            "/vllm/*",
            "/nvidia_nim/*",
            "/watsonx/*",
            "/gigachat/*",
            "/typesafe/*",
            "/tinyfish/*",
            "/cursor/*",
            "/fal_ai/*",
            "/assemblyai/*",
            "/eu.assemblyai/*",
            "/milvus/*",
            "/langfuse/*",
            "/laya/*",
            "/bespoke/*",
            "/systemone",
            "/v1/systemone",
            "/comprehendmedical*",
            "/transcribe*",
            "/plugin-proxy/*",
        ),
    ),
    (
        "no model turn: embeddings, images, audio, video, moderation, rerank, OCR, search, "
        "RAG, vector stores, files, batches, fine-tuning, containers, skills, assistants and "
        "threads (not their runs), decisions, count tokens",
        UNTOUCHED,
        (
            "/embeddings",
            "/v1/embeddings",
            "/engines/*/embeddings",
            "/openai/deployments/*/embeddings",
            "/openai/deployments/*/images/*",
            "/images/*",
            "/v1/images/*",
            "/audio/*",
            "/v1/audio/*",
            "/deepgram/*",
            "/videos*",
            "/v1/videos*",
            "/moderations",
            "/v1/moderations",
            "/rerank",
            "/v1/rerank",
            "/v2/rerank",
            "/ocr",
            "/v1/ocr",
            "/search*",
            "/v1/search*",
            "/rag/*",
            "/v1/rag/*",
            "/vector_store*",
            "/v1/vector_store*",
            "/v1/indexes",
            "/files*",
            "/v1/files*",
            "/batches*",
            "/v1/batches*",
            "/fine_tuning/*",
            "/v1/fine_tuning/*",
            "/containers*",
            "/v1/containers*",
            "/v1/skills*",
            "/assistants*",
            "/v1/assistants*",
            "/threads",
            "/threads/*",
            "/v1/threads",
            "/v1/threads/*",
            "/decisions",
            "/v1/decisions",
            "/models/*:countTokens",
            "/v1/memory*",
            "/apply_guardrail",
            "/guardrails/apply_guardrail",
        ),
    ),
    (
        "the proxy's own API: keys, teams, users, models, spend, health, settings, UI, logs",
        UNTOUCHED,
        (
            "/",
            "/_next",
            "/litellm-asset-prefix/*",
            "/ui",
            "/docs*",
            "/redoc",
            "/swagger",
            "/openapi.json",
            "/robots.txt",
            "/get_favicon",
            "/get_image",
            "/get_logo_url",
            "/upload/*",
            "/lazy/*",
            "/login",
            "/v3/*",
            "/session/*",
            "/sso/*",
            "/scim/*",
            "/jwt/*",
            "/onboarding/*",
            "/invitation/*",
            "/key/*",
            "/team/*",
            "/user/*",
            "/organization/*",
            "/end_user/*",
            "/customer/*",
            "/project/*",
            "/budget/*",
            "/provider/*",
            "/access_group/*",
            "/v1/access_group*",
            "/v1/unified_access_group*",
            "/tag/*",
            "/credentials*",
            "/model/*",
            "/models",
            "/models/*",
            "/v1/model/*",
            "/v1/models",
            "/v1/models/*",
            "/model_group/*",
            "/model_hub/*",
            "/model-insights*",
            "/spend/*",
            "/global/*",
            "/get/*",
            "/update/*",
            "/management/*",
            "/gateway/*",
            "/agent/*",
            "/agents*",
            "/v1/agents*",
            "/v1beta/agents*",
            "/prompts*",
            "/policy/*",
            "/policies*",
            "/guardrails*",
            "/v2/guardrails/*",
            "/v2/key/*",
            "/v2/login",
            "/v2/model/*",
            "/v2/organization/*",
            "/v2/team/*",
            "/v2/user/*",
            "/litellm/.well-known/*",
            "/search_tools*",
            "/config/*",
            "/config_overrides/*",
            "/settings",
            "/health*",
            "/test",
            "/routes",
            "/active/*",
            "/alerting/*",
            "/add/*",
            "/delete/*",
            "/adaptive_router/*",
            "/auto_router/*",
            "/router/*",
            "/fallback*",
            "/cache/*",
            "/reload/*",
            "/schedule/*",
            "/coordination_redis/*",
            "/callbacks/*",
            "/debug/*",
            "/memory-usage-*",
            "/otel-spans",
            "/lens*",
            "/cost/*",
            "/cost_optimization/*",
            "/audit*",
            "/email/*",
            "/telemetry/*",
            "/utils/*",
            "/public/*",
            "/api/*",
            "/liteadmin/*",
            "/moyai/*",
            "/cloudzero/*",
            "/vantage/*",
            "/compliance/*",
            "/claude-code/*",
            "/claude_code_gateway/*",
            "/v1/logs",
            "/v1/rust_control_plane/*",
            "/v1/traces*",
        ),
    ),
)


# Routes where litellm (1.108.7) runs none of the gate's hooks before it sends: the gate can
# neither gate nor refuse them, whatever their row says (docs/proxy.md: deny them to clients).
# Assistants runs (the proxy runs no pre-call hook there, and litellm.arun_thread is no litellm
# ``client`` call, so no deployment hook either) end in ``required_action`` tool calls; a
# batch's requests run at the provider, and its output file holds their model turns.
UNREACHED: tuple[str, ...] = (
    "/threads/*/runs",
    "/v1/threads/*/runs",
    "/batches",
    "/v1/batches",
    "/{provider}/v1/batches",
)


def route_reached(path: str) -> bool:
    """Whether litellm runs a hook of the gate's on ``path`` before it sends (see UNREACHED)."""
    return not any(fnmatchcase(path, pattern) for pattern in UNREACHED)


def route_handling(path: str) -> Handling | None:
    """What the gate does on the proxy route ``path``; None for one no row names."""
    for _, how, patterns in ROUTES:
        if any(fnmatchcase(path, pattern) for pattern in patterns):
            return how
    return None


def request_path(request: Mapping[str, Any]) -> str | None:
    """The path the proxy received ``request`` on (the proxy writes ``proxy_server_request``
    itself, over anything a client sent under that name); None outside the proxy."""
    server_request = request.get("proxy_server_request")
    if not isinstance(server_request, Mapping):
        return None
    url = server_request.get("url")
    if not isinstance(url, str):
        return None
    try:
        return urlsplit(url).path or "/"
    except ValueError:
        return None


_ROOT_SEGMENTS = 3


def served_route_handling(path: str) -> Handling | None:
    """:func:`route_handling` of a path the proxy served, which carries the proxy's root path
    (``SERVER_ROOT_PATH`` and kin) in front of the route when one is set: a path no row names
    is tried again without its first segments (up to three)."""
    for _ in range(_ROOT_SEGMENTS + 1):
        how = route_handling(path)
        if how is not None:
            return how
        rest = path.split("/", 2)
        if len(rest) < 3 or not rest[2]:
            return None
        path = "/" + rest[2]
    return None


def untouched_route(request: Mapping[str, Any]) -> bool:
    """Whether the proxy received ``request`` on a route the gate leaves untouched."""
    path = request_path(request)
    return path is not None and served_route_handling(path) is UNTOUCHED


class RequestRefused(WireNotObservable, GuardrailRaisedException):
    """A proxy request the gate cannot gate, refused before it was sent (HTTP 400).

    Also a litellm guardrail intervention, so litellm hands it to the caller as it is. The
    message names the route or the field, never a value of the request.
    """

    status_code = 400

    def __init__(self, why: str) -> None:
        message = f"toolgate refused this request before sending: {why}"
        WireNotObservable.__init__(self, message)
        set_guardrail_fields(self, message, status_code=400, blocked_content=False)


class McpToolsRefused(RequestRefused):
    """A request naming MCP tools: litellm's MCP gateway would run the model's call on the
    MCP server (and send its result upstream) before the gate could decide it."""

    def __init__(self) -> None:
        super().__init__(
            "it names MCP tools (litellm's MCP gateway would run the model's tool call on "
            "the server before the gate decides it)"
        )


_TEXT_COMPLETION = frozenset({"text_completion", "atext_completion"})
_TOOL_FIELDS = ("tools", "functions", "tool_choice", "function_call")


def _names_mcp(data: Mapping[str, Any]) -> bool:
    if data.get("mcp_servers"):
        return True
    tools = data.get("tools")
    if not isinstance(tools, list):
        return False
    return any(
        isinstance(tool, Mapping) and str(tool.get("type", "")).startswith("mcp") for tool in tools
    )


def refuse_before_sending(data: Mapping[str, Any], call_type: str) -> None:
    """Raise, before anything is sent, for a proxy request the gate cannot gate: MCP tools,
    a call type the gate refuses, a route the table refuses (or does not name), a text
    completion asking for tools. Returns for anything else."""
    if _names_mcp(data):
        raise McpToolsRefused
    if handling(call_type) is REFUSED:
        raise CallRefused(call_type)
    path = request_path(data)
    if path is not None:
        how = served_route_handling(path)
        if how is REFUSED or how is None:
            raise RequestRefused(f"toolgate does not gate the proxy route {path[:200]!r}")
    if call_type in _TEXT_COMPLETION and any(data.get(field) for field in _TOOL_FIELDS):
        raise RequestRefused(
            "a text completion that asks for tools (litellm would drop the model's tool "
            "calls from the text result ungated)"
        )


__all__ = [
    "ROUTES",
    "McpToolsRefused",
    "RequestRefused",
    "refuse_before_sending",
    "request_path",
    "UNREACHED",
    "route_handling",
    "route_reached",
    "served_route_handling",
    "untouched_route",
]
