"""The gateway concern (docs/architecture.md)."""
