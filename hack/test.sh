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
echo "== tools (helm, promtool, kstatus, argocd-lua) from the Go module proxy, cached" >&2
hack/build-tools.sh >/dev/null
echo "== ruff" >&2
.venv/bin/ruff check operator tests benchmarks
.venv/bin/ruff format --check operator tests benchmarks
echo "== mypy --strict" >&2
.venv/bin/mypy
echo "== import layering" >&2
.venv/bin/lint-imports
echo "== pytest (Kubernetes $(hack/build-control-plane.sh --versions | head -1), the whole suite)" >&2
.venv/bin/pytest "$@"

# The oldest supported minor: CRD CEL rules, admission policies (the pod guard battery and its
# type checking, the node guard), server-side apply ownership and drift, the operator end to end.
OLDEST=1.30
VERSION_SENSITIVE=(
  tests/integration/test_controlplane.py
  tests/integration/test_crd_validation.py
  tests/integration/test_podguard.py
  tests/integration/test_operator_node_guard.py
  tests/integration/test_reconcile_core.py
  tests/integration/test_gpu.py
  tests/e2e/test_operator.py
)
start=$(date +%s)
echo "== control plane for Kubernetes $OLDEST (built once, then cached)" >&2
TENANT_PLATFORM_K8S=$OLDEST hack/build-control-plane.sh >/dev/null
built=$(date +%s)
echo "== pytest (Kubernetes $OLDEST, the version-sensitive part)" >&2
TENANT_PLATFORM_K8S=$OLDEST .venv/bin/pytest -p no:cacheprovider "${VERSION_SENSITIVE[@]}"
echo "== Kubernetes $OLDEST: control plane $((built - start))s, tests $(($(date +%s) - built))s" >&2
