"""The target concern (docs/architecture.md)."""
