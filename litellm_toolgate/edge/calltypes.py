"""Every litellm call type, classified once: gated, refused before sending, or not a model turn.

A call type that hands back a model's turn (and so possibly its tool calls) is either gated
by the callback or refused before anything is sent; it is never passed through. Everything
else (embeddings, images, files, batches, stores, ...) carries no model-made tool call and
passes untouched. ``tests/test_calltypes.py`` iterates litellm's own ``CallTypes``, so a call
type a future litellm adds fails that test until it is classified here.

Refusals are enforced twice: the async deployment hook raises :class:`CallRefused` (a
guardrail intervention, so litellm hands it to the caller as it is), and for any refused
sync call that gets that far ``log_pre_api_call`` holds a
:class:`~.sync.claiming.UngatedCallRefused` that the claiming transport raises in place of
the request (:mod:`.sync.hooks`).
"""

from __future__ import annotations

import enum

from ..core.errors import WireNotObservable
from .guardrailerrors import set_guardrail_fields
from .seam import frames
from .seam.symbols import GuardrailRaisedException


class Handling(enum.Enum):
    GATED = "gated"
    REFUSED = "refused before sending"
    NOT_A_MODEL_TURN = "not a model turn"


# Gated by the callback (async: the injected withholding client; sync: the claiming transport),
# by the wire the caller gets: chat, the Responses API (async and sync), and Anthropic Messages
# (``anthropic_messages``: litellm.anthropic.messages.acreate and the proxy's /v1/messages).
CHAT = frozenset({"completion", "acompletion"})
RESPONSES = frozenset({"responses", "aresponses"})
MESSAGES = frozenset({"anthropic_messages"})
GATED = CHAT | RESPONSES | MESSAGES
# The sync ones: gated on the wire by the claiming transport (sync.claiming).
SYNC = frozenset({"completion", "responses"})

# The sync twin of the Anthropic Messages entry point: litellm has no sync path that the gate
# can claim there, so it is refused before it is sent.
ANTHROPIC_MESSAGES = frozenset({"aanthropic_messages"})

# Model turns the gate does not read yet: refused before they are sent.
REFUSED = ANTHROPIC_MESSAGES | frozenset(
    {
        # Gemini's generateContent: a model turn with function calls on its own wire.
        "generate_content",
        "agenerate_content",
        "generate_content_stream",
        "agenerate_content_stream",
        # Realtime and the Responses websocket: model turns over a socket, not HTTP bodies.
        "_arealtime",
        "_aresponses_websocket",
        "arealtime_calls",
        # Assistants runs end in required_action tool calls the gate never sees.
        "arun_thread",
        "run_thread",
        "arun_thread_stream",
        "run_thread_stream",
        # Interactions (a model turn with function calls) and agent-to-agent messages.
        "create_interaction",
        "acreate_interaction",
        "send_message",
        "asend_message",
        # Compaction writes new output items; pass-through routes carry any provider's wire.
        "compact_responses",
        "acompact_responses",
        "pass_through_endpoint",
        "llm_passthrough_route",
        "allm_passthrough_route",
    }
)

# Sync routes whose chat calls go out through an OpenAI SDK client (their Responses calls
# use litellm's own client). Those in _SDK_CLAIMED are claimed on the SDK client's httpx
# client (see sync.sdkclaim), streamed and whole: openai/, azure/ and the routes litellm
# sends through its OpenAI route (custom_openai/ among them). The others are refused
# before sending under litellm.callbacks: text-completion-openai/ sends chat through the
# SDK's legacy completions. (azure_ai/ is not among them: litellm 1.108.7 and 1.110.2 send
# its chat through their own HTTP handler, claimed as cometapi/'s is, or, for an OpenAI
# model on an Azure OpenAI endpoint, through azure/'s SDK client: the azure/ route.)
_SDK_CLAIMED = frozenset(
    {"openai", "azure", "perplexity", "cerebras", "litellm_proxy", "custom_openai"}
)
_SDK_CLIENT_ROUTES = _SDK_CLAIMED | frozenset({"text-completion-openai"})


def handling(call_type: str) -> Handling | None:
    """How the callback treats ``call_type``; None for one it has never heard of."""
    if call_type in GATED:
        return Handling.GATED
    if call_type in REFUSED:
        return Handling.REFUSED
    if call_type in NOT_A_MODEL_TURN:
        return Handling.NOT_A_MODEL_TURN
    return None


def sync_route_refused(route: str, call_type: str) -> bool:
    """Whether a sync ``call_type`` on ``route`` goes out through a client the gate cannot see
    (an OpenAI SDK client on a route the gate does not claim it on)."""
    return call_type == "completion" and route in _SDK_CLIENT_ROUTES - _SDK_CLAIMED


_FRESH_WHOLE_CLIENT = frozenset({"watsonx"})
"""Routes whose litellm handler sends a sync whole (``stream=False``) call through an
``HTTPHandler`` it builds for that one call when the call brings none (watsonx/: litellm's
``OpenAILikeChatHandler``, 1.108.7 and 1.110.2: ``HTTPHandler(timeout=...)`` with the call's
timeout, which its request then carries). No hook of the callback sees that client, so the
gate builds the same one for the call (``ToolGate``: tapped; the callback: put into the
call's arguments at set-up and claimed)."""


def builds_whole_client(route: str, streamed: bool) -> bool:
    """Whether litellm sends a sync whole call on ``route`` through a client it builds for
    that call alone (:data:`_FRESH_WHOLE_CLIENT`)."""
    return not streamed and route in _FRESH_WHOLE_CLIENT


def sync_route_sdk(route: str, call_type: str) -> bool:
    """Whether a sync ``call_type`` on ``route`` is claimed on the OpenAI SDK's http client."""
    return call_type == "completion" and route in _SDK_CLAIMED


def in_messages_entry_point() -> bool:
    """Whether the call being made runs under litellm's Anthropic Messages entry point.

    A sync ``litellm.anthropic.messages.create`` on a chat model makes a sync
    ``litellm.completion`` whose stream litellm's Messages adapter reads, and that adapter
    ends the stream quietly on any ``Exception`` (it logs it and stops iterating): a
    quarantine raised there could never reach the caller. The hook that arms the call asks
    this, on the caller's thread, and refuses such a stream before it is sent. (On a
    Responses model the inner call is a sync ``litellm.responses`` whose stream litellm's
    async Messages iterator reads: a quarantine there is its stream's error event, gated.)
    Only a refusal can follow from the answer: if litellm renames the function, the call is
    armed as before and a quarantine ends the stream without releasing anything.
    """
    return frames.under_messages_handler(frames.caller())


class CallRefused(WireNotObservable, GuardrailRaisedException):
    """A model-turn call the gate does not gate, refused before it was sent.

    Also a litellm guardrail intervention, so litellm hands it to the caller unchanged.
    """

    status_code = 400

    def __init__(self, call_type: str) -> None:
        message = (
            f"toolgate does not gate litellm call type {call_type!r} (a model turn that may "
            "carry tool calls), so it was refused before sending"
        )
        WireNotObservable.__init__(self, message)
        set_guardrail_fields(self, message, status_code=400, blocked_content=False)


NOT_A_MODEL_TURN = frozenset(
    {
        "embedding", "aembedding", "text_completion", "atext_completion",
        "image_generation", "aimage_generation", "image_edit", "aimage_edit",
        "moderation", "amoderation", "transcription", "atranscription", "speech", "aspeech",
        "rerank", "arerank", "search", "asearch", "decisions", "adecisions",
        "systemone", "asystemone", "extraction", "aextraction",
        "acreate_realtime_client_secret", "acreate_realtime_transcription_session",
        "acreate_realtime_translation_client_secret", "arealtime_translation_calls",
        "create_batch", "acreate_batch", "retrieve_batch", "aretrieve_batch",
        "cancel_batch", "acancel_batch",
        "get_assistants", "aget_assistants", "create_assistants", "acreate_assistants",
        "delete_assistant", "adelete_assistant", "create_thread", "acreate_thread",
        "get_thread", "aget_thread", "add_message", "a_add_message",
        "get_messages", "aget_messages",
        "file_retrieve", "afile_retrieve", "file_delete", "afile_delete",
        "file_list", "afile_list", "create_file", "acreate_file",
        "file_content", "afile_content",
        "create_fine_tuning_job", "acreate_fine_tuning_job", "cancel_fine_tuning_job",
        "acancel_fine_tuning_job", "list_fine_tuning_jobs", "alist_fine_tuning_jobs",
        "retrieve_fine_tuning_job", "aretrieve_fine_tuning_job",
        "create_video", "acreate_video", "video_generation", "avideo_generation",
        "video_retrieve", "avideo_retrieve", "video_content", "avideo_content",
        "video_remix", "avideo_remix", "video_list", "avideo_list",
        "video_retrieve_job", "avideo_retrieve_job", "video_delete", "avideo_delete",
        "video_create_character", "avideo_create_character",
        "video_get_character", "avideo_get_character", "video_edit", "avideo_edit",
        "video_extension", "avideo_extension",
        "vector_store_file_create", "avector_store_file_create",
        "vector_store_file_list", "avector_store_file_list",
        "vector_store_file_retrieve", "avector_store_file_retrieve",
        "vector_store_file_content", "avector_store_file_content",
        "vector_store_file_update", "avector_store_file_update",
        "vector_store_file_delete", "avector_store_file_delete",
        "vector_store_create", "avector_store_create",
        "vector_store_search", "avector_store_search",
        "ingest", "aingest", "query", "aquery",
        "create_container", "acreate_container", "list_containers", "alist_containers",
        "retrieve_container", "aretrieve_container", "delete_container", "adelete_container",
        "list_container_files", "alist_container_files",
        "upload_container_file", "aupload_container_file",
        "create_sandbox", "acreate_sandbox", "delete_sandbox", "adelete_sandbox",
        "run_code", "arun_code", "code_interpreter_tool", "acode_interpreter_tool",
        # Stored Responses: handed back as stored (see docs/callbacks.md), not a new turn.
        "get_responses", "aget_responses", "delete_responses", "adelete_responses",
        "cancel_responses", "acancel_responses", "alist_input_items",
        # Running a tool (MCP) or listing tools: the gate's caller, not a model turn.
        "call_mcp_tool", "list_mcp_tools", "acreate_skill",
        "ocr", "aocr",
    }
)  # fmt: skip

assert not (GATED & REFUSED) and not ((GATED | REFUSED) & NOT_A_MODEL_TURN)

__all__ = [
    "ANTHROPIC_MESSAGES",
    "CHAT",
    "CallRefused",
    "GATED",
    "Handling",
    "MESSAGES",
    "NOT_A_MODEL_TURN",
    "REFUSED",
    "RESPONSES",
    "SYNC",
    "handling",
    "in_messages_entry_point",
    "sync_route_refused",
    "builds_whole_client",
    "sync_route_sdk",
]
