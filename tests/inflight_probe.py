"""A test-only window into a running LiteLLM proxy: how many requests the gate holds.

The proxy tests load this module as an extra ``litellm_settings.callbacks`` entry
(``inflight_probe.probe``). On import it starts a tiny HTTP server on 127.0.0.1, on the port
named by ``TOOLGATE_INFLIGHT_PROBE_PORT``, whose every GET answers with the sum of
``in_flight`` over the :class:`ToolGateGuardrail` instances alive in the process (as JSON:
``{"in_flight": n, "gates": k}``). The gate itself knows nothing of it; it is not part of
the package.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from litellm.integrations.custom_logger import CustomLogger

from litellm_toolgate import ToolGateGuardrail

PORT_ENV = "TOOLGATE_INFLIGHT_PROBE_PORT"


def count() -> dict[str, int]:
    gates = [o for o in gc.get_objects() if isinstance(o, ToolGateGuardrail)]
    return {"in_flight": sum(g.in_flight for g in gates), "gates": len(gates)}


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps(count()).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _serve(port: int) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="inflight-probe", daemon=True).start()


class InFlightProbe(CustomLogger):
    """Does nothing as a callback: it is only here so the proxy imports this module."""


if os.environ.get(PORT_ENV):
    # Imported a second time in the same process: the first server answers.
    with contextlib.suppress(OSError):
        _serve(int(os.environ[PORT_ENV]))


probe = InFlightProbe()
