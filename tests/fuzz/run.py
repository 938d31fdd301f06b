"""Run every fuzz harness for a while, from a seed corpus built from fixtures/.

    python tests/fuzz/run.py --seconds 8          # what CI runs (about half a minute)
    python tests/fuzz/run.py --seconds 3600       # a long run: an hour per harness

Each harness runs in its own libFuzzer process over a fresh corpus directory (kept under
``--corpus DIR`` if given, so a long run can be resumed). A crash or a failed invariant
stops that harness with the input saved by libFuzzer (``crash-*`` in the working
directory) and makes this script exit non-zero. The executions of each harness, from
libFuzzer's own ``Done N runs`` line, are printed and summed.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import _common

HARNESSES = {
    "fuzz_sse.py": [b"\x00" + body for body in _common.bodies()],
    "fuzz_json.py": _common.arguments(),
    # The first byte is the depth limit (see fuzz_json_fast.py).
    "fuzz_json_fast.py": [b"\x3f" + text for text in _common.arguments()],
    "fuzz_wire_json.py": _common.data_lines(),
    # The first byte is the size of the pieces less one (see fuzz_eventstream.py).
    "fuzz_eventstream.py": [b"\x06" + body for body in _common.eventstream_bodies()],
    # The first byte is the size of the pieces less one (see fuzz_ndjson.py).
    "fuzz_ndjson.py": [b"\x06" + body for body in _common.ollama_bodies()],
    # The first byte modulo 6 picks the wire: 0 chat, 1 Responses, 2 Anthropic, 3 Gemini,
    # 4 Ollama, 5 Bedrock (fuzz_core.py).
    "fuzz_core.py": [b"\x00" + body for body in _common.bodies()]
    + [b"\x01" + body for body in _common.responses_bodies()]
    + [b"\x02" + body for body in _common.anthropic_bodies()]
    + [b"\x03" + body for body in _common.gemini_bodies()]
    + [b"\x04" + body for body in _common.ollama_bodies()]
    + [b"\x05" + body for body in _common.eventstream_bodies()],
}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--corpus", type=Path, default=None)
    args = parser.parse_args()
    total, failed = 0, []
    with tempfile.TemporaryDirectory() as scratch:
        base = args.corpus or Path(scratch)
        for harness, seeds in HARNESSES.items():
            corpus = base / harness.removesuffix(".py")
            corpus.mkdir(parents=True, exist_ok=True)
            for n, seed in enumerate(seeds):
                (corpus / f"seed-{n:03d}").write_bytes(seed)
            done = subprocess.run(
                [
                    sys.executable,
                    str(_common.HERE / harness),
                    str(corpus),
                    f"-max_total_time={args.seconds}",
                    "-timeout=20",
                    "-rss_limit_mb=2048",
                    "-max_len=8192",
                ],
                check=False,
                capture_output=True,
                text=True,
                errors="replace",
            )
            runs = re.findall(r"Done (\d+) runs", done.stderr)
            count = int(runs[-1]) if runs else 0
            total += count
            print(f"{harness}: {count:,} inputs in {args.seconds} s, exit {done.returncode}")
            if done.returncode != 0:
                failed.append(harness)
                print(done.stderr[-4000:], file=sys.stderr)
    print(f"fuzz inputs tried: {total:,}; failed harnesses: {len(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
