#!/usr/bin/env bash
# Set up both environments, then run, in two lanes side by side (the machine has two cores
# and each lane is one test process at a time):
#   lane 1: lint and the type check, every suite that touches litellm on litellm 1.110.2
#           (.venv), its footprint suite, the core's own suites (litellm-independent: once),
#           then the 10,000-call soak in a process of its own (it judges its own
#           process's resident memory, which the other lane does not move); the callback's
#           fixture-by-route matrix runs rotated here (TOOLGATE_MATRIX=rotate: every
#           fixture, sync and async, on one route each, the routes in turn) and whole in
#           lane 2;
#   lane 2: the same suites again on litellm 1.108.7 (.venv-litellm-1.108.7) with the real
#           proxies, except those that test the project's own machinery rather than what
#           litellm does with it (the attack suites, the journal's crash kit and races, the
#           packaging and the bench smoke: `once` below, run in lane 1 only); its footprint
#           suite, the fuzz harnesses for a few seconds each, then the frameworks lane.
# Each lane's suite prints its 30 slowest tests. A lane is a core, not an environment: the
# split keeps the two lanes about as long (a trial run on 4 December 2026, under load: lane
# 1's suite 18.7 minutes, the soak 5.6; lane 2's suite 21.4, the core's suites 1.4 (since
# moved to lane 1), the fuzzing about 1, the frameworks lane about 3 with its set-up).
# Lane 1 prints as it goes; lane 2's output follows when both are done. Every step runs
# even after another failed; any step failing fails the run. Network use: loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --matrix
export LITELLM_LOCAL_MODEL_COST_MAP=True
# The journal's suite runs on this PostgreSQL server too (tests/test_journal_*.py); with CI
# set, a server that is not there fails the run instead of skipping. Every test gets its own
# schema, Redis key prefix or cache namespace, so the two lanes never share state.
export TOOLGATE_TEST_POSTGRES_URL="${TOOLGATE_TEST_POSTGRES_URL:-postgresql://postgres@127.0.0.1:5432/test}"

pytest_new=(.venv/bin/python -m pytest -p no:cacheprovider -W ignore::UserWarning)
pytest_old=(.venv-litellm-1.108.7/bin/python -m pytest -p no:cacheprovider -W ignore::UserWarning)
# The footprint and soak suites measure process-wide state (live objects, resident memory,
# litellm's global client caches): each runs in a process of its own, after the rest.
own_process=(tests/test_sync_footprint.py tests/test_sync_soak.py)
# The sans-I/O core imports no litellm (tests/test_core_without_litellm.py proves it), so
# its own suites say nothing new on a second litellm version: they run once, in lane 1.
core_only=(tests/test_core_*.py tests/test_sse.py tests/test_strictjson*.py tests/test_registry*.py
           tests/test_schema_differential.py tests/test_ecmaregex.py tests/test_gate_typing.py
           tests/test_policies_command_*.py)
# Suites whose subject is the project's own machinery (the gate's defences against a hostile
# upstream, the journal under crashes and races, the built wheel, the bench's rows): one
# litellm version says all they can, so they run in lane 1 only.
once=(tests/test_attack_*.py tests/test_loop_crash.py tests/test_journal_race.py
      tests/test_loop_one_driver.py tests/test_journal_runlease.py
      tests/test_packaging.py tests/test_bench_smoke.py tests/test_bench_collections.py)
slowest=(--durations=30 --durations-min=1.0)
# The frameworks lane (agent frameworks as real clients, each in its own virtualenv) runs at
# the end of lane 2 only, on litellm 1.110.2: its environments are built there, while lane 1
# is still testing.
frameworks=(tests/test_frameworks_lane.py)

lane_new() {
    echo "== lane 1: tests on litellm $(.venv/bin/python -c 'from importlib.metadata import version; print(version("litellm"))') =="
    local proxy_tests=(tests/test_proxy_*.py)
    echo "   (the real-proxy tests, ${proxy_tests[*]}, are left out here: litellm 1.110.2's [proxy]"
    echo "    extra does not resolve on the registry; they run on 1.108.7 in lane 2)"
    local rc=0
    # Lint and the type check run here, on lane 1's core, while lane 2 starts testing (run
    # before the lanes, they kept the second core idle for about a minute).
    echo "== lint (ruff) and type check (mypy --strict) =="
    .venv/bin/ruff check litellm_toolgate tests fixtures bench || rc=1
    .venv/bin/ruff format --check litellm_toolgate tests fixtures bench || rc=1
    .venv/bin/mypy --strict litellm_toolgate bench || rc=1
    echo "   (the core's own suites, ${#core_only[@]} files, run after this suite, once)"
    TOOLGATE_MATRIX=rotate "${pytest_new[@]}" "${slowest[@]}" "${proxy_tests[@]/#/--ignore=}" \
        "${core_only[@]/#/--ignore=}" "${own_process[@]/#/--ignore=}" \
        "${frameworks[@]/#/--ignore=}" "$@" || rc=1
    "${pytest_new[@]}" tests/test_sync_footprint.py "$@" || rc=1
    echo "== the core's own suites, litellm-independent, once (.venv) =="
    "${pytest_new[@]}" "${core_only[@]}" "$@" || rc=1
    echo "== the 10,000-call soak, on litellm 1.110.2 (.venv), in a process of its own =="
    "${pytest_new[@]}" tests/test_sync_soak.py "$@" || rc=1
    return "$rc"
}

lane_old() {
    echo "== lane 2: tests on litellm $(.venv-litellm-1.108.7/bin/python -c 'from importlib.metadata import version; print(version("litellm"))') =="
    local rc=0
    echo "   (${once[*]} run in lane 1 only)"
    TOOLGATE_REQUIRE_PROXY=1 "${pytest_old[@]}" "${slowest[@]}" "${core_only[@]/#/--ignore=}" \
        "${own_process[@]/#/--ignore=}" "${once[@]/#/--ignore=}" \
        "${frameworks[@]/#/--ignore=}" "$@" || rc=1
    "${pytest_old[@]}" tests/test_sync_footprint.py "$@" || rc=1
    # The fuzzers need atheris, in .venv only.
    echo "== fuzzing, time-boxed (tests/fuzz/run.py) =="
    .venv/bin/python tests/fuzz/run.py --seconds 6 || rc=1
    echo "== the frameworks lane, on litellm 1.110.2 (scripts/frameworks.sh) =="
    bash scripts/frameworks.sh "$@" || rc=1
    return "$rc"
}

lane2_log="$(mktemp)"
trap 'rm -f "$lane2_log"' EXIT
lane_old "$@" >"$lane2_log" 2>&1 &
lane2=$!
status1=0
lane_new "$@" || status1=$?
status2=0
wait "$lane2" || status2=$?
cat "$lane2_log"
echo "== lane 1 exit $status1, lane 2 exit $status2 =="
if [ "$status1" -ne 0 ] || [ "$status2" -ne 0 ]; then
    # A process the kernel killed (out of memory, a fault) is named there, not in any log.
    echo "== the kernel's last messages (dmesg), when readable =="
    dmesg 2>/dev/null | tail -n 30 || true
fi
[ "$status1" -eq 0 ] && [ "$status2" -eq 0 ]
