"""The gate instance that proxy_callbacks.yaml names (``toolgate_callback.gate``).

The proxy imports this module from the config file's folder. The gate's settings live in
toolgate.yaml next to it, so that file (not this one) is what an operator edits.
"""

from pathlib import Path

from litellm_toolgate import ToolGateGuardrail

gate = ToolGateGuardrail.from_settings_file(Path(__file__).with_name("toolgate.yaml"))
