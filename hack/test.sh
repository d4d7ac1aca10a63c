#!/usr/bin/env bash
# The whole test suite: install what is needed, lint, type-check, then every test (unit,
# integration, e2e and the operator image, tests/image) against a real local control plane of the
# newest supported Kubernetes started by the test session; then the version-sensitive part
# (VERSION_SENSITIVE below) a second time on the oldest supported Kubernetes (OLDEST). Extra
# arguments go to the first pytest run only.
#
# The tests run in parallel (pytest-xdist): TENANT_PLATFORM_TEST_WORKERS processes (default 3),
# each with a control plane of its own, a test file at a time (--dist loadfile: a file's module
# fixtures, such as an operator process, stay in one worker). Most tests wait on the API server
# and on operator passes rather than compute, so a third worker on two cores still shortens the
# run. TENANT_PLATFORM_TEST_WORKERS=0 runs them in this one process, one after another.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
began=$(date +%s)
stage_start=$began
stages=()
stage() {  # stage NAME: record the time since the previous stage ended
  local now
  now=$(date +%s)
  stages+=("$(printf '%-44s %5ds' "$1" $((now - stage_start)))")
  stage_start=$now
}
await_build() {  # await_build PID LOG WHAT: wait for a background build; on failure show its log and stop
  if ! wait "$1"; then
    cat "$2" >&2
    echo "building $3 failed (log above)" >&2
    exit 1
  fi
  grep -v 'still running' "$2" >&2 || true
  stage "waiting for $3"
}
report() {
  if ((${#stages[@]})); then
    echo "== stages (wall clock)" >&2
    printf '   %s\n' "${stages[@]}" >&2
    echo "   total $(($(date +%s) - began))s" >&2
  fi
}

cd "$root"
# Background builds. The tools (helm, promtool, the judges; one Go module and build cache and
# one lock for them all) build beside the Python environment, the newest control plane
# (bootstrap) and lint; the suite waits for them before it starts (a test must not spend its
# timeout waiting for a cold build). The oldest supported control plane (after bootstrap: the
# control plane builds share a lock) is needed only after the suite and builds at the lowest CPU
# priority while lint and the suite run (the suite mostly waits; a cold Kubernetes build takes
# minutes of CPU that would otherwise come after it). Cached, both return at once.
OLDEST=1.30
tools_log=$(mktemp)
oldest_log=$(mktemp)
setsid -w bash -c "TENANT_PLATFORM_PROGRESS_SECONDS=60 exec hack/build-tools.sh" >/dev/null 2>"$tools_log" &
tools_build=$!
oldest_build=
# A failing suite ends this script: take the background builds (their process groups) with it.
trap 'kill -- -"$tools_build" ${oldest_build:+-"$oldest_build"} 2>/dev/null || true; rm -f "$tools_log" "$oldest_log"; report' EXIT

"$root/hack/bootstrap.sh"
cd "$root"
versions=$(hack/build-control-plane.sh --versions)
newest=${versions%%$'\n'*}
stage "bootstrap (venv, control plane $newest)"
setsid -w bash -c "TENANT_PLATFORM_K8S=$OLDEST TENANT_PLATFORM_PROGRESS_SECONDS=60 exec nice -n 19 hack/build-control-plane.sh" \
  >/dev/null 2>"$oldest_log" &
oldest_build=$!

workers=${TENANT_PLATFORM_TEST_WORKERS:-3}
[[ "$workers" =~ ^[0-9]+$ ]] || { echo "TENANT_PLATFORM_TEST_WORKERS must be a whole number, got '$workers'" >&2; exit 2; }
parallel=()
if ((workers > 0)); then parallel=(-n "$workers" --dist loadfile); fi

echo "== ruff" >&2
.venv/bin/ruff check operator tests benchmarks
.venv/bin/ruff format --check operator tests benchmarks
echo "== mypy --strict" >&2
.venv/bin/mypy
echo "== import layering" >&2
.venv/bin/lint-imports
stage "ruff, mypy, import layering"

echo "== tools (helm, promtool, kstatus, argocd-lua, cert-manager, coredns) from the Go module proxy, cached" >&2
await_build "$tools_build" "$tools_log" "the tools"
echo "== pytest (Kubernetes $newest, the whole suite, ${workers} workers)" >&2
.venv/bin/pytest "${parallel[@]}" "$@"
stage "pytest, Kubernetes $newest, the whole suite"

# The oldest supported minor: CRD CEL rules, admission policies (the pod guard battery and its
# type checking, the node guard), server-side apply ownership and drift, the operator end to end.
VERSION_SENSITIVE=(
  tests/integration/test_controlplane.py
  tests/integration/test_crd_validation.py
  tests/integration/test_podguard_baseline.py
  tests/integration/test_podguard_istio_init.py
  tests/integration/test_podguard_exec_guard.py
  tests/integration/test_podguard_scope.py
  tests/integration/test_podguard_shared_guard.py
  tests/integration/test_podguard_staged.py
  tests/integration/test_podguard_updates.py
  tests/integration/test_podguard_type_checking.py
  tests/integration/test_podguard_version_support.py
  tests/integration/test_operator_node_guard.py
  tests/integration/test_reconcile_core.py
  tests/integration/test_gpu.py
  tests/e2e/test_operator.py
)
echo "== control plane for Kubernetes $OLDEST (built once, then cached; started beside the suite)" >&2
await_build "$oldest_build" "$oldest_log" "the Kubernetes $OLDEST control plane"
echo "== pytest (Kubernetes $OLDEST, the version-sensitive part)" >&2
TENANT_PLATFORM_K8S=$OLDEST .venv/bin/pytest -p no:cacheprovider "${parallel[@]}" "${VERSION_SENSITIVE[@]}"
stage "pytest, Kubernetes $OLDEST, the version-sensitive part"
