"""The storage concern (docs/architecture.md)."""
