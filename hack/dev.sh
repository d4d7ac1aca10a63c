#!/usr/bin/env bash
# The embedded default: install what is needed, then `tenant-platform dev` with the given options
# (for example --once, --output json, --kubeconfig PATH, -f FILE).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/hack/bootstrap.sh"
cd "$root"
exec .venv/bin/tenant-platform dev "$@"
