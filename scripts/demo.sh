#!/usr/bin/env bash
# Set up .venv if needed, then run `toolgate demo` (a loopback fake CometAPI unless COMETAPI_KEY is set).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export LITELLM_LOCAL_MODEL_COST_MAP=True
exec .venv/bin/toolgate demo "$@"
