"""The objectstore concern (docs/architecture.md)."""
