"""Route profiles: the only place where the gate accepts what a route really sends.

The strict contract (``core/decision/state.py``, the normalizers, the ledger) is the default
profile. Some routes send a terminal or a shape that differs from it and is nonetheless a sound,
complete response. A profile names those deviations, per route and wire, each with the
request condition under which it applies, the public report it rests on, and the fixture
recorded in its shape (``fixtures/<wire>/manifest.json`` names the same behaviour).

A profile never relaxes JSON, schema, policy, identity of calls (``call_id``, item ids,
names) or limits; it only says which terminal or which shape counts as the real one. A route
is matched by the litellm provider prefix of the model (``mistral/...``); a model without a
prefix, or with one not listed here, gets the strict profile. A deployment can name the
profile of a route litellm reaches through another provider (``route_profiles``, e.g. an LM
Studio server called as ``openai/<model>``): :func:`check_overrides`.

The table is versioned (:data:`VERSION`): a change of what a route is accepted to send is a
change of this file, reviewed with its citation.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import GateConfigError

VERSION = "2026-12-04.1"


class Deviation(enum.Enum):
    """An observed departure from the strict contract that a profile may accept."""

    FORCED_TOOL_CHOICE_STOP = "forced_tool_choice_stop"
    """Chat: ``finish_reason: "stop"`` with tool calls, when the request forced a tool."""
    WHOLE_CALLS_WITHOUT_INDEX = "whole_calls_without_index"
    """Chat: each tool call arrives whole in one fragment that carries no ``index``."""
    CONTENT_AS_PARTS = "content_as_parts"
    """Chat: ``delta.content`` is a list of typed parts (``text``, ``thinking``)."""
    ARGUMENTS_ONLY_IN_DONE = "arguments_only_in_done"
    """Responses: no argument deltas; the whole arguments first appear in ``.done``."""
    ROTATING_RESPONSE_ID = "rotating_response_id"
    """Responses: ``response.id`` differs between the lifecycle events of one response."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One accepted deviation of one route."""

    deviation: Deviation
    wire: str
    condition: str
    citations: tuple[str, ...]
    fixture: str


@dataclass(frozen=True, slots=True)
class Profile:
    """What one route is accepted to send. The empty profile is the strict contract."""

    route: str
    entries: tuple[Entry, ...] = ()

    def accepts(self, deviation: Deviation) -> bool:
        return any(e.deviation is deviation for e in self.entries)

    @property
    def needs_request(self) -> bool:
        """Whether an entry depends on the request (the edge then hands its fields over)."""
        return self.accepts(Deviation.FORCED_TOOL_CHOICE_STOP)


STRICT = Profile("")

_VLLM_TABLE = "https://github.com/vllm-project/vllm/pull/25054"
_FORCED = (
    "the request's tool_choice names a function "
    '({"type": "function", "function": {"name": ...}}) or is "required"'
)
_FORCED_NAMED = 'the request\'s tool_choice names a function ({"type": "function", ...})'

PROFILES: Mapping[str, Profile] = {
    "openai": Profile(
        "openai",
        (
            Entry(
                Deviation.FORCED_TOOL_CHOICE_STOP,
                "chat",
                _FORCED,
                (
                    # Measured against api.openai.com: a named tool choice finishes "stop",
                    # streamed and not.
                    _VLLM_TABLE,
                    "https://github.com/ENTERPILOT/GoModel/pull/124",
                    # tool_choice="required" finishing "stop" on OpenAI (2024).
                    "https://github.com/Mirascope/mirascope/issues/256",
                    "https://github.com/SecretiveShell/MCP-Bridge/pull/96",
                ),
                "profiles/forced_choice_stop_with_calls",
            ),
        ),
    ),
    "hosted_vllm": Profile(
        "hosted_vllm",
        (
            Entry(
                Deviation.FORCED_TOOL_CHOICE_STOP,
                "chat",
                _FORCED_NAMED,
                (
                    _VLLM_TABLE,
                    "https://github.com/vllm-project/vllm/pull/49496",
                    "https://github.com/vllm-project/vllm/pull/37005",
                ),
                "profiles/forced_choice_stop_with_calls",
            ),
        ),
    ),
    "mistral": Profile(
        "mistral",
        (
            Entry(
                Deviation.WHOLE_CALLS_WITHOUT_INDEX,
                "chat",
                "always",
                (
                    "https://github.com/comet-ml/opik/issues/8362",
                    "https://github.com/dust-tt/dust/pull/4226",
                ),
                "profiles/mistral_whole_calls_without_index",
            ),
            Entry(
                Deviation.CONTENT_AS_PARTS,
                "chat",
                "always",
                (
                    "https://github.com/BerriAI/litellm/issues/16272",
                    "https://github.com/vercel/ai/pull/8072",
                ),
                "profiles/mistral_content_parts",
            ),
        ),
    ),
    "lm_studio": Profile(
        "lm_studio",
        (
            Entry(
                Deviation.ARGUMENTS_ONLY_IN_DONE,
                "responses",
                "no argument delta was sent for the item",
                (
                    "https://github.com/earendil-works/pi/pull/917",
                    "https://github.com/BerriAI/litellm/pull/27792",
                ),
                "responses/lm_studio_arguments_only_in_done",
            ),
        ),
    ),
    "github_copilot": Profile(
        "github_copilot",
        (
            Entry(
                Deviation.ROTATING_RESPONSE_ID,
                "responses",
                "always",
                (
                    "https://github.com/lidge-jun/opencodex/issues/995",
                    "https://github.com/duolahypercho/codex-router/issues/814",
                ),
                "responses/copilot_rotating_response_id",
            ),
        ),
    ),
}


def check_overrides(overrides: object) -> dict[str, str]:
    """A deployment's route-to-profile table, checked; an unknown profile name stops start-up.

    Keys are exact litellm model strings (``openai/qwen3-8b``) or provider prefixes ending in
    ``/``; values name a profile of :data:`PROFILES` or ``strict``. This is how a route
    litellm reaches through another provider gets its own profile, e.g. an LM Studio server
    called as ``openai/<model>`` with its ``api_base``.
    """
    if overrides is None:
        return {}
    if not isinstance(overrides, Mapping) or not all(
        isinstance(k, str) and k and isinstance(v, str) for k, v in overrides.items()
    ):
        raise GateConfigError("route_profiles must map model strings to profile names")
    unknown = sorted(v for v in overrides.values() if v != "strict" and v not in PROFILES)
    if unknown:
        raise GateConfigError(f"route_profiles names unknown profiles: {unknown}")
    return dict(overrides)


def profile_for(route: str, overrides: Mapping[str, str] | None = None) -> Profile:
    """The profile of a litellm model string (``mistral/...``); strict when none matches.

    ``overrides`` (see :func:`check_overrides`) is consulted first: the exact model string,
    then its prefix.
    """
    prefix, slash, _ = route.partition("/")
    if overrides:
        named = overrides.get(route) or (overrides.get(prefix + "/") if slash else None)
        if named is not None:
            return PROFILES.get(named, STRICT)
    if not slash:
        return STRICT
    return PROFILES.get(prefix.strip().lower(), STRICT)


def forced_tool_choice(tool_choice: Any, *, named_only: bool) -> bool:
    """Whether a chat request's ``tool_choice`` forces a tool call."""
    if isinstance(tool_choice, Mapping):
        function = tool_choice.get("function")
        return tool_choice.get("type") == "function" and (
            isinstance(function, Mapping) and isinstance(function.get("name"), str)
        )
    return tool_choice == "required" and not named_only


def stop_with_calls_accepted(profile: Profile, tool_choice: Any) -> bool:
    """Whether ``finish_reason: "stop"`` with calls is this route's terminal for the request."""
    for entry in profile.entries:
        if entry.deviation is Deviation.FORCED_TOOL_CHOICE_STOP:
            return forced_tool_choice(tool_choice, named_only=entry.condition == _FORCED_NAMED)
    return False
