"""The import paths of modules that moved when the package was arranged by concern.

Code written against the earlier layout keeps working: ``import
litellm_toolgate.edge.toolloop`` gives the module now at ``litellm_toolgate.run.loop`` (the
same module object, so its classes and state are shared), with a DeprecationWarning that
names the new path. :data:`MOVED` is the whole list; a name not in it is not aliased. Two old
names are not: ``core.framing`` and ``core.records`` are now the packages holding those
modules (``core.framing.decoder``, ``core.records.record``).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

MOVED = {
    "litellm_toolgate.core.sse": "litellm_toolgate.core.framing.sse",
    "litellm_toolgate.core.eventstream": "litellm_toolgate.core.framing.eventstream",
    "litellm_toolgate.core.ndjson": "litellm_toolgate.core.framing.ndjson",
    "litellm_toolgate.core.strictjson": "litellm_toolgate.core.values.strictjson",
    "litellm_toolgate.core.ecmaregex": "litellm_toolgate.core.values.ecmaregex",
    "litellm_toolgate.core.ecmaschema": "litellm_toolgate.core.values.ecmaschema",
    "litellm_toolgate.core.fastschema": "litellm_toolgate.core.values.fastschema",
    "litellm_toolgate.core.grammar": "litellm_toolgate.core.values.grammar",
    "litellm_toolgate.core.registry": "litellm_toolgate.core.values.registry",
    "litellm_toolgate.core.attempt": "litellm_toolgate.core.decision.attempt",
    "litellm_toolgate.core.call": "litellm_toolgate.core.decision.call",
    "litellm_toolgate.core.ledger": "litellm_toolgate.core.decision.ledger",
    "litellm_toolgate.core.body": "litellm_toolgate.core.decision.body",
    "litellm_toolgate.core.carrier": "litellm_toolgate.core.decision.carrier",
    "litellm_toolgate.core.gated": "litellm_toolgate.core.decision.gated",
    "litellm_toolgate.core.withhold": "litellm_toolgate.core.decision.withhold",
    "litellm_toolgate.core.state": "litellm_toolgate.core.decision.state",
    "litellm_toolgate.core.events": "litellm_toolgate.core.decision.events",
    "litellm_toolgate.core.limits": "litellm_toolgate.core.decision.limits",
    "litellm_toolgate.core.pending": "litellm_toolgate.core.decision.pending",
    "litellm_toolgate.core.profiles": "litellm_toolgate.core.decision.profiles",
    "litellm_toolgate.core.sanitize": "litellm_toolgate.core.records.sanitize",
    "litellm_toolgate.core.scrub": "litellm_toolgate.core.records.scrub",
    "litellm_toolgate.core.observe": "litellm_toolgate.core.records.observe",
    "litellm_toolgate.core.metrics": "litellm_toolgate.core.records.metrics",
    "litellm_toolgate.core.journal": "litellm_toolgate.core.rules.journal",
    "litellm_toolgate.core.loop": "litellm_toolgate.core.rules.loop",
    "litellm_toolgate.core.approval": "litellm_toolgate.core.rules.approval",
    "litellm_toolgate.core.commands": "litellm_toolgate.core.rules.commands",
    "litellm_toolgate.core.escalation": "litellm_toolgate.core.rules.escalation",
    "litellm_toolgate.core.compose": "litellm_toolgate.core.rules.compose",
    "litellm_toolgate.core.policy": "litellm_toolgate.core.rules.policy",
    "litellm_toolgate.edge.callback": "litellm_toolgate.edge.guardrail.callback",
    "litellm_toolgate.edge.admission": "litellm_toolgate.edge.guardrail.deciders",
    "litellm_toolgate.edge.callsetup": "litellm_toolgate.edge.guardrail.callsetup",
    "litellm_toolgate.edge.reporting": "litellm_toolgate.edge.guardrail.decisionlog",
    "litellm_toolgate.edge.taps": "litellm_toolgate.edge.guardrail.taps",
    "litellm_toolgate.edge.precall": "litellm_toolgate.edge.guardrail.request",
    "litellm_toolgate.edge.postcall": "litellm_toolgate.edge.guardrail.answer",
    "litellm_toolgate.edge.loghold": "litellm_toolgate.edge.guardrail.loghold",
    "litellm_toolgate.edge.proxyroutes": "litellm_toolgate.edge.guardrail.proxyroutes",
    "litellm_toolgate.edge.cacheguard": "litellm_toolgate.edge.guardrail.cacheguard",
    "litellm_toolgate.edge.intervention": "litellm_toolgate.edge.guardrailerrors",
    "litellm_toolgate.edge.policyrun": "litellm_toolgate.edge.judge",
    "litellm_toolgate.edge.preflight": "litellm_toolgate.edge.parsers",
    "litellm_toolgate.edge.instruments": "litellm_toolgate.operate.instruments",
    "litellm_toolgate.edge.prometheus": "litellm_toolgate.operate.metrics",
    "litellm_toolgate.edge.routeescalation": "litellm_toolgate.operate.escalation",
    "litellm_toolgate.edge.toolloop": "litellm_toolgate.run.loop",
    "litellm_toolgate.edge.runstate": "litellm_toolgate.run.state",
    "litellm_toolgate.edge.tools": "litellm_toolgate.run.tools",
    "litellm_toolgate.edge.journalstores": "litellm_toolgate.run.journal",
    "litellm_toolgate.edge.journalstores.store": "litellm_toolgate.run.journal.store",
    "litellm_toolgate.edge.journalstores.sqlite": "litellm_toolgate.run.journal.sqlite",
    "litellm_toolgate.edge.journalstores.postgres": "litellm_toolgate.run.journal.postgres",
    "litellm_toolgate.edge.journalstores.schema": "litellm_toolgate.run.journal.schema",
    "litellm_toolgate.edge.journalstores.cli": "litellm_toolgate.run.journal.cli",
    "litellm_toolgate.edge.pathscope": "litellm_toolgate.policies.paths",
    "litellm_toolgate.edge.approvalwait": "litellm_toolgate.policies.approval",
    "litellm_toolgate.edge.waiting": "litellm_toolgate.policies.approver",
    "litellm_toolgate.edge.commandrun": "litellm_toolgate.policies.commands",
    "litellm_toolgate.edge.atstart": "litellm_toolgate.policies.checks",
    "litellm_toolgate.demo.upstream": "litellm_toolgate.loopback.upstream",
    "litellm_toolgate.operate.requests": "litellm_toolgate.loopback.requests",
}
"""Old import path to where the module lives now."""


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old path and loads it as the module at its new path."""

    def __init__(self) -> None:
        self._specs: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = MOVED[spec.name]
        warnings.warn(
            f"{spec.name} moved to {new}; import it from there",
            DeprecationWarning,
            stacklevel=2,
        )
        module = importlib.import_module(new)
        self._specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # The import system has just set the alias's spec on the module: give it its own back.
        alias = module.__spec__
        if alias is not None and alias.name in self._specs:
            module.__spec__ = self._specs.pop(alias.name)


_ALIAS = _Alias()


def install() -> None:
    """Put the alias first on ``sys.meta_path`` (once): an old path whose parent is itself an
    alias must not be found again, as a second copy, in the new parent's folder."""
    if _ALIAS not in sys.meta_path:
        sys.meta_path.insert(0, _ALIAS)


__all__ = ["MOVED", "install"]
