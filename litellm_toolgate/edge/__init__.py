"""The litellm edge: httpx transport, gated streams, ToolGate. Thin around the core."""
