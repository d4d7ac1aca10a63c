"""The installvalues concern (docs/architecture.md)."""
