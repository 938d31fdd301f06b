"""The gate's settings as they appear in YAML (a LiteLLM proxy config), checked by pydantic.

A proxy hands a ``guardrails:`` entry's ``litellm_params`` to the guardrail's constructor as
keyword arguments, next to some forty keys of its own. :class:`GateSettings` picks out the
gate's keys (:data:`SETTING_KEYS`) and validates them strictly: an unknown key *inside*
``limits``, a limit that is not positive, a schema file that is missing or not JSON, a tool
schema that fails its metaschema, a policy that cannot be imported: each is a
:class:`GateConfigError` naming the setting, raised while the proxy starts, never on a
request. The same model loads a stand-alone settings file (:meth:`GateSettings.from_file`)
for the ``litellm_settings.callbacks`` style, where the proxy passes no arguments.

``tools`` holds tool definitions inline (chat or Responses shape); ``tools_file`` names a
JSON file holding such a list, resolved against ``base_dir`` (the folder of the file the
setting came from). One of them is required: ``tools: request`` (:data:`REQUEST_TOOLS`) says
that each request's own tools are the registry, which is never what a missing key means.

Every other keyword a guardrail's constructor is given must be one litellm itself gives a
guardrail (:func:`litellm_guardrail_keys`); anything else is a misspelt setting, and a
:class:`GateConfigError` names it.

``policy`` is an import path, ``package.module:callable``. The HMAC key is never written in
YAML: ``hmac_key_env`` names the environment variable that holds it.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import fields
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
)

from ..core.decision.limits import Limits
from ..core.errors import GateConfigError
from ..core.rules.escalation import Rule
from ..core.rules.policy import Policy

SETTING_KEYS = frozenset(
    {"tools", "tools_file", "policy", "limits", "tool_categories", "hmac_key_env", "run_id"}
    | {"metrics", "escalation"}  # operating the gate: see docs/metrics.md
)

REQUEST_TOOLS = "request"
"""The ``tools`` value that makes each request's own tools the registry."""

# What a LiteLLM proxy passes every custom guardrail besides the YAML's own keys: each
# ``LitellmParams`` field that has a default (``model_dump(exclude_none=True)``), minus the
# ones it passes under other names. Checked against 1.108.7 and 1.110.2; the installed
# version's own list is added at run time, so a newer proxy's new default does not fail.
_PROXY_KEYS = frozenset(
    {
        "action", "block_on_violation", "breakdown", "ccr_retrieval", "chunk_budget_chars",
        "confidence_threshold", "content_filter_threshold",
        "contextual_grounding_from_messages", "default_action", "detect_execution_intent",
        "dev_info", "disable_exception_on_block",
        "experimental_use_latest_role_message_only", "fail_on_error",
        "forward_messages_as_sent", "include_evidence", "include_scanners",
        "is_detector_server", "mask", "on_disallowed_action", "on_flagged",
        "on_flagged_action", "only_scan_new_messages", "payload", "pii_confidence_threshold",
        "presidio_language", "prompt_attack_threshold", "sanitize_error_detail",
        "send_user_api_key_alias", "send_user_api_key_team_id", "send_user_api_key_user_id",
        "skip_unscannable_attachments", "sticky_session_routing", "unreachable_fallback",
        "use_v2", "verify_ssl", "version",
    }
)  # fmt: skip


@cache
def litellm_guardrail_keys() -> frozenset[str]:
    """Keywords litellm gives a guardrail's constructor that are not the gate's settings.

    The named parameters of litellm's ``CustomGuardrail`` and ``CustomLogger`` constructors,
    and every key a proxy passes a custom guardrail on its own (see ``_PROXY_KEYS``).
    """
    import inspect

    from .seam.symbols import CustomGuardrail, CustomLogger

    keys = set(_PROXY_KEYS)
    for init in (CustomGuardrail.__init__, CustomLogger.__init__):
        for name, parameter in inspect.signature(init).parameters.items():
            if name != "self" and parameter.kind is not inspect.Parameter.VAR_KEYWORD:
                keys.add(name)
    try:
        from .seam.symbols import LitellmParams

        defaults = LitellmParams(guardrail="", mode="post_call")
        keys.update(defaults.model_dump(exclude_none=True))
    except Exception:  # another version's model: the fixed list stands
        pass
    keys -= {"guardrail", "mode"}  # passed as guardrail_name and event_hook
    return frozenset(keys - SETTING_KEYS)


def unknown_guardrail_keys(kwargs: Mapping[str, Any]) -> list[str]:
    """The keywords that are neither the gate's settings nor litellm's own, sorted."""
    allowed = litellm_guardrail_keys()
    return sorted(k for k in kwargs if k not in allowed and k not in SETTING_KEYS)


def import_callable(path: str, what: str) -> Any:
    """The callable at ``package.module:name``; a :class:`GateConfigError` naming ``what``
    when it cannot be imported or is not callable."""
    module_name, _, attr = path.partition(":")
    try:
        target: Any = getattr(importlib.import_module(module_name), attr)
    except GateConfigError:
        raise  # a built-in policy built at import names its own setting
    except Exception as exc:
        # Whatever the module raised while it was imported: a bare ValueError or TypeError
        # would reach a proxy, which logs such a guardrail and starts without it. Only the
        # type is kept (the message could quote anything).
        raise GateConfigError(f"{what} {path!r} cannot be imported: {type(exc).__name__}") from None
    if not callable(target):
        raise GateConfigError(f"{what} {path!r} is not callable")
    return target


class LimitSettings(BaseModel):
    """Any subset of :class:`Limits`' fields; the rest keep their defaults.

    Strict: a count is a YAML integer (``true`` is not 1, ``"16"`` is not 16), the idle
    timeout a number; nothing is coerced.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    max_calls: StrictInt | None = None
    max_argument_bytes: StrictInt | None = None
    max_total_argument_bytes: StrictInt | None = None
    max_events: StrictInt | None = None
    max_event_bytes: StrictInt | None = None
    max_text_bytes: StrictInt | None = None
    max_body_bytes: StrictInt | None = None
    max_json_depth: StrictInt | None = None
    idle_timeout: StrictInt | StrictFloat | None = Field(default=None, allow_inf_nan=False)

    def build(self) -> Limits:
        given = {f.name: getattr(self, f.name) for f in fields(Limits)}
        return Limits(**{k: v for k, v in given.items() if v is not None})


class MetricsSettings(BaseModel):
    """``metrics:`` in the gate's settings. Present means on."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    port: int | None = Field(default=None, ge=1, le=65535)
    """Serve ``/metrics`` on this port too (the proxy's own ``/metrics`` needs litellm's
    ``prometheus`` callback)."""
    host: str = "127.0.0.1"
    routes: list[str] = []
    """Route label values always kept (the deployments' ``litellm_params.model``)."""
    max_routes: int = Field(default=20, ge=0, le=1000)
    """Other routes kept as their own label value; past them, ``other``."""


Hook = Callable[[dict[str, Any]], object]


class EscalationSettings(BaseModel):
    """``escalation:`` in the gate's settings. Present means on."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    window_seconds: float = Field(default=60.0, gt=0, allow_inf_nan=False)
    buckets: int = Field(default=12, ge=1, le=600)
    min_attempts: int = Field(default=20, ge=1)
    trip_rate: float = Field(default=0.5, gt=0, le=1)
    recover_rate: float = Field(default=0.1, ge=0, lt=1)
    take_out_of_routing: bool = False
    hook: str | None = None
    """An import path, ``package.module:callable``, called with each alert's dict."""
    shared: Literal["auto", "off"] = "auto"
    """``auto``: through the Redis litellm's cache settings name, when they name one."""
    key_prefix: str = Field(default="toolgate:escalation", min_length=1)
    sync_seconds: float = Field(default=0.5, gt=0, le=60, allow_inf_nan=False)
    max_routes: int = Field(default=100, ge=1, le=10_000)

    @field_validator("hook")
    @classmethod
    def _hook_path(cls, value: str | None) -> str | None:
        if value is not None and value.count(":") != 1:
            raise ValueError("hook must be an import path of the form 'package.module:name'")
        return value

    def rule(self) -> Rule:
        try:
            return Rule(
                self.window_seconds,
                self.buckets,
                self.min_attempts,
                self.trip_rate,
                self.recover_rate,
            )
        except ValueError as exc:
            raise GateConfigError(f"toolgate escalation settings are invalid: {exc}") from None

    def load_hook(self) -> Hook | None:
        if self.hook is None:
            return None
        hook: Hook = import_callable(self.hook, "escalation hook")
        return hook


class GateSettings(BaseModel):
    """What a YAML file may say about the gate."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tools: list[dict[StrictStr, Any]] | Literal["request"] | None = None
    tools_file: Path | None = None
    policy: StrictStr | None = None
    limits: LimitSettings = LimitSettings()
    tool_categories: dict[StrictStr, StrictStr] | None = None
    hmac_key_env: StrictStr | None = None
    run_id: StrictStr | None = None
    metrics: MetricsSettings | None = None
    escalation: EscalationSettings | None = None

    @field_validator("tools_file", mode="before")
    @classmethod
    def _tools_file_path(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, (str, os.PathLike)):
            raise ValueError("tools_file must be a path")
        return value

    @field_validator("policy")
    @classmethod
    def _policy_path(cls, value: str | None) -> str | None:
        if value is not None and value.count(":") != 1:
            raise ValueError("policy must be an import path of the form 'package.module:name'")
        return value

    # ---- loading ---------------------------------------------------------------------------
    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> GateSettings:
        try:
            return cls.model_validate(dict(values))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'settings'}: {err['msg']}"
                for err in exc.errors()
            )
            raise GateConfigError(f"toolgate settings are invalid: {problems}") from None

    @classmethod
    def from_guardrail_kwargs(cls, kwargs: Mapping[str, Any]) -> GateSettings:
        """The gate's own keys out of everything a proxy passes a guardrail's constructor."""
        return cls.from_mapping({k: v for k, v in kwargs.items() if k in SETTING_KEYS})

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> tuple[GateSettings, Path]:
        """Settings from a YAML file of their own; returns them and the folder they came from."""
        source = Path(path)
        try:
            loaded = yaml.safe_load(source.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise GateConfigError(
                f"cannot read toolgate settings {source}: {type(exc).__name__}"
            ) from None
        if not isinstance(loaded, Mapping):
            raise GateConfigError(f"toolgate settings {source} must be a YAML mapping")
        return cls.from_mapping(loaded), source.resolve().parent

    # ---- what the gate is built from -------------------------------------------------------
    def load_tools(self, base_dir: Path | None = None) -> list[dict[str, Any]] | None:
        """The registry's tools; None for ``tools: request`` (each request's own tools)."""
        if self.tools is not None and self.tools_file is not None:
            raise GateConfigError("toolgate settings take one of 'tools' or 'tools_file', not both")
        if self.tools is None and self.tools_file is None:
            raise GateConfigError(
                "toolgate settings need the tools to gate against: 'tools' (a list), "
                "'tools_file', or 'tools: request' to take each request's own tools"
            )
        if self.tools == REQUEST_TOOLS:
            return None
        if self.tools_file is None:
            assert isinstance(self.tools, list)
            return self.tools
        path = self.tools_file
        if not path.is_absolute():
            path = (base_dir or Path.cwd()) / path
        try:
            tools = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise GateConfigError(
                f"tools_file {path} cannot be read as JSON: {type(exc).__name__}"
            ) from None
        if not isinstance(tools, list):
            raise GateConfigError(f"tools_file {path} must hold a JSON list of tools")
        return tools

    def load_policy(self) -> Policy | None:
        if self.policy is None:
            return None
        policy: Policy = import_callable(self.policy, "policy")
        return policy

    def load_hmac_key(self) -> bytes | None:
        if self.hmac_key_env is None:
            return None
        value = os.environ.get(self.hmac_key_env)
        if not value:
            raise GateConfigError(f"hmac_key_env names {self.hmac_key_env!r}, which is not set")
        return value.encode()

    def gate_arguments(self, base_dir: Path | None = None) -> dict[str, Any]:
        """Keyword arguments for :class:`ToolGate`, every one checked."""
        tools = self.load_tools(base_dir)
        return {
            "tools": REQUEST_TOOLS if tools is None else tools,
            "policy": self.load_policy(),
            "limits": self.limits.build(),
            "tool_categories": self.tool_categories,
            "hmac_key": self.load_hmac_key(),
            "run_id": self.run_id,
        }
