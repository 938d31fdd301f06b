"""What the caller is handed, one module per litellm object family.

Each carrier turns what litellm yields (or returns whole) into what the caller may see while
the attempt decides: text passes live, every piece of a tool call is withheld, and the
carrier's own assembly of each call is kept for the attempt to compare with the wire.

* :mod:`.chat`: chat-completions chunks (``ModelResponseStream``) and whole responses.
* :mod:`.responses`: the Responses API's event objects and ``ResponsesAPIResponse``.
* :mod:`.messages`: the Anthropic Messages SSE bytes of litellm's ``/v1/messages`` entry point.

No I/O here: litellm's types only.
"""
