# Developer shortcuts; the two README commands (hack/dev.sh, hack/test.sh) need nothing else.
.DEFAULT_GOAL := help
VENV := .venv/bin

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

bootstrap: ## install the venv and build the local control plane (cached)
	hack/bootstrap.sh

fmt: bootstrap ## format the code
	$(VENV)/ruff format operator tests benchmarks
	$(VENV)/ruff check --fix operator tests benchmarks

lint: bootstrap ## ruff and the import layering contracts
	$(VENV)/ruff check operator tests benchmarks
	$(VENV)/ruff format --check operator tests benchmarks
	$(VENV)/lint-imports

typecheck: bootstrap ## mypy --strict on the package
	$(VENV)/mypy

unit: bootstrap ## the fast tests (no cluster)
	$(VENV)/pytest tests/unit

golden: bootstrap ## regenerate tests/golden/ (what `render` prints) after an intended change
	PYTHONPATH=operator $(VENV)/python -m tests.golden.update

test: ## everything CI runs (the README test command)
	hack/test.sh

verify: bootstrap ## generated deploy/ files match their sources (crds/, deploy/base/rbac.yaml)
	$(VENV)/python hack/sync-deploy.py --check

release: ## build the release artifacts into dist/ (hack/release.sh; --image: make release ARGS=--image)
	hack/release.sh $(ARGS)

dev: ## the embedded demo (keeps running; Ctrl-C to stop)
	hack/dev.sh

bench: bootstrap ## reconcile benchmark (50 platforms) and GPU scale benchmark (quick)
	$(VENV)/python -m benchmarks.reconcile_bench --platforms 50
	$(VENV)/python -m benchmarks.gpu_scale --quick

.PHONY: help bootstrap fmt lint typecheck unit golden test verify release dev bench
