"""A real LiteLLM proxy process on 127.0.0.1, started from one of ``config_examples/``.

The example YAML is copied as is into a temporary folder (with the files it names), except
that the gate's ``idle_timeout`` is lowered so the stall fixture does not cost half a minute,
and that a test-only callback (``inflight_probe``) is added, which answers on a loopback port
how many requests the gate holds in the proxy process (:meth:`Proxy.in_flight`).
The proxy gets a strong random master key and a free loopback port; readiness is polled with
a bounded timeout, and the process group is always killed at the end.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "config_examples"
STYLES = {"callbacks": "proxy_callbacks.yaml", "guardrails": "proxy_guardrails.yaml"}
READY_TIMEOUT = 180.0
IDLE_TIMEOUT = 2


def proxy_missing() -> str | None:
    """Why this environment cannot start a proxy, or None when it can."""
    binary = Path(sys.executable).with_name("litellm")
    if not binary.exists():
        return f"no litellm command next to {sys.executable}"
    for module in ("fastapi", "uvicorn", "backoff", "orjson", "apscheduler"):
        try:
            __import__(module)
        except ImportError:
            return f"litellm's proxy extra is not installed ({module} is missing)"
    return None


def require_proxy(missing: str | None = None) -> None:
    """At a proxy test module's top: skip the module when this environment cannot start a
    proxy (``missing``, or :func:`proxy_missing`'s answer), unless ``TOOLGATE_REQUIRE_PROXY``
    says the proxy tests must run here (CI's lane 2), where that is an error."""
    missing = missing or proxy_missing()
    if missing is None:
        return
    if os.environ.get("TOOLGATE_REQUIRE_PROXY"):
        raise RuntimeError(f"TOOLGATE_REQUIRE_PROXY is set but {missing}")
    import pytest

    pytest.skip(missing, allow_module_level=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# Every time a proxy process was found dead between tests and started again: what it said
# (printed in the run's summary by tests/conftest.py).
RESTARTS: list[str] = []


@dataclass
class Proxy:
    base_url: str
    key: str
    process: subprocess.Popen[bytes]
    log: Path
    probe_port: int
    start: Callable[[], subprocess.Popen[bytes]] | None = None
    restarted: bool = False

    def ensure_running(self) -> None:
        """Start the proxy again if its process has ended since the last test.

        Called where a test makes its client, before it sends anything. A proxy that dies
        during a test fails that test; one found dead between tests is reported
        (:data:`RESTARTS`, the run's summary) and started again, once: a second death fails.
        A gate that crashes the proxy on some request crashes the new one on the same
        request, which fails.
        """
        if self.process.poll() is None:
            return
        what = self.describe()
        if self.restarted or self.start is None:
            raise RuntimeError(f"the proxy process ended again:\n{what}")
        RESTARTS.append(what)
        self.restarted = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)  # anything it left holding the port
        self.process = self.start()
        self.wait_ready()

    def wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while not self.alive():
            if self.process.poll() is not None:
                raise RuntimeError(f"the proxy exited at start-up:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the proxy was not ready in {READY_TIMEOUT} s")
            time.sleep(0.25)

    def in_flight(self) -> int:
        """The gate's in-flight count in the proxy process (see inflight_probe)."""
        answer = httpx.get(f"http://127.0.0.1:{self.probe_port}/", timeout=10).json()
        assert answer["gates"] >= 1, answer  # the probe sees the gate it counts
        return int(answer["in_flight"])

    def rss_bytes(self) -> int:
        """Resident memory of the proxy process (Linux /proc)."""
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS line")

    def alive(self) -> bool:
        if self.process.poll() is not None:
            return False
        try:
            response = httpx.get(f"{self.base_url}/health/liveliness", timeout=5)
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    def describe(self) -> str:
        """Whether the process is running, or how it ended, with the end of its log."""
        code = self.process.poll()
        state = "running" if code is None else f"exited with status {code}"
        return f"proxy pid {self.process.pid}: {state}\n{self.log_tail(60)}"

    def log_tail(self, lines: int = 40) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        return ""


def prepare(style: str, folder: Path) -> Path:
    """Copy the example config of ``style`` (and what it names) into ``folder``."""
    for name in ("tools.json", "toolgate.yaml", "toolgate_callback.py", STYLES[style]):
        shutil.copy(EXAMPLES / name, folder / name)
    shutil.copy(Path(__file__).with_name("inflight_probe.py"), folder / "inflight_probe.py")
    settings = folder / ("toolgate.yaml" if style == "callbacks" else STYLES[style])
    text = settings.read_text()
    assert "idle_timeout: 30" in text
    settings.write_text(text.replace("idle_timeout: 30", f"idle_timeout: {IDLE_TIMEOUT}"))
    config = folder / STYLES[style]
    text = config.read_text()
    if style == "callbacks":
        old = "  callbacks: toolgate_callback.gate\n"
        new = "  callbacks: [toolgate_callback.gate, inflight_probe.probe]\n"
    else:
        old = "litellm_settings:\n"
        new = "litellm_settings:\n  callbacks: [inflight_probe.probe]\n"
    assert text.count(old) == 1, style
    config.write_text(text.replace(old, new))
    return config


@contextlib.contextmanager
def running_proxy(
    config: Path, upstream_base: str, extra_env: dict[str, str] | None = None
) -> Iterator[Proxy]:
    port = free_port()
    probe_port = free_port()
    key = "sk-" + secrets.token_hex(24)
    env = {
        **os.environ,
        "LITELLM_MASTER_KEY": key,
        "TOOLGATE_UPSTREAM": upstream_base,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "NO_PROXY": "127.0.0.1,localhost",
        "TOOLGATE_INFLIGHT_PROBE_PORT": str(probe_port),
        # A crash in native code leaves the Python stacks in the log (see Proxy.describe).
        "PYTHONFAULTHANDLER": "1",
        **(extra_env or {}),
    }
    log = config.with_suffix(".log")
    binary = Path(sys.executable).with_name("litellm")
    command = [str(binary), "--config", str(config), "--host", "127.0.0.1", "--port", str(port)]

    def start() -> subprocess.Popen[bytes]:
        with log.open("ab") as out:
            return subprocess.Popen(
                command,
                cwd=config.parent,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    log.write_bytes(b"")
    proxy = Proxy(f"http://127.0.0.1:{port}", key, start(), log, probe_port, start)
    try:
        proxy.wait_ready()
        yield proxy
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proxy.process.pid, signal.SIGKILL)
        proxy.process.wait(timeout=30)
