"""Sync model turns of a ``litellm.custom_provider_map`` provider: refused before sending.

litellm hands a sync ``litellm.completion`` for a provider registered in
``litellm.custom_provider_map`` straight to that provider's ``CustomLLM.completion`` /
``streaming``: no hook of a callback runs before or after it (not ``log_pre_api_call``, not
a success hook on the caller's thread), so the gate could neither arm nor check what it
returns. The async call is refused by the pre-call deployment hook (the route is not in the
route table). For the sync call the gate shadows, on each registered handler object, its
sync ``completion`` and ``streaming`` with a refusal, when a gate is constructed and again
whenever a gate's hook runs (a provider registered later); the refusal is a
:class:`CustomProviderRefused`, a guardrail intervention litellm hands the caller as it is.
When the last gate is closed the handlers get their own methods back.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

import litellm

from ..calltypes import CallRefused
from ..seam.symbols import lazy

_SHADOWED = ("completion", "streaming")


class CustomProviderRefused(CallRefused):
    """A sync model turn of a ``litellm.custom_provider_map`` provider: not gated, not sent."""

    def __init__(self, provider: str) -> None:
        super().__init__("completion")
        message = (
            f"toolgate cannot gate a sync model turn (litellm.completion, litellm.responses) "
            f"on the custom provider {provider!r} (litellm runs no hook for it); it was "
            f"refused before sending. Use litellm.acompletion(...) or ToolGate"
        )
        self.message = message
        self.args = (message,)


def _refusal(provider: str) -> Callable[..., Any]:
    def refused(*args: Any, **kwargs: Any) -> Any:
        raise CustomProviderRefused(provider)

    refused.__toolgate_refusal__ = True  # type: ignore[attr-defined]
    return refused


class CustomProviders:
    """The handlers whose sync methods the gates shadowed, to give them back."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._shadowed: weakref.WeakSet[Any] = weakref.WeakSet()

    def refuse(self) -> None:
        """Shadow the sync methods of every handler registered now (once each)."""
        entries = getattr(litellm, "custom_provider_map", None)
        if not entries:
            # Nothing registered (nearly always): the proxy reads ``default_on``, which asks
            # this, several times per streamed chunk.
            return
        custom_llm = lazy("CustomLLM")
        with self._lock:
            for entry in list(entries):
                handler = entry.get("custom_handler") if isinstance(entry, dict) else None
                if not isinstance(handler, custom_llm) or handler in self._shadowed:
                    continue
                provider = str(entry.get("provider", ""))
                for name in _SHADOWED:
                    setattr(handler, name, _refusal(provider))
                self._shadowed.add(handler)

    def restore(self) -> None:
        with self._lock:
            for handler in list(self._shadowed):
                for name in _SHADOWED:
                    current = vars(handler).get(name)
                    if getattr(current, "__toolgate_refusal__", False):
                        delattr(handler, name)
            self._shadowed = weakref.WeakSet()

    @property
    def shadowed(self) -> int:
        return len(self._shadowed)


__all__ = ["CustomProviderRefused", "CustomProviders"]
