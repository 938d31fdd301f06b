#!/usr/bin/env bash
# Builds the project's environments from nothing but Python 3.11 and the package index.
#   .venv                   newest litellm core, the package, test, lint and fuzz tools (the demo uses it)
#   .venv-litellm-1.108.7   the newest litellm whose proxy extra installs (with that extra: the
#                           proxy tests start a real LiteLLM proxy from it); tests run on both
# Re-running is cheap: pip leaves satisfied requirements alone.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null || PY=python3

make_env() {
    local dir="$1" litellm_spec="$2" extras="$3"
    [ -x "$dir/bin/python" ] || "$PY" -m venv "$dir"
    "$dir/bin/python" -m pip install --quiet --disable-pip-version-check "$litellm_spec" -e ".[$extras]"
}

if [ "${1:-}" = "--matrix" ]; then
    # The two environments are independent: build them side by side (most of the time is
    # downloading and unpacking), then fail if either failed.
    make_env .venv-litellm-1.108.7 "litellm[proxy]==1.108.7" "test,metrics,otel" &
    older=$!
    status=0
    make_env .venv "litellm==1.110.2" "test,lint,fuzz,metrics,otel" || status=$?
    wait "$older" || status=$?
    exit "$status"
fi
make_env .venv "litellm==1.110.2" "test,lint,fuzz,metrics,otel"
