"""The dns concern (docs/architecture.md)."""
