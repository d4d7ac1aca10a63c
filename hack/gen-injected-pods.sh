#!/usr/bin/env bash
# Regenerate tests/fixtures/injected/ (real injected pods and the injectors' values) with istioctl:
# builds istioctl from the Go module proxy if it is not cached (hack/build-tools.sh istioctl),
# starts a throw-away local control plane (kube-inject needs an API server) and writes the files.
# See operator/tenant_platform/testing/injectedpods.py for the cases.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
bash hack/build-tools.sh istioctl >/dev/null
PYTHONPATH=operator exec "$python" -m tenant_platform.testing.injectedpods "$@"
