#!/usr/bin/env bash
# Regenerate requirements.lock: every runtime dependency of pyproject.toml, plus the build backend
# (setuptools, wheel), pinned to an exact version with the sha256 of every file PyPI serves for it.
# The Dockerfile installs it with `pip install --require-hashes`; tests/packaging checks that the
# same steps work in a fresh virtual environment.
#
#   hack/lock.sh             resolve with the versions installed in .venv (what the tests run with)
#   hack/lock.sh --upgrade   resolve the newest versions PyPI allows (then reinstall .venv from it)
#
# pip-tools runs from a throwaway virtual environment so it never lands in .venv.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=${PYTHON:-"$root/.venv/bin/python"}
pip_tools_version=7.6.2

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$python" -m venv "$tmp/venv"
# NB: a local find-links directory would end up in the lock's hashes; resolve from the index only.
export PIP_FIND_LINKS= PIP_NO_INDEX=
"$tmp/venv/bin/pip" install --quiet "pip-tools==$pip_tools_version"

args=(--quiet --generate-hashes --allow-unsafe --strip-extras --no-emit-find-links --no-emit-index-url
      --build-deps-for=wheel --output-file "$root/requirements.lock")
if [[ "${1:-}" == "--upgrade" ]]; then
  args+=(--upgrade)
else
  # Pin to what .venv has (pip, setuptools and wheel excluded: the build backend is resolved
  # from pyproject's build-system table), so the image runs what the tests ran.
  "$python" -m pip freeze --exclude-editable --all | grep -viE '^(pip|setuptools|wheel)==' > "$tmp/constraints.txt"
  args+=(--constraint "$tmp/constraints.txt")
fi
cd "$root"
CUSTOM_COMPILE_COMMAND="hack/lock.sh" "$tmp/venv/bin/pip-compile" "${args[@]}" --annotation-style=line pyproject.toml
# The constraints file is temporary: drop it from the "# via" annotations.
sed -i -E -e 's#-c [^ ,]*constraints\.txt(, )?##' -e '/^ +# via *$/d' requirements.lock
echo "wrote requirements.lock" >&2
