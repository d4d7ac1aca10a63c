"""The pullsecrets concern (docs/architecture.md)."""
