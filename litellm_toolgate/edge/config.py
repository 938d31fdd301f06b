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
setting came from). ``policy`` is an import path, ``package.module:callable``. The HMAC key is
never written in YAML: ``hmac_key_env`` names the environment variable that holds it.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..core.errors import GateConfigError
from ..core.limits import Limits
from ..core.policy import Policy

SETTING_KEYS = frozenset(
    {"tools", "tools_file", "policy", "limits", "tool_categories", "hmac_key_env", "run_id"}
)


class LimitSettings(BaseModel):
    """Any subset of :class:`Limits`' fields; the rest keep their defaults."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_calls: int | None = None
    max_argument_bytes: int | None = None
    max_total_argument_bytes: int | None = None
    max_events: int | None = None
    max_event_bytes: int | None = None
    max_text_bytes: int | None = None
    max_body_bytes: int | None = None
    max_json_depth: int | None = None
    idle_timeout: float | None = Field(default=None, allow_inf_nan=False)

    def build(self) -> Limits:
        given = {f.name: getattr(self, f.name) for f in fields(Limits)}
        return Limits(**{k: v for k, v in given.items() if v is not None})


class GateSettings(BaseModel):
    """What a YAML file may say about the gate."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tools: list[dict[str, Any]] | None = None
    tools_file: Path | None = None
    policy: str | None = None
    limits: LimitSettings = LimitSettings()
    tool_categories: dict[str, str] | None = None
    hmac_key_env: str | None = None
    run_id: str | None = None

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
        """The registry's tools; None (each request's own tools) when neither key is given."""
        if self.tools is not None and self.tools_file is not None:
            raise GateConfigError("toolgate settings take one of 'tools' or 'tools_file', not both")
        if self.tools_file is None:
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
        module_name, _, attr = self.policy.partition(":")
        try:
            target: Any = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise GateConfigError(
                f"policy {self.policy!r} cannot be imported: {type(exc).__name__}"
            ) from None
        if not callable(target):
            raise GateConfigError(f"policy {self.policy!r} is not callable")
        policy: Policy = target
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
        return {
            "tools": self.load_tools(base_dir),
            "policy": self.load_policy(),
            "limits": self.limits.build(),
            "tool_categories": self.tool_categories,
            "hmac_key": self.load_hmac_key(),
            "run_id": self.run_id,
        }
