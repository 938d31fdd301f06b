"""The litellm edge: everything that speaks to litellm, thin around the core.

``ToolGate`` and its gated streams, the httpx transport that shows the gate every byte, the
clients litellm is handed, the route table and call types, the settings, the callback and
the proxy guardrail (:mod:`.guardrail`), the sync machinery (:mod:`.sync`), the carriers of
what litellm hands its caller (:mod:`.carriers`), and the seam (:mod:`.seam`), the only place
that reads litellm's internals. Imports the core only: the run and the operator's tools plug
in through :mod:`litellm_toolgate.core.plugs`.
"""
