#!/usr/bin/env bash
# Set up both environments, lint and type-check, then run the whole suite on litellm
# 1.110.2 (.venv), the fuzz harnesses for a few seconds each (on .venv, which has atheris),
# and every suite that touches litellm again on litellm 1.108.7 (.venv-litellm-1.108.7),
# with the real proxy. Network use: loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --matrix
export LITELLM_LOCAL_MODEL_COST_MAP=True
# The journal's suite runs on this PostgreSQL server too (tests/test_journal_*.py); with CI
# set, a server that is not there fails the run instead of skipping.
export TOOLGATE_TEST_POSTGRES_URL="${TOOLGATE_TEST_POSTGRES_URL:-postgresql://postgres@127.0.0.1:5432/test}"
.venv/bin/ruff check litellm_toolgate tests fixtures bench
.venv/bin/ruff format --check litellm_toolgate tests fixtures bench
.venv/bin/mypy --strict litellm_toolgate bench
echo "== tests on litellm $(.venv/bin/python -c 'from importlib.metadata import version; print(version("litellm"))') =="
echo "   (tests/test_proxy_e2e.py and tests/test_proxy_anthropic.py, the real-proxy tests, are left out here: litellm 1.110.2's [proxy]"
echo "    extra does not resolve on the registry; they run on 1.108.7 below)"
# The footprint and soak suites measure process-wide state (live objects, resident memory,
# litellm's global client caches): each runs in a process of its own, after the rest.
own_process=(tests/test_sync_footprint.py tests/test_sync_soak.py)
.venv/bin/python -m pytest -p no:cacheprovider -W ignore::UserWarning --ignore=tests/test_proxy_e2e.py \
    --ignore=tests/test_proxy_anthropic.py "${own_process[@]/#/--ignore=}" "$@"
for f in "${own_process[@]}"; do
    .venv/bin/python -m pytest -p no:cacheprovider -W ignore::UserWarning "$f" "$@"
done
echo "== fuzzing, time-boxed (tests/fuzz/run.py) =="
.venv/bin/python tests/fuzz/run.py --seconds 6
echo "== tests on litellm $(.venv-litellm-1.108.7/bin/python -c 'from importlib.metadata import version; print(version("litellm"))') =="
# The sans-I/O core imports no litellm (tests/test_core_without_litellm.py proves it), so its
# own suites say nothing new on a second litellm version: they ran above, and are left out
# here to keep the run short. Everything that touches litellm runs again, the proxy with it.
core_only=()
for f in tests/test_core_*.py tests/test_sse.py tests/test_strictjson*.py tests/test_registry*.py \
         tests/test_schema_differential.py tests/test_ecmaregex.py; do
    core_only+=("--ignore=$f")
done
# The typing check runs mypy, which only the lint environment (.venv) has; it checks the
# package's own annotations, the same on either litellm version.
core_only+=("--ignore=tests/test_gate_typing.py")
echo "   (the core's own suites, litellm-independent, ran on 1.110.2 above: ${#core_only[@]} files left out)"
# The 10,000-call soak ran on 1.110.2 above; here the footprint suite runs in its own process.
TOOLGATE_REQUIRE_PROXY=1 .venv-litellm-1.108.7/bin/python -m pytest -p no:cacheprovider \
    -W ignore::UserWarning "${core_only[@]}" "${own_process[@]/#/--ignore=}" "$@"
.venv-litellm-1.108.7/bin/python -m pytest -p no:cacheprovider -W ignore::UserWarning \
    tests/test_sync_footprint.py "$@"
