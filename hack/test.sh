#!/usr/bin/env bash
# The whole test suite: install what is needed, lint, type-check, then every test (unit,
# integration and e2e) against a real local control plane started by the test session.
# Extra arguments go to pytest.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/hack/bootstrap.sh"
cd "$root"
echo "== delivery tools (helm, promtool) from the Go module proxy, cached" >&2
hack/build-tools.sh >/dev/null
echo "== ruff" >&2
.venv/bin/ruff check operator tests benchmarks
.venv/bin/ruff format --check operator tests benchmarks
echo "== mypy --strict" >&2
.venv/bin/mypy
echo "== import layering" >&2
.venv/bin/lint-imports
echo "== pytest" >&2
exec .venv/bin/pytest "$@"
