"""The mesh concern (docs/architecture.md)."""
