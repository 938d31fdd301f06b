"""The event loop: does the gate hold up an asyncio loop while it works?

``loop``: an async gated stream with a large call, in asyncio debug mode
(``slow_callback_duration = 5 ms``), plain then gated: the slow callbacks asyncio reports,
and every gate entry point that ran on the loop's thread for longer than 5 ms of CPU (timed
by :func:`bench.common.gate_sections`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading

from bench.bodies import rows_arguments, tool_body
from bench.common import Row, Upstream, gate_sections
from bench.e2e import EndToEnd
from bench.report import log


# ---- the event loop ---------------------------------------------------------------------------
class _SlowCallbacks(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0
        self.worst = 0.0

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("Executing") and " took " in message:
            self.count += 1
            seconds = message.rsplit(" took ", 1)[1].split(" ")[0]
            with contextlib.suppress(ValueError):
                self.worst = max(self.worst, float(seconds) * 1000)


def loop_section(up: Upstream, size: int) -> list[Row]:
    arguments = rows_arguments(size)
    body, _ = tool_body(max(6, len(arguments) // 64 + 5), arguments=arguments, name="record_rows")
    up.body = body
    e2e = EndToEnd(up)
    rows: list[Row] = []
    logger = logging.getLogger("asyncio")
    for gated in (False, True):
        handler = _SlowCallbacks()
        logger.addHandler(handler)
        sections: list[tuple[str, float, float]] = []

        async def main(
            gated: bool = gated, sections: list[tuple[str, float, float]] = sections
        ) -> None:
            loop = asyncio.get_running_loop()
            loop.slow_callback_duration = 0.005
            with gate_sections(threading.current_thread(), sections):
                await (e2e.gated_async() if gated else e2e.plain_async())

        try:
            asyncio.run(main(), debug=True)
        finally:
            logger.removeHandler(handler)
        over = [name for name, _, cpu in sections if cpu > 5.0]
        over_wall = [name for name, wall, _ in sections if wall > 5.0]
        worst: dict[str, float] = {}
        worst_cpu: dict[str, float] = {}
        for name, wall, cpu in sections:
            worst[name] = max(worst.get(name, 0.0), wall)
            worst_cpu[name] = max(worst_cpu.get(name, 0.0), cpu)
        row: Row = {
            "section": "loop",
            "name": f"async {'gated' if gated else 'plain'}, {len(arguments) // 1024} KiB call",
            "slow_callbacks": handler.count,
            "worst_callback_ms": handler.worst,
            "gate_sections": len(sections),
            "gate_sections_over_5ms": len(over),
            "worst_gate_section_ms": max(worst_cpu.values(), default=0.0),
            "gate_sections_over_5ms_wall": len(over_wall),
            "worst_gate_section_wall_ms": max(worst.values(), default=0.0),
            "worst_cpu_by_section_ms": worst_cpu,
            "worst_wall_by_section_ms": worst,
        }
        if gated:
            row["met"] = not over
        rows.append(row)
        log(row)
    return rows
