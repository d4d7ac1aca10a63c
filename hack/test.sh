#!/usr/bin/env bash
# The whole test suite: install what is needed, lint, type-check, then every test (unit,
# integration, e2e and the operator image, tests/image) against a real local control plane of the
# newest supported Kubernetes started by the test session; then the version-sensitive part
# (VERSION_SENSITIVE below) a second time on the oldest supported Kubernetes (OLDEST). Extra
# arguments go to the first pytest run only.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/hack/bootstrap.sh"
cd "$root"
echo "== tools (helm, promtool, kstatus, argocd-lua, cert-manager, coredns) from the Go module proxy, cached" >&2
hack/build-tools.sh >/dev/null
echo "== ruff" >&2
.venv/bin/ruff check operator tests benchmarks
.venv/bin/ruff format --check operator tests benchmarks
echo "== mypy --strict" >&2
.venv/bin/mypy
echo "== import layering" >&2
.venv/bin/lint-imports

# The oldest supported control plane builds in the background, at the lowest CPU priority, while
# the main suite runs (the suite mostly waits on the API server and the operator; a cold build of
# Kubernetes takes minutes of CPU that would otherwise come after it). Cached, it returns at once.
OLDEST=1.30
oldest_log=$(mktemp)
start=$(date +%s)
setsid -w bash -c "TENANT_PLATFORM_K8S=$OLDEST TENANT_PLATFORM_PROGRESS_SECONDS=60 exec nice -n 19 hack/build-control-plane.sh" \
  >/dev/null 2>"$oldest_log" &
oldest_build=$!
# A failing suite ends this script: take the background build (its process group) with it.
trap 'kill -- -"$oldest_build" 2>/dev/null || true; rm -f "$oldest_log"' EXIT

versions=$(hack/build-control-plane.sh --versions)
echo "== pytest (Kubernetes ${versions%%$'\n'*}, the whole suite)" >&2
.venv/bin/pytest "$@"

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
if ! wait "$oldest_build"; then
  cat "$oldest_log" >&2
  echo "building the Kubernetes $OLDEST control plane failed (log above)" >&2
  exit 1
fi
grep -v 'still running' "$oldest_log" >&2 || true
built=$(date +%s)
echo "== pytest (Kubernetes $OLDEST, the version-sensitive part)" >&2
TENANT_PLATFORM_K8S=$OLDEST .venv/bin/pytest -p no:cacheprovider "${VERSION_SENSITIVE[@]}"
echo "== Kubernetes $OLDEST: control plane ready $((built - start))s after the suite began, tests $(($(date +%s) - built))s" >&2
