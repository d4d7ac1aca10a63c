"""The gpu concern (docs/architecture.md)."""
