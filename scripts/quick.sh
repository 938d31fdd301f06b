#!/usr/bin/env bash
# The contributor's quick check, a couple of minutes on two cores: one litellm version
# (.venv, 1.110.2), no proxy environment. Lint, types, then the core's own suites and a
# smoke set of the edge through the real litellm (wrap and callback, sync and async, the
# call-type table, the strict settings), without the byte-by-byte replays (marker `slow`)
# and with the generated attack streams cut to a tenth (TOOLGATE_ATTACK_SCALE=0.1).
#   bash scripts/quick.sh                      # the quick set
#   bash scripts/quick.sh tests/test_docs.py   # these tests instead (same settings)
#   bash scripts/quick.sh --wide               # every suite but the real proxies' (~20 min)
# CI runs scripts/test.sh, not this.
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
pytest=(.venv/bin/python -m pytest -p no:cacheprovider -W ignore::UserWarning -q -x -m "not slow")
if [ "${1:-}" = "--wide" ]; then
    shift
    proxy_tests=(tests/test_proxy_*.py)
    exec "${pytest[@]}" "${proxy_tests[@]/#/--ignore=}" --ignore=tests/test_frameworks_lane.py "$@"
fi
if [ "$#" -gt 0 ]; then
    exec "${pytest[@]}" "$@"
fi
exec "${pytest[@]}" \
    tests/test_core_*.py tests/test_sse.py tests/test_strictjson*.py tests/test_registry*.py \
    tests/test_schema_differential.py tests/test_ecmaregex.py \
    tests/test_gate_litellm.py tests/test_gate_loopback.py tests/test_gate_behaviour.py \
    tests/test_gate_lifecycle.py tests/test_callback_release.py tests/test_callback_sync.py \
    tests/test_calltypes.py tests/test_config_strict.py tests/test_no_leak.py \
    tests/test_policies_gate.py tests/test_house.py
