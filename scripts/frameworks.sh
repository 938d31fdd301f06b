#!/usr/bin/env bash
# The frameworks lane alone: builds .venv (the Agents SDK) and the frameworks' environments
# (scripts/setup.sh --frameworks), then runs tests/test_frameworks_lane.py: every framework,
# call shape, model route and scenario, each framework in a subprocess of its own under a
# per-case watchdog. TOOLGATE_FRAMEWORKS=smolagents,adk limits it to some frameworks.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || bash scripts/setup.sh
bash scripts/setup.sh --frameworks
export LITELLM_LOCAL_MODEL_COST_MAP=True
exec .venv/bin/python -m pytest -p no:cacheprovider -W ignore::UserWarning tests/test_frameworks_lane.py "$@"
