#!/usr/bin/env bash
# Set up .venv if needed, then run the benchmark suite (`python -m bench`; `--quick` for a
# smoke run). Serves its bodies from a loopback server; writes bench/results.{json,md}.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export LITELLM_LOCAL_MODEL_COST_MAP=True
exec .venv/bin/python -m bench "$@"
