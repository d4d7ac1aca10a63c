"""Packaging tests: slow (they install from PyPI into fresh virtual environments), run in CI.
The ``slow`` marker is registered in pyproject.toml."""
