"""The benchmark's upstream, in its own process: ``python -m bench.serve DIR``.

It runs :class:`FakeUpstream` on 127.0.0.1 and prints its port. Each request names, in
its last message's content, a file in ``DIR`` holding the body to serve (files are read
once and kept). A separate process keeps the server's CPU time and its threads out of the
measured process: they would otherwise count in ``process_time`` and compete for the GIL
with the stream being measured. It stops when its standard input closes.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from litellm_toolgate.loopback import upstream as fake
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted

# A 20,000-event body is written in one go and read at litellm's pace (a millisecond or more
# per chunk): the fake's 10 s socket timeout would cut it off. Only this process is changed.
fake._Handler.timeout = 600.0


def main() -> int:
    folder = Path(sys.argv[1])
    bodies: dict[str, bytes] = {}

    def handler(payload: dict[str, Any]) -> Scripted:
        name = str(payload["messages"][-1]["content"])
        if name not in bodies:
            bodies[name] = (folder / Path(name).name).read_bytes()
        return Scripted(bodies[name])

    with FakeUpstream(handler=handler) as upstream:
        print(upstream.port, flush=True)
        sys.stdin.read()
    return 0


if __name__ == "__main__":
    sys.exit(main())
