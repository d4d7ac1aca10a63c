"""The installer concern (docs/architecture.md)."""
