#!/usr/bin/env bash
# Install everything the project needs on a fresh machine, idempotently:
#   - a virtual environment in .venv with the package (editable) and its dev tools;
#   - the local control plane binaries (etcd, kube-apiserver, kube-controller-manager, kubectl),
#     built from the Go module proxy into a cache keyed by version (hack/build-control-plane.sh).
# Re-running it is cheap: pip and the build script skip what is already there.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
python=${PYTHON:-python3}

"$python" - <<'PY'
import sys
if sys.version_info < (3, 11):
    raise SystemExit(f"Python 3.11 or newer is needed, found {sys.version.split()[0]}")
PY
command -v go >/dev/null || { echo "Go is needed to build the local control plane (go 1.26)" >&2; exit 1; }

stamp=.venv/.bootstrap-stamp
want=$(cat pyproject.toml requirements.lock | sha256sum | cut -c1-16)
if [[ ! -x .venv/bin/python || "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
  echo "bootstrap: installing the Python environment in .venv" >&2
  "$python" -m venv .venv
  .venv/bin/python -m pip install --quiet --upgrade pip
  # Runtime dependencies at the versions the image installs (requirements.lock); dev tools on top.
  # NB: the lock's hashes would switch pip to hash-checking mode, which an editable install
  # cannot satisfy; the image installs with hashes, here the exact versions are enough.
  constraints=$(mktemp); trap 'rm -f "$constraints"' EXIT
  sed -n -E 's/^([A-Za-z0-9_.-]+==[^ ;\\]+).*/\1/p' requirements.lock > "$constraints"
  .venv/bin/python -m pip install --quiet -c "$constraints" -e ".[dev]"
  echo "$want" > "$stamp"
fi

echo "bootstrap: local control plane binaries (first build: several minutes)" >&2
hack/build-control-plane.sh >/dev/null
