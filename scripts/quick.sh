#!/usr/bin/env bash
# The contributor's quick check: one litellm version (.venv, 1.110.2), no proxy environment,
# no fuzzing. Lint, types, then the suite without the byte-by-byte replays (marker `slow`),
# without the real-proxy tests, with the generated attack streams cut to a tenth
# (TOOLGATE_ATTACK_SCALE=0.1) and the callback's fixture-by-route matrix rotated
# (TOOLGATE_MATRIX=rotate). A few minutes on two cores. CI runs scripts/test.sh, not this.
# Extra arguments go to pytest (e.g. `bash scripts/quick.sh tests/test_docs.py`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export LITELLM_LOCAL_MODEL_COST_MAP=True
# The journal's suite runs on this PostgreSQL server too (tests/test_journal_*.py); with CI
# set, a server that is not there fails the run instead of skipping.
export TOOLGATE_TEST_POSTGRES_URL="${TOOLGATE_TEST_POSTGRES_URL:-postgresql://postgres@127.0.0.1:5432/test}"
export TOOLGATE_ATTACK_SCALE="${TOOLGATE_ATTACK_SCALE:-0.1}"
export TOOLGATE_MATRIX="${TOOLGATE_MATRIX:-rotate}"
.venv/bin/ruff check litellm_toolgate tests fixtures bench
.venv/bin/ruff format --check litellm_toolgate tests fixtures bench
.venv/bin/mypy --strict litellm_toolgate bench
proxy_tests=(tests/test_proxy_*.py)
.venv/bin/python -m pytest -p no:cacheprovider -W ignore::UserWarning -q -x -m "not slow" \
    "${proxy_tests[@]/#/--ignore=}" "$@"
